"""The store on PostgreSQL, beyond the contract tests both backends run (conftest.py):
``store.url`` in the config, a database that cannot be used as one ``state error`` line
(exit status 3) naming the store without its password, migrations that two
processes may run at once, and a database that goes away mid-run and comes back."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
import trio

from supervisor.runtime.state_dir import StateError, open_store
from supervisor.settings.model import Config, StoreSettings
from supervisor.store import SCHEMA_VERSION, Store, StoreError
from supervisor.store.postgres import display_url, open_postgres
from supervisor.store.sealing import PREFIX
from tests.settings.test_config_loader import fail, load
from tests.support.admin import until
from tests.support.inprocess import Running, running
from tests.support.postgres import Cluster

CLI = [sys.executable, "-m", "supervisor.cli"]
PASSWORD = "hunter2-planted"


def test_store_url_comes_from_the_environment_and_its_password_is_a_secret(tmp_path: Path) -> None:
    url = f"postgresql://mcp:{PASSWORD}@db.internal:5433/mcp"
    config = load(tmp_path, {"servers": {}, "store": {"url": "${env:STORE_URL}"}}, {"STORE_URL": url})
    assert config.store.url == url
    assert PASSWORD in config.secrets  # redacted from logs like the other credentials
    assert PASSWORD not in repr(config)
    assert display_url(url) == "postgresql://db.internal:5433/mcp"
    assert load(tmp_path, {"servers": {}}).store.url is None  # SQLite in the state directory


@pytest.mark.parametrize("url", [f"mysql://mcp:{PASSWORD}@db/mcp", "sqlite:///var/lib/x.db", "db.internal"])
def test_a_store_url_that_is_not_postgresql_is_a_config_error(tmp_path: Path, url: str) -> None:
    error = fail(tmp_path, {"servers": {}, "store": {"url": url}})
    assert error.json_path == "$.store.url"
    assert "a PostgreSQL URL is postgresql://" in error.problem
    assert "remove 'store' to keep SQLite" in error.problem
    assert PASSWORD not in str(error)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wrong_password(url: str) -> str:
    head, _, tail = url.partition("@")
    return head.rsplit(":", 1)[0] + f":{PASSWORD}@" + tail


def _nobody_listens(url: str) -> str:
    head, _, tail = url.partition("@")
    return f"{head}@127.0.0.1:{_free_port()}/{tail.split('/', 1)[1]}"


def _newer_schema(url: str) -> str:
    Store.close(open_postgres(url))
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION + 1,))
    return url


# case -> (make the URL from a fresh database's, the problem's start, a part of the hint)
CASES = {
    "wrong-password": (_wrong_password, "wrong credentials (", "check the user and password in store.url"),
    "nobody-listens": (_nobody_listens, "unreachable (", "check that PostgreSQL runs"),
    "newer-schema": (
        _newer_schema,
        f"the store's schema version {SCHEMA_VERSION + 1} is newer than this supervisor supports",
        "run a newer mcp-supervisor, or point store.url at an empty database",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_database_that_cannot_be_used_is_one_state_error_line_exit_3(
    tmp_path: Path, postgres_url: str, case: str
) -> None:
    make, problem, hint = CASES[case]
    url = make(postgres_url)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"servers": {}, "store": {"url": "${env:STORE_URL}"}}))
    env = {k: v for k, v in os.environ.items() if k != "MCP_SUPERVISOR_CONFIG"} | {"STORE_URL": url}
    command = [
        "serve",
        "--config",
        str(config),
        "--state-dir",
        str(tmp_path / "state"),
        "--bind",
        "127.0.0.1:0",
    ]
    result = subprocess.run(
        [*CLI, *command], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 3, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr[-3000:]
    prefix = f"state error: {display_url(url)}: {problem}"
    assert lines[0].startswith(prefix), lines[0]
    assert lines[0].endswith(hint) or f"; {hint}" in lines[0], lines[0]
    assert PASSWORD not in result.stderr and url.split("@")[0].rsplit(":", 1)[1] not in result.stderr
    assert result.stdout == ""


def test_open_store_with_a_url_keeps_the_state_directory_for_the_rest(
    tmp_path: Path, postgres_url: str
) -> None:
    config = Config(store=StoreSettings(url=postgres_url))
    with open_store(tmp_path, config) as store:
        assert store.name == display_url(postgres_url)
        store.save_oauth("docs", "https://d.example/mcp", {"t": "planted-7f3e"}, 1.0)
    assert not (tmp_path / "supervisor.db").exists()  # only the database moved
    assert (tmp_path / "secrets.key").exists()  # the key that seals OAuth records stays here
    with psycopg.connect(postgres_url) as connection:
        (record,) = connection.execute("SELECT record FROM oauth").fetchone() or ("",)
    assert record.startswith(PREFIX) and "planted-7f3e" not in record  # sealed at rest there too


def test_state_error_names_the_store_for_an_embedding_too(postgres_url: str, tmp_path: Path) -> None:
    config = Config(store=StoreSettings(url=_wrong_password(postgres_url)))
    with pytest.raises(StateError) as caught:
        open_store(tmp_path, config)
    assert caught.value.path == display_url(postgres_url)
    assert caught.value.problem.startswith("wrong credentials (")


def test_processes_migrating_one_database_at_once_each_find_it_done(postgres_url: str) -> None:
    opened: list[Store] = []
    failed: list[BaseException] = []
    start = threading.Barrier(4)

    def open_one() -> None:
        start.wait()
        try:
            opened.append(open_postgres(postgres_url))  # a connection each: as processes would
        except BaseException as exc:
            failed.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert failed == [] and len(opened) == 4
    for store in opened:
        store.close()
    with psycopg.connect(postgres_url) as connection:
        assert connection.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]


def _admin(cluster: Cluster, statement: str) -> None:
    with psycopg.connect(cluster.admin_url, autocommit=True) as admin:
        admin.execute(statement)


async def _health(run: Running) -> dict[str, Any]:
    status, body = await run.get("/v1/health")
    assert status == 200
    data: dict[str, Any] = orjson.loads(body)
    return data


async def test_a_postgresql_that_goes_away_degrades_health_calls_go_on_and_rows_catch_up(
    tmp_path: Path, postgres_url: str, pg_cluster: Cluster
) -> None:
    database = postgres_url.rsplit("/", 1)[1]
    async with running(tmp_path, store=StoreSettings(url=postgres_url)) as run:
        assert (await run.turn.call("fake_echo", {"n": 0})).ok
        assert len(await run.rows()) == 1
        assert await _health(run) == {
            **await _health(run),
            "status": "ok",
            "store": display_url(postgres_url),
        }
        # Gone: no new connection is let in, and the store's own is ended.
        _admin(pg_cluster, f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
        _admin(
            pg_cluster, f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}'"
        )
        with trio.fail_after(20):
            for n in range(1, 6):
                assert (await run.turn.call("fake_echo", {"n": n})).ok, "answered all the same"
            await run.sup.store.flush()  # the folder's inserts failed behind the answers
            await until(lambda: run.sup.journal.waiting == 5)
        assert (await _health(run))["status"] == "degraded", "the rows the database refused wait"
        # Back: the folder folds the rows in on its next retry.
        _admin(pg_cluster, f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
        await until(lambda: not run.sup.journal.waiting, 20)
        # The store's own connection, ended while idle, fails its next statement; the one
        # after connects again.
        with contextlib.suppress(StoreError):
            await run.sup.store.read(lambda store: store.eras())
        await run.sup.store.read(lambda store: store.eras())
        assert (await _health(run))["status"] == "ok"
        rows = await run.rows()
    assert len(rows) == 6 and len({row.record for row in rows}) == 6
