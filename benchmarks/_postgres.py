"""A PostgreSQL for the benchmarks: the URL given, or a throwaway cluster (the tests'
harness, tests/support/postgres.py) on this machine, made durable as a production one.

Why durable: the harness turns ``fsync``, ``synchronous_commit`` and
``full_page_writes`` off (tests need no crash safety); a commit then costs nothing it
would cost in production, and a comparison with the journal would flatter PostgreSQL.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

DURABLE = ("ALTER SYSTEM SET fsync = on", "ALTER SYSTEM SET synchronous_commit = on",
           "ALTER SYSTEM SET full_page_writes = on", "SELECT pg_reload_conf()")  # fmt: skip


@contextlib.contextmanager
def postgres_url(given: str | None = None) -> Iterator[str]:
    """``given`` as it is; else a fresh database on a new throwaway cluster, stopped after."""
    if given:
        yield given
        return
    import psycopg

    from tests.support.postgres import fresh_database, start_cluster

    cluster = start_cluster()
    try:
        with psycopg.connect(cluster.cluster.admin_url, autocommit=True) as admin:
            for statement in DURABLE:
                admin.execute(statement)
        with fresh_database(cluster.cluster) as url:
            yield url
    finally:
        cluster.stop()
