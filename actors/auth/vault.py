"""Where an OAuth client keeps its records between runs.

The service's vault is the store's ``oauth`` table (``supervisor/store/vault.py``, each
record sealed at rest); :class:`MemoryVault` is for embedding without a state directory, and for
tests. A vault several processes share also offers a refresh lease (:class:`LeasingVault`),
so that one of them at a time spends a rotating refresh token.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol, runtime_checkable

import trio


class TokenVault(Protocol):
    """Where records are kept (the store's ``oauth`` table, sealed at rest)."""

    async def load(self, server: str, url: str) -> Mapping[str, Any] | None: ...

    async def save(self, server: str, url: str, record: Mapping[str, Any] | None) -> None: ...


@runtime_checkable
class LeasingVault(TokenVault, Protocol):
    """A vault that several processes may share offers a refresh lease (optional: a
    vault without it is refreshed under the provider's own lock alone).

    ``renewing`` waits until this caller holds the record's lease (another process's
    runs out after ``lease_s``), yields the record as stored then, and releases the
    lease on exit; the caller refreshes only if the stored token is still the one it
    had, and saves inside."""

    def renewing(
        self, server: str, url: str, *, lease_s: float
    ) -> AbstractAsyncContextManager[Mapping[str, Any] | None]: ...


class MemoryVault:
    """A vault for embedding without a state directory, and for tests."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], Mapping[str, Any]] = {}
        self._leases: defaultdict[tuple[str, str], trio.Lock] = defaultdict(trio.Lock)

    async def load(self, server: str, url: str) -> Mapping[str, Any] | None:
        return self.records.get((server, url))

    async def save(self, server: str, url: str, record: Mapping[str, Any] | None) -> None:
        if record is None:
            self.records.pop((server, url), None)
        else:
            self.records[(server, url)] = record

    @asynccontextmanager
    async def renewing(
        self, server: str, url: str, *, lease_s: float
    ) -> AsyncIterator[Mapping[str, Any] | None]:
        """One process: the lease is a lock per record."""
        async with self._leases[(server, url)]:
            yield self.records.get((server, url))
