"""The OAuth token vault on the store: remote servers' records in ``supervisor.db``.

The service and ``mcp-supervisor auth login`` (another process) share the file; SQLite's
locking and WAL make that safe. Records are sealed at rest (``oauth_rows.py``). Calls run in worker threads
(the Store's lock serialises them), so the event loop never waits on the disk.

One vault keeps one person's records: the shared servers' (person "") or, for a
``per_user`` server, one person's own (``for_person``), so that person's OAuth client
can load and save only their tokens, refresh token and DPoP key.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import trio

from supervisor.store.database import Store


class StoreVault:
    """``actors.auth.vault.TokenVault`` backed by a :class:`Store`, for one person ("":
    the shared records)."""

    def __init__(self, store: Store, person: str = "") -> None:
        self._store = store
        self.person = person

    def for_person(self, person: str) -> StoreVault:
        """The same store's vault of ``person``'s own records (a ``per_user`` server's)."""
        if not isinstance(person, str) or not person:
            raise ValueError(f"a person's vault needs the person (a non-empty str), not {person!r}")
        return StoreVault(self._store, person)

    async def load(self, server: str, url: str) -> Mapping[str, Any] | None:
        person = self.person
        return await trio.to_thread.run_sync(lambda: self._store.oauth_record(server, url, person=person))

    async def save(self, server: str, url: str, record: Mapping[str, Any] | None) -> None:
        at = time.time()
        await trio.to_thread.run_sync(
            lambda: self._store.save_oauth(server, url, record, at, person=self.person)
        )
