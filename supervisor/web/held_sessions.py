"""What the admin API's sessions (``admin/hosted.py``) and the gateway's MCP sessions
(``gateway/http_sessions.py``) share: sessions that outlive the request that opened
them, each held by a task of a nursery the registry owns, found by id and tenant.

A session asked to close is already gone for lookups and listings (its holder is
still closing its servers); ``close`` waits, bounded, until it is. Another tenant's
session is simply not found, so ids do not leak across tenants.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

import trio


class Held(Protocol):
    """One held session's record."""

    @property
    def tenant(self) -> str: ...

    @property
    def close_requested(self) -> trio.Event: ...

    @property
    def closed(self) -> trio.Event: ...


R = TypeVar("R", bound=Held)


class HeldSessions(Generic[R]):
    """The records by id, and the nursery their holders run in (``run``)."""

    not_running: type[Exception] = RuntimeError
    """Raised with ``not_running_text`` when a session is opened outside ``run``."""
    not_running_text = "not running"

    def __init__(self) -> None:
        self._sessions: dict[str, R] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the holders until cancelled; then every session closes."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None  # refuse new sessions while the old ones close
                self._stopping()

    def _stopping(self) -> None:
        """Called once ``run`` is cancelled, before the holders close."""

    def __len__(self) -> int:
        return len(self._sessions)

    def _running(self) -> trio.Nursery:
        if self._nursery is None:
            raise self.not_running(self.not_running_text)
        return self._nursery

    def _lookup(self, session_id: str, tenant: str | None) -> R | None:
        """The open record, if it belongs to ``tenant`` (None: to any tenant)."""
        record = self._sessions.get(session_id)
        if record is None or record.close_requested.is_set():
            return None
        if tenant is not None and record.tenant != tenant:
            return None
        return record

    def _open(self, tenant: str | None) -> list[R]:
        """The open records of ``tenant`` (None: of every tenant), oldest first."""
        return [
            r
            for r in self._sessions.values()
            if not r.close_requested.is_set() and (tenant is None or r.tenant == tenant)
        ]

    async def _close(self, session_id: str, tenant: str | None, timeout_s: float) -> bool:
        """End a session and wait (bounded) until its servers are gone."""
        record = self._lookup(session_id, tenant)
        if record is None:
            return False
        record.close_requested.set()
        with trio.move_on_after(timeout_s):
            await record.closed.wait()
        return True
