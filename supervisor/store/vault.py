"""The OAuth token vault on the store: remote servers' records in ``supervisor.db``.

The service and ``mcp-supervisor auth login`` (another process) share the file; SQLite's
locking and WAL make that safe. Records are sealed at rest (``oauth_rows.py``). Calls run in worker threads
(the Store's lock serialises them), so the event loop never waits on the disk.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import trio

from supervisor.store.database import Store


class StoreVault:
    """``actors.auth.vault.TokenVault`` backed by a :class:`Store`."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def load(self, server: str, url: str) -> Mapping[str, Any] | None:
        return await trio.to_thread.run_sync(self._store.oauth_record, server, url)

    async def save(self, server: str, url: str, record: Mapping[str, Any] | None) -> None:
        await trio.to_thread.run_sync(self._store.save_oauth, server, url, record, time.time())
