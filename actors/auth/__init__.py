"""OAuth 2.1 for remote MCP servers: discovery (pure), records, and the per-server provider."""
