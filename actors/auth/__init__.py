"""OAuth 2.1 for remote MCP servers: discovery (pure), records, and the per-server provider."""

# The grants a server's ``oauth.flow`` may name; here, so the config loader can check
# them without importing the OAuth code.
FLOWS = ("authorization_code", "client_credentials", "cross_app_access")
