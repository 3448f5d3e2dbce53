"""The throwaway PostgreSQL of the store's tests (tests/support/postgres.py) keeps its word:
``mcp`` logs in with its password over TCP on 127.0.0.1, every test has a database of its own
that is dropped after it, nothing listens beyond loopback, and stopping a cluster ends its
processes and removes its folder. Without PostgreSQL they skip, saying why."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support import postgres
from tests.support.postgres import Cluster, fresh_database, start_cluster


def _user_tables(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    return [row[0] for row in rows]


def _databases(cluster: Cluster) -> set[str]:
    import psycopg

    with psycopg.connect(cluster.admin_url) as conn:
        return {row[0] for row in conn.execute("SELECT datname FROM pg_database").fetchall()}


def _gone(pid: int, within_s: float = 5.0) -> bool:
    """Whether ``pid`` is gone (or a zombie, which holds nothing) within ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except FileNotFoundError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _listening(pid: int) -> tuple[list[tuple[str, int]], list[str]]:
    """The TCP addresses (as ``/proc/net`` writes them, hex) and Unix socket paths ``pid`` listens on."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = str(fd.readlink()) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    tcp = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                tcp.append((address, int(port, 16)))
    unix = [
        fields[7]
        for line in Path("/proc/net/unix").read_text().splitlines()[1:]
        if len(fields := line.split()) >= 8 and fields[6] in inodes
    ]
    return tcp, unix


def test_mcp_logs_in_with_its_password_over_tcp_on_loopback(pg_cluster: Cluster, postgres_url: str) -> None:
    import psycopg

    parts = urlsplit(postgres_url)
    where = (parts.scheme, parts.username, parts.hostname, parts.port)
    assert where == ("postgresql", "mcp", "127.0.0.1", pg_cluster.port)
    with psycopg.connect(postgres_url) as conn:
        user, address, port, owner = conn.execute(
            "SELECT current_user, host(inet_server_addr()), inet_server_port(),"
            " pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()"
        ).fetchone()
        conn.execute("CREATE TABLE owned (n int)")  # the owner may make tables in public
    assert (user, address, port, owner) == ("mcp", "127.0.0.1", pg_cluster.port, "mcp")
    with psycopg.connect(pg_cluster.admin_url) as admin:
        (stored,) = admin.execute("SELECT rolpassword FROM pg_authid WHERE rolname = 'mcp'").fetchone()
    assert stored.startswith("SCRAM-SHA-256$")
    wrong = postgres_url.replace(f":{parts.password}@", ":not-the-password@")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(wrong).close()


def test_two_databases_are_two_different_empty_ones(pg_cluster: Cluster, postgres_url: str) -> None:
    import psycopg

    with fresh_database(pg_cluster) as other:
        assert urlsplit(other).path != urlsplit(postgres_url).path
        assert _user_tables(postgres_url) == [] and _user_tables(other) == []
        with psycopg.connect(postgres_url) as conn:
            conn.execute("CREATE TABLE only_here (n int)")
        assert (_user_tables(postgres_url), _user_tables(other)) == (["only_here"], [])


def test_a_database_is_dropped_at_the_end_even_with_a_connection_open(pg_cluster: Cluster) -> None:
    import psycopg

    with fresh_database(pg_cluster) as url:
        name = urlsplit(url).path.lstrip("/")
        left_open = psycopg.connect(url)
        assert name in _databases(pg_cluster)
    assert name not in _databases(pg_cluster)
    with pytest.raises(psycopg.OperationalError):
        left_open.execute("SELECT 1")  # FORCE ended it
    left_open.close()


def test_nothing_of_the_cluster_listens_beyond_loopback(pg_cluster: Cluster) -> None:
    import psycopg

    with psycopg.connect(pg_cluster.admin_url) as conn:
        (backend,) = conn.execute("SELECT pg_backend_pid()").fetchone()
        (sockets,) = conn.execute("SHOW unix_socket_directories").fetchone()
        postmaster = int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])
        tcp, unix = _listening(postmaster)
    assert tcp == [("0100007F", pg_cluster.port)], "listens only on 127.0.0.1 (little-endian hex), its port"
    assert Path(sockets).parent == Path(tempfile.gettempdir()) and Path(sockets).name.startswith("mcp-pg-")
    assert unix == [f"{sockets}/.s.PGSQL.{pg_cluster.port}"], "its Unix socket only in its own folder"


def test_stop_ends_every_process_of_the_cluster_then_removes_its_folder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import psycopg

    running = start_cluster()
    alive_at_removal: list[int] = []
    remove = shutil.rmtree

    def removing(path: Path, ignore_errors: bool = False) -> None:
        # A server whose folder is removed soon dies on its own: look before that.
        alive_at_removal.extend(p for p in processes if not _gone(p, within_s=0))
        remove(path, ignore_errors=ignore_errors)

    try:
        pid = running.postmaster_pid()
        client = psycopg.connect(running.cluster.admin_url)  # one more process: its backend
        processes = [pid, *_children(pid)]
        assert len(processes) >= 4, processes  # checkpointer, writers, launchers, the backend
        monkeypatch.setattr(shutil, "rmtree", removing)
    finally:
        running.stop()
    assert alive_at_removal == []
    assert not running.folder.exists()
    with pytest.raises(psycopg.OperationalError):
        client.execute("SELECT 1")
    client.close()


def _no_such_user(name: str) -> None:
    raise KeyError(name)


def test_without_postgresql_the_tests_skip_saying_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(postgres, "PG_ROOT", tmp_path)
    with pytest.raises(pytest.skip.Exception, match=r"PostgreSQL is not installed: no .*/\*/bin/initdb"):
        postgres.needs_postgres()
    monkeypatch.setattr(postgres, "_bin_dir", lambda: tmp_path)  # installed, from here on
    with monkeypatch.context() as patch:
        patch.setattr(postgres.os, "geteuid", lambda: 0)
        patch.setattr(postgres.pwd, "getpwnam", _no_such_user)
        with pytest.raises(pytest.skip.Exception, match="running as root, and PostgreSQL refuses root"):
            postgres.needs_postgres()
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(pytest.skip.Exception, match="psycopg is not importable"):
        postgres.needs_postgres()
