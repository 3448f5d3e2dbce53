"""Where an OAuth client keeps its records between runs.

The service's vault is the store's ``oauth`` table (``supervisor/store/vault.py``, each
record sealed at rest); :class:`MemoryVault` is for embedding without a state directory, and for
tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class TokenVault(Protocol):
    """Where records are kept (the store's ``oauth`` table, sealed at rest)."""

    async def load(self, server: str, url: str) -> Mapping[str, Any] | None: ...

    async def save(self, server: str, url: str, record: Mapping[str, Any] | None) -> None: ...


class MemoryVault:
    """A vault for embedding without a state directory, and for tests."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], Mapping[str, Any]] = {}

    async def load(self, server: str, url: str) -> Mapping[str, Any] | None:
        return self.records.get((server, url))

    async def save(self, server: str, url: str, record: Mapping[str, Any] | None) -> None:
        if record is None:
            self.records.pop((server, url), None)
        else:
            self.records[(server, url)] = record
