"""One supervised connection to one MCP server."""
