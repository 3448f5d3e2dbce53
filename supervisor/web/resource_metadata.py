"""What sign-in tells a client so it finds the authorization server on its own: the
protected-resource metadata (RFC 9728) and the ``WWW-Authenticate`` of a 401 that
points at it, as the MCP authorization spec has clients read them.

``/mcp``'s document is at ``/.well-known/oauth-protected-resource/mcp`` and the admin
API's at ``…/v1``; ``/.well-known/oauth-protected-resource`` itself answers the same
document, for clients that look there first. All three describe one resource, the
configured ``signin.resource``.
"""

from __future__ import annotations

import re
from typing import Any

from supervisor.settings.signin import SigninSettings

WELL_KNOWN = "/.well-known/oauth-protected-resource"
_UNQUOTABLE = re.compile(r'[^\x20-\x7e]|["\\=]')
"""What a reason may not carry into the header: what breaks a quoted string, and ``=``,
so no text in it reads as an auth-param to a client that searches the header for one
(claims it quotes are the token's, not ours)."""


def metadata_document(settings: SigninSettings) -> dict[str, Any]:
    """The RFC 9728 document of this service."""
    return {
        "resource": settings.resource,
        "authorization_servers": [issuer.issuer for issuer in settings.issuers],
        "bearer_methods_supported": ["header"],
    }


def metadata_url(settings: SigninSettings, operation: str | None) -> str:
    """The document a 401 for ``operation`` points at: ``/mcp``'s or the admin API's."""
    suffix = "/mcp" if operation is not None and operation.startswith("mcp_") else "/v1"
    return f"{settings.resource}{WELL_KNOWN}{suffix}"


def challenge(settings: SigninSettings, operation: str | None, reason: str | None) -> str:
    """A 401's ``WWW-Authenticate``: the metadata's URL first, and why a presented token
    was refused (``reason``; None: no token was presented)."""
    pointer = f'Bearer resource_metadata="{metadata_url(settings, operation)}"'
    if reason is None:
        return pointer
    description = _UNQUOTABLE.sub("?", reason)
    return f'{pointer}, error="invalid_token", error_description="{description}"'
