"""The one way an OAuth step fails: :class:`~actors.transport_errors.AuthRequired` with
``needs_login``, which parks the server in the ``needs_auth`` condition instead of a
retry loop. Texts name the server and the step, never a token."""

from __future__ import annotations

from actors.log_events import get_logger
from actors.transport_errors import AuthRequired

_log = get_logger("actors.auth")


def auth_failed(server: str, detail: str) -> AuthRequired:
    """A step that cannot succeed without a person (logged once, here)."""
    _log.warning("authorization failed", extra={"fields": {"server": server, "reason": detail}})
    return AuthRequired(server, 401, detail=detail, needs_login=True)


def needs_login(server: str) -> AuthRequired:
    """The flow needs a person's consent and no authorizer can ask for it."""
    return AuthRequired(
        server,
        401,
        detail=f"it needs consent first: run `mcp-supervisor auth login {server}`",
        needs_login=True,
    )
