"""Console sign-ins: a random session id in a cookie, the token behind it kept here.

A person signs in with a token the admin API accepts (``app.py`` asks the API); the
console then holds that token for them, in memory only, under a random id the browser
keeps in an ``HttpOnly``, ``SameSite=Strict`` cookie with ``Path=/ui``: script cannot
read it, another site cannot send it, and ``/v1/*`` never sees it. Each session has its
own CSRF token, which every state-changing request must carry in ``X-CSRF-Token``. A
session ends at sign-out, after ``IDLE_S`` unused, and as soon as the API refuses its
token (a config reload removed it): every request is made with the token, so the
first refusal ends the session.
"""

from __future__ import annotations

import hmac
import secrets

import attrs
import trio

IDLE_S = 8 * 3600.0
MAX_SESSIONS = 1000
COOKIE = "mcp_console"


@attrs.define(eq=False)
class ConsoleSession:
    """One browser's sign-in."""

    id: str
    token: str | None = attrs.field(repr=False)
    """The bearer token it signed in with (None: a loopback supervisor with no tokens)."""
    csrf: str = attrs.field(repr=False)
    role: str
    tenant: str
    last_used: float


class ConsoleSessions:
    """The sign-ins of this process's console (lost at restart: sign in again)."""

    def __init__(self) -> None:
        self._sessions: dict[str, ConsoleSession] = {}

    def open(self, token: str | None, role: str, tenant: str) -> ConsoleSession:
        self._expire()
        while len(self._sessions) >= MAX_SESSIONS:  # the least recently used goes first
            oldest = min(self._sessions.values(), key=lambda s: s.last_used)
            del self._sessions[oldest.id]
        session = ConsoleSession(
            secrets.token_urlsafe(32), token, secrets.token_urlsafe(32), role, tenant, trio.current_time()
        )
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str | None) -> ConsoleSession | None:
        """The session a cookie names, if it is still signed in (its use noted)."""
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        now = trio.current_time()
        if session is None or now - session.last_used > IDLE_S:
            self._sessions.pop(session_id or "", None)
            return None
        session.last_used = now
        return session

    def end(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._sessions)

    def _expire(self) -> None:
        now = trio.current_time()
        for session in [s for s in self._sessions.values() if now - s.last_used > IDLE_S]:
            del self._sessions[session.id]


def csrf_matches(session: ConsoleSession, presented: str | None) -> bool:
    """Whether a request carries its session's CSRF token."""
    return presented is not None and hmac.compare_digest(presented, session.csrf)


def cookie_of(header: str | None) -> str | None:
    """Our cookie's value from a ``Cookie`` header, if any."""
    for part in (header or "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


def set_cookie(session: ConsoleSession, *, secure: bool) -> str:
    """The ``Set-Cookie`` value of a new sign-in (``Secure`` behind TLS)."""
    flags = "; Secure" if secure else ""
    return f"{COOKIE}={session.id}; Path=/ui; HttpOnly; SameSite=Strict{flags}"


def clear_cookie() -> str:
    return f"{COOKIE}=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0"
