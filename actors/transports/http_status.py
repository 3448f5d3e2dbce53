"""What an HTTP status means to an MCP client: pure decisions, before any I/O acts.

Split from ``http_link.py`` so the rules read, and are tested, as a table:

    POST 2xx      202/204 → ACCEPTED, else READ_BODY (JSON or an SSE stream)
    401, 403      AUTH_FAILED → ``AuthRequired`` ("authentication failed")
    400/404/405   on initialize, transport ``auto`` → FALL_BACK to legacy HTTP+SSE
    404           with a session → SESSION_EXPIRED (a fresh connection re-initializes)
    3xx           REDIRECTED (not followed: credentials must not travel elsewhere)
    5xx           SERVER_ERROR → the connection backs off
    other 4xx     REFUSED → the request is answered with a JSON-RPC error

A GET that opens the server's SSE stream has its own table (:func:`decide_get`), and
reopening a stream its own timing (:func:`reconnect_delay`, :func:`reopen_at_once`).
"""

from __future__ import annotations

import enum
import re

_DEFAULT_RETRY_S = 1.0
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+\Z")  # visible ASCII, as the spec requires of session ids


class Next(enum.Enum):
    """What to do with the answer to a POST."""

    ACCEPTED = "accepted"
    READ_BODY = "read_body"
    FALL_BACK = "fall_back"
    SESSION_EXPIRED = "session_expired"
    AUTH_FAILED = "auth_failed"
    REDIRECTED = "redirected"
    SERVER_ERROR = "server_error"
    REFUSED = "refused"


def decide_post(status: int, *, initialize: bool, has_session: bool, may_fall_back: bool = False) -> Next:
    """Map a POST's status to the next step (the table in the module docstring)."""
    if status in (202, 204):
        return Next.ACCEPTED
    if 200 <= status < 300:
        return Next.READ_BODY
    if status in (401, 403):
        return Next.AUTH_FAILED
    if initialize and may_fall_back and status in (400, 404, 405):
        return Next.FALL_BACK
    if status == 404 and has_session:
        return Next.SESSION_EXPIRED
    if 300 <= status < 400:
        return Next.REDIRECTED
    if status >= 500:
        return Next.SERVER_ERROR
    return Next.REFUSED


class GetNext(enum.Enum):
    """What to do with the answer to a GET that should open an SSE stream."""

    LISTEN = "listen"
    NO_STREAM = "no_stream"  # the server offers none: fine, notifications come on POST streams
    RETRY = "retry"
    SESSION_EXPIRED = "session_expired"
    AUTH_FAILED = "auth_failed"
    LOST = "lost"  # a stream that worked cannot be reopened
    DROPPED = "dropped"  # never from decide_get: an open stream broke off (not ended by the server)

    def as_post(self) -> Next:
        """The POST step whose error text fits a GET that cannot go on."""
        return {GetNext.AUTH_FAILED: Next.AUTH_FAILED, GetNext.SESSION_EXPIRED: Next.SESSION_EXPIRED}.get(
            self, Next.REFUSED
        )


def decide_get(status: int, *, reopening: bool, has_session: bool) -> GetNext:
    """Map a GET's status to the next step.

    The first GET is optional in the spec: anything but success or an auth failure
    just means "no GET stream". Once a stream worked, failing to reopen it means
    notifications would be lost silently, so that ends the connection instead.
    """
    if 200 <= status < 300:
        return GetNext.LISTEN
    if status in (401, 403):
        return GetNext.AUTH_FAILED
    if status == 405:
        return GetNext.NO_STREAM
    if not reopening:
        return GetNext.NO_STREAM
    if status == 404 and has_session:
        return GetNext.SESSION_EXPIRED
    if status >= 500:
        return GetNext.RETRY
    return GetNext.LOST


def reconnect_delay(retry_ms: int | None) -> float:
    """Seconds to wait before reopening a stream: the server's ``retry`` if it sent
    one (the spec says MUST respect it), kept between 50 ms and 10 minutes."""
    if retry_ms is None:
        return _DEFAULT_RETRY_S
    return min(max(retry_ms / 1000, 0.05), 600.0)


def reopen_at_once(step: GetNext, *, after_at_once: bool) -> bool:
    """Should the next GET skip the ``retry`` delay? Only after a stream that broke off
    (the server did not ask to be polled later; if it died, the GET is refused at once),
    and not twice in a row, so that a stream that keeps breaking is no busy loop."""
    return step is GetNext.DROPPED and not after_at_once


def header_safe(value: str, *, spaces: bool = False) -> bool:
    """May this server-chosen value be sent back in a header? (Event ids may hold spaces.)"""
    return bool(_HEADER_SAFE.match(value.replace(" ", "!") if spaces else value))
