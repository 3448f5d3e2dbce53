"""API errors: an answer other than success, with a stable code and a message that says
how to fix the request. Every app of ``serve`` refuses with these (the admin API as
``{"error": {"code", "message"}}``, ``/mcp`` inside a JSON-RPC error object)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.log_events import get_logger
from supervisor.web.roles import Action, Principal, allowed_roles, denial_message

log = get_logger("supervisor.admin")

CODES: Mapping[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "too_large",
    415: "unsupported_media_type",
    426: "upgrade_required",
    429: "too_many_requests",
}
"""The error code of an HTTP status that has no more specific one."""


METHOD_NOT_ALLOWED = "The method is not allowed for the requested URL."
"""A 405's message (werkzeug's words, which the admin API's routes answer with too)."""


def code_of(status: int) -> str:
    """The error code of ``status`` (``server_error`` for a 5xx we did not name)."""
    return CODES.get(status, "server_error" if status >= 500 else "bad_request")


class ApiError(Exception):
    """An answer other than success, with its JSON error body."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})  # more fields of "error" (a 403's "roles")

    def body(self) -> dict[str, Any]:
        """The JSON error body."""
        return {"error": {"code": self.code, "message": self.message, **self.extra}}


def not_found(what: str) -> ApiError:
    """404 for an object that does not exist *for this tenant*."""
    return ApiError(404, "not_found", f"no {what}")


def forbidden(principal: Principal, action: Action | None, what: str) -> ApiError:
    """403 for a role that may not do ``action``, naming the roles that may."""
    roles = [role.value for role in allowed_roles(action)]
    return ApiError(403, "forbidden", denial_message(principal, action, what), extra={"roles": roles})


INTERNAL_ERROR: Mapping[str, Any] = {
    "error": {"code": "internal", "message": "internal error; see the supervisor log"}
}
"""The last-resort 500's body: nothing of the failure, which goes to the (redacted) log."""


def log_internal_error(path: str) -> None:
    """Log the exception being handled, as the last-resort 500 answers it."""
    log.exception("admin api request failed", extra={"fields": {"path": path}})
