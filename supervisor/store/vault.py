"""The OAuth token vault on the store: remote servers' records in ``supervisor.db``.

The service and ``mcp-supervisor auth login`` (another process) share the file; SQLite's
locking and WAL make that safe. Records are sealed at rest (``oauth_rows.py``). Calls run in worker threads
(the Store's lock serialises them), so the event loop never waits on the disk.

One vault keeps one person's records: the shared servers' (person "") or, for a
``per_user`` server, one person's own (``for_person``), so that person's OAuth client
can load and save only their tokens, refresh token and DPoP key.

Processes that share the store (replicas on one PostgreSQL, or two on one state
directory) refresh a record's token under its lease (:meth:`StoreVault.renewing`), so
a rotating refresh token is spent once and the others read the new token.
"""

from __future__ import annotations

import os
import random
import secrets
import socket
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio

from actors.log_events import get_logger
from supervisor.store.database import Store

log = get_logger("supervisor.store.secrets")

LEASE_POLL_S = 0.075
"""How often a process waiting for another's refresh tries the lease again (jittered)."""


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

    @asynccontextmanager
    async def renewing(
        self, server: str, url: str, *, lease_s: float
    ) -> AsyncIterator[Mapping[str, Any] | None]:
        """Hold the record's refresh lease (waiting while another process holds it, up
        to its expiry) and give the record as stored now: the caller refreshes only if
        nobody did meanwhile, saves, and the lease is released on the way out."""
        if not lease_s > 0:
            raise ValueError(f"a refresh lease needs lease_s > 0 seconds, not {lease_s!r}")
        holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        person, store = self.person, self._store
        while True:
            won, before = await trio.to_thread.run_sync(
                lambda: store.take_oauth_lease(server, url, holder, lease_s, person=person)
            )
            if won:
                break
            await trio.sleep(LEASE_POLL_S * random.uniform(0.5, 1.5))
        fields = {"server": server} | ({"person": person} if person else {})
        if before is not None:
            log.warning(
                "oauth refresh lease taken over: its holder let it expire",
                extra={"fields": fields | {"from": before}},
            )
        try:
            yield await self.load(server, url)
        finally:
            with trio.CancelScope(shield=True):
                try:
                    await trio.to_thread.run_sync(
                        lambda: store.release_oauth_lease(server, url, holder, person=person)
                    )
                except Exception as exc:  # it expires by itself
                    log.warning(
                        "cannot release the oauth refresh lease",
                        extra={"fields": fields | {"reason": str(exc)}},
                    )
