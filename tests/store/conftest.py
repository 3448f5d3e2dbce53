"""The store's contract tests run on both backends: SQLite in a temporary state
directory, and PostgreSQL in a fresh database of the test cluster (which skips, saying
why, where no PostgreSQL can run: ``tests/support/postgres.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from supervisor.store import Store

BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(params=BACKENDS)
def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Store]:
    """Opens the test's store, again and again (one file, or one database)."""
    if request.param == "sqlite":
        path = tmp_path / "state" / "supervisor.db"
        return lambda: Store.open(path)
    from supervisor.store.postgres import open_postgres

    url: str = request.getfixturevalue("postgres_url")
    return lambda: open_postgres(url)


@pytest.fixture
def store(reopen: Callable[[], Store]) -> Iterator[Store]:
    with reopen() as opened:
        yield opened
