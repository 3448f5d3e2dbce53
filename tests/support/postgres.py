"""A throwaway PostgreSQL cluster for the tests of the store replicas can share (issue 34).

Debian's server (``.ci/setup`` installs it with apt-get): ``initdb`` and ``pg_ctl`` from
``/usr/lib/postgresql/<highest version>/bin`` make and start a cluster in a temporary folder,
as the ``postgres`` user when we are root (PostgreSQL refuses root; ``runuser``), else as
ourselves. It listens on 127.0.0.1 only, on a free port, with its Unix socket inside its own
folder; ``fsync`` is off (nothing here must survive a crash of the machine). Every login
needs a password (scram-sha-256): the superuser's is in ``admin_url``, and the role ``mcp``
owns the databases ``fresh_database`` makes.

The fixtures ``pg_cluster`` (one cluster per session, so per xdist worker) and
``postgres_url`` (a fresh empty database for one test, dropped after it) are in
``tests/conftest.py`` and use ``start_cluster`` and ``fresh_database``. Both skip, saying
why, when PostgreSQL or psycopg is missing (``needs_postgres``).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

PG_ROOT = Path("/usr/lib/postgresql")
HOST = "127.0.0.1"
ROLE = "mcp"
ADMIN = "postgres"
# One password for ``mcp`` per test process: clusters are private to it and on loopback.
ROLE_PASSWORD = secrets.token_urlsafe(18)
START_S = 30
_ATTEMPTS = 3  # a free port can be taken between finding it and the server binding it
# A cluster for tests: nothing must survive a crash, and it should be small.
_SETTINGS = """
listen_addresses = '{host}'
unix_socket_directories = '{folder}'
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 32MB
"""


@attrs.frozen
class Cluster:
    """Where a running cluster is, and the superuser's URL (over TCP, with its password)."""

    host: str
    port: int
    admin_url: str
    bin_dir: Path


def _version(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in path.name.split(".") if part.isdigit())


def _bin_dir() -> Path | None:
    found = [p.parent.parent for p in PG_ROOT.glob("*/bin/initdb")]
    return max(found, key=_version) / "bin" if found else None


def _run_as() -> list[str] | None:
    """The prefix that runs a command as the cluster's owner: ``runuser`` when root."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(ADMIN)
    except KeyError:
        return None
    runuser = shutil.which("runuser")
    return [runuser, "-u", ADMIN, "--"] if runuser else None


def needs_postgres() -> Path:
    """The server's ``bin`` folder; a skip saying what is missing when the tests cannot have one."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        pytest.skip(
            f"PostgreSQL is not installed: no {PG_ROOT}/*/bin/initdb "
            "(.ci/setup installs Debian's postgresql with apt-get when run as root)"
        )
    if _run_as() is None:
        pytest.skip(
            "running as root, and PostgreSQL refuses root: it needs a postgres user and runuser "
            "(Debian's postgresql package creates the user; util-linux has runuser)"
        )
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"psycopg is not importable ({exc}): install the project's postgres extra (dev has it)")
    return bin_dir


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _run(argv: list[str], folder: Path) -> None:
    """Run a server tool as the cluster's owner, in a clean environment (no PG* of ours)."""
    prefix = _run_as()
    assert prefix is not None, "needs_postgres() first"
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
    done = subprocess.run([*prefix, *argv], cwd=folder, env=env, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        log = folder / "server.log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RuntimeError(f"{Path(argv[0]).name} failed ({done.returncode}): {done.stderr.strip()}\n{tail}")


@attrs.define
class Throwaway:
    """A cluster this process made; ``stop`` ends its processes and removes its folder."""

    cluster: Cluster
    folder: Path

    @property
    def data(self) -> Path:
        return self.folder / "data"

    def postmaster_pid(self) -> int:
        """The server's pid, from the first line of its ``postmaster.pid``."""
        return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])

    def stop(self) -> None:
        """``pg_ctl stop -m immediate`` (its processes are gone when it returns), then the folder."""
        pid = None
        with contextlib.suppress(OSError, ValueError):
            pid = self.postmaster_pid()
        try:
            if pid is not None:
                self._stop_server(pid)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _stop_server(self, pid: int) -> None:
        try:
            _run([str(self.cluster.bin_dir / "pg_ctl"), "stop", "-w", "-m", "immediate",
                  "-D", str(self.data)], self.folder)  # fmt: skip
        except (RuntimeError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        finally:  # our child when this process is a child subreaper: reap it
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _create_role(admin_url: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(ROLE), sql.Literal(ROLE_PASSWORD)
            )
        )


def _initdb(bin_dir: Path, folder: Path, admin_password: str) -> None:
    (folder / "pw").write_text(admin_password + "\n")
    if os.geteuid() == 0:
        owner = pwd.getpwnam(ADMIN)
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        os.chown(folder / "pw", owner.pw_uid, owner.pw_gid)
    try:
        _run([str(bin_dir / "initdb"), "-D", str(folder / "data"), "-U", ADMIN, f"--pwfile={folder / 'pw'}",
              "--auth=scram-sha-256", "--no-locale", "--encoding=UTF8", "--no-sync", "--no-instructions"],
             folder)  # fmt: skip
    finally:
        (folder / "pw").unlink()
    with (folder / "data" / "postgresql.conf").open("a") as conf:
        conf.write(_SETTINGS.format(host=HOST, folder=folder))


def _pg_ctl_start(bin_dir: Path, folder: Path) -> int:
    """Start the server on a free port and return it; tries again when the port was taken."""
    for attempt in range(_ATTEMPTS):
        port = _free_port()
        try:
            _run([str(bin_dir / "pg_ctl"), "start", "-w", "-t", str(START_S), "-D", str(folder / "data"),
                  "-l", str(folder / "server.log"), "-o", f"-p {port}"], folder)  # fmt: skip
        except RuntimeError:
            if attempt == _ATTEMPTS - 1:
                raise
        else:
            return port
    raise AssertionError("unreachable")


def start_cluster() -> Throwaway:
    """A new cluster in a new folder, running, with the role ``mcp`` (skips as ``needs_postgres``)."""
    bin_dir = needs_postgres()
    # Not under pytest's basetemp: its folders are the caller's alone (0700), and the server
    # runs as another user, who must reach its own folder.
    folder = Path(tempfile.mkdtemp(prefix="mcp-pg-"))
    admin_password = secrets.token_urlsafe(18)
    try:
        _initdb(bin_dir, folder, admin_password)
        port = _pg_ctl_start(bin_dir, folder)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    admin_url = f"postgresql://{ADMIN}:{admin_password}@{HOST}:{port}/postgres"
    running = Throwaway(Cluster(HOST, port, admin_url, bin_dir), folder)
    try:
        _create_role(admin_url)
    except BaseException:
        running.stop()
        raise
    return running


def database_url(cluster: Cluster, name: str) -> str:
    """The URL ``mcp`` logs in to database ``name`` with."""
    return f"postgresql://{ROLE}:{ROLE_PASSWORD}@{cluster.host}:{cluster.port}/{name}"


@contextlib.contextmanager
def fresh_database(cluster: Cluster) -> Iterator[str]:
    """A new empty database owned by ``mcp``; dropped at the end, connections to it or not."""
    import psycopg
    from psycopg import sql

    name = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(cluster.admin_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(ROLE))
        )
    try:
        yield database_url(cluster, name)
    finally:
        with psycopg.connect(cluster.admin_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
