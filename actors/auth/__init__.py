"""OAuth 2.1 for remote MCP servers: discovery (pure), records, and the per-server provider."""

# The grants a server's ``oauth.flow`` may name; here, so the config loader can check
# them without importing the OAuth code.
FLOWS = ("authorization_code", "client_credentials", "cross_app_access", "jwt_bearer")

# The values of ``oauth.dpop`` (actors/auth/dpop.py): use DPoP when the authorization
# server offers it, insist on it, or never.
DPOP_MODES = ("auto", "required", "off")

# The keys of a server's ``oauth`` block (read by settings.OAuthSettings.from_mapping),
# every value a string but ``token_exchange`` (true or false).
SETTING_KEYS = (
    "client_id", "client_secret", "scope", "flow", "client_metadata_url", "private_key",
    "signing_algorithm", "token_endpoint_auth_method",
    "idp_token_endpoint", "idp_client_id", "idp_client_secret", "id_token",
    "dpop", "assertion", "assertion_file", "token_exchange", "subject_token_type",
)  # fmt: skip
