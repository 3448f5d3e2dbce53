"""A real nginx on loopback, configured by the shipped ``config/examples/nginx.conf``.

Debian's nginx (``.ci/setup`` installs it with apt-get), run as the test's own process
(``daemon off``) in a folder of the test: its pid file, error log, access log and temp
paths are all in that folder, so nothing is written anywhere else. The routing is the
shipped file's, rendered for the test's replicas (``render``): its per-replica blocks and
``map`` lines are the template's, repeated for each replica id with the test's ports, so
a test exercises the rules users get. Stopping it is SIGQUIT (graceful, bounded by
``worker_shutdown_timeout``), then SIGKILL to its process group; it is reaped either way.

``running_nginx`` is the async context manager; the ``nginx_for`` fixture (in
``tests/cluster/conftest.py``) starts one for the rest of a test. Both skip, saying why, when
nginx is not installed (``needs_nginx``).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator, Collection, Mapping
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import attrs
import pytest
import trio

from supervisor.settings.cluster import REPLICA_ID
from tests.support.http_processes import free_port
from tests.support.paths import REPO

EXAMPLE = REPO / "config" / "examples" / "nginx.conf"
HOST = "127.0.0.1"
START_S = 10.0
STOP_S = 3.0
_ATTEMPTS = 3  # a free port can be taken between finding it and nginx binding it
# The template's own replicas: r1..r3 on 127.0.0.1:8101..8103, listening on 8100.
_UPSTREAM = re.compile(r"\n    upstream mcp_r1 \{\n.*?\n    \}\n", re.DOTALL)
_ALL_SERVERS = re.compile(r"(    upstream mcp_all \{\n)((?:        server [^\n]*\n)+)")
_MAP_LINE = re.compile(r"^        ~\^r1\\\.   mcp_r1;\n", re.MULTILINE)
_OTHER_REPLICAS = re.compile(
    r"\n    upstream mcp_r[23] \{\n.*?\n    \}\n|^        ~\^r[23]\\\.   mcp_r[23];\n",
    re.DOTALL | re.MULTILINE,
)
_SERVERS = re.compile(r"(?:        server [^\n]*\n)+")
_LISTEN = "listen 8100;"
TEMPLATE_REPLICAS = {"r1": 8101, "r2": 8102, "r3": 8103}


@attrs.frozen
class Nginx:
    """A running nginx: where it listens, and its folder (``error.log`` is there)."""

    port: int
    folder: Path
    process: trio.Process
    replicas: Mapping[str, int] = attrs.field(factory=dict)

    async def route(self, *, down: Collection[str] = ()) -> None:
        """Reload with the replicas named in ``down`` marked ``down`` (an operator's step
        before stopping one: new connections stop going to it), and wait until only the
        new workers run (the old ones finish their requests first, at most
        ``worker_shutdown_timeout``)."""
        ports = {self.replicas[name] for name in down}
        text = render(self.replicas, self.port, self.folder)
        for port in ports:
            text = re.sub(rf"(server {HOST}:{port}\b[^;]*);", r"\1 down;", text)
        (self.folder / "nginx.conf").write_text(text)
        before = _workers(self.process.pid)
        self.process.send_signal(signal.SIGHUP)
        with trio.fail_after(START_S):  # new workers accept; the old ones have left
            while not (now := _workers(self.process.pid)) or now & before:  # noqa: ASYNC110 - nginx's own workers
                await trio.sleep(0.02)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def error_log(self) -> str:
        path = self.folder / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""


def needs_nginx() -> str:
    """The nginx binary; a skip saying what is missing when there is none."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")
    if found is None:
        pytest.skip(
            "nginx is not installed (.ci/setup installs Debian's nginx with apt-get when run as root)"
        )
    return found


def _one(pattern: re.Pattern[str], text: str, what: str) -> re.Match[str]:
    match = pattern.search(text)
    if match is None:
        raise ValueError(f"{EXAMPLE} no longer has {what}; update tests/support/nginx.py's patterns with it")
    return match


def _server_line(line: str, port: int) -> str:
    """A template ``server`` line with its address made ``127.0.0.1:port``."""
    return re.sub(r"server [^ ;]+", f"server {HOST}:{port}", line, count=1)


def _replica_block(template: str, replica: str, ports: Mapping[str, int]) -> str:
    """The template's ``mcp_r1`` block for ``replica``: its own server line (the first)
    with its port, then the template's backup line (the second) for each other replica."""
    servers = _SERVERS.search(template)
    assert servers is not None
    own, backup = servers.group(0).splitlines(keepends=True)[:2]
    lines = _server_line(own, ports[replica]) + "".join(
        _server_line(backup, port) for r, port in ports.items() if r != replica
    )
    block = template[: servers.start()] + lines + template[servers.end() :]
    return block.replace("mcp_r1", f"mcp_{replica}")


def routing(replicas: Mapping[str, int]) -> str:
    """The shipped file for ``replicas`` (id → loopback port): its ``mcp_all`` servers, its
    ``mcp_r1`` block and its ``map`` line for r1, repeated for each replica. For the
    template's own r1..r3 on 8101..8103 this is the file unchanged (a test checks it)."""
    if not replicas:
        raise ValueError("no replicas: give at least one replica id and its port")
    for replica in replicas:
        if REPLICA_ID.fullmatch(replica) is None:
            raise ValueError(
                f"{replica!r} is not a replica id (letters, digits, '-', '_'; as cluster.replica)"
            )
    text = EXAMPLE.read_text()
    block = _one(_UPSTREAM, text, "an 'upstream mcp_r1' block").group(0)
    map_line = _one(_MAP_LINE, text, "a map line for r1").group(0)
    every = _one(_ALL_SERVERS, text, "an 'upstream mcp_all' block")
    blocks = "".join(_replica_block(block, r, replicas) for r in replicas)
    lines = "".join(map_line.replace("r1", r) for r in replicas)
    first = every.group(2).splitlines(keepends=True)[0]
    servers = "".join(_server_line(first, port) for port in replicas.values())
    text = text[: every.start(2)] + servers + text[every.end(2) :]
    text = _OTHER_REPLICAS.sub("", text)
    return text.replace(block, blocks).replace(map_line, lines)


def render(replicas: Mapping[str, int], listen: int, folder: Path) -> str:
    """``routing(replicas)`` listening on 127.0.0.1:``listen``, writing only in ``folder``."""
    text = routing(replicas)
    _one(re.compile(re.escape(_LISTEN)), text, repr(_LISTEN))
    return sandboxed(text.replace(_LISTEN, f"listen {HOST}:{listen};"), folder)


def sandboxed(text: str, folder: Path) -> str:
    """``text`` with the access log and temp paths in ``folder`` (Debian's defaults are
    under /var), added at the top of its ``http`` block; nothing else changes."""
    paths = "".join(
        f"    {kind}_temp_path {folder / kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    head = "http {\n"
    if text.count(head) != 1:
        raise ValueError(f"{EXAMPLE} must have exactly one 'http {{' block")
    return text.replace(head, f"{head}    access_log {folder / 'access.log'};\n{paths}")


def command(conf: Path, folder: Path, *extra: str) -> list[str]:
    """nginx with ``conf``, its prefix, pid file and error log in ``folder``, in the foreground."""
    # As root its workers would run as the compiled-in user, who cannot enter the test's
    # folder (0700); as anyone else the directive is ignored, so it is given only to root.
    user = "user root;" if os.geteuid() == 0 else ""
    directives = f"daemon off; pid {folder / 'nginx.pid'}; worker_shutdown_timeout 1s; {user}"
    return [needs_nginx(), "-p", str(folder), "-e", str(folder / "error.log"), "-c", str(conf),
            "-g", directives, *extra]  # fmt: skip


def _write_conf(replicas: Mapping[str, int], port: int, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    conf = folder / "nginx.conf"
    conf.write_text(render(replicas, port, folder))
    return conf


async def _quit(process: trio.Process) -> None:
    """SIGQUIT (finish open requests, at most ``worker_shutdown_timeout``), then SIGKILL."""
    process.send_signal(signal.SIGQUIT)
    with trio.move_on_after(STOP_S):
        await process.wait()
        return
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


async def _listening(process: trio.Process, port: int) -> bool:
    """Whether nginx listens on ``port``; False when it exited (the port was taken)."""
    with trio.fail_after(START_S):
        while True:
            try:
                await (await trio.open_tcp_stream(HOST, port)).aclose()
                return True
            except OSError:
                if process.returncode is not None:
                    return False
                await trio.sleep(0.02)


@asynccontextmanager
async def running_nginx(replicas: Mapping[str, int], folder: Path) -> AsyncIterator[Nginx]:
    """nginx routing to ``replicas`` (id → port on 127.0.0.1) for the block, from the moment
    it listens; fails the test with its error log when it cannot start."""
    needs_nginx()  # a skip must not be raised inside the nursery (it would arrive grouped)
    async with trio.open_nursery() as nursery:
        for _ in range(_ATTEMPTS):
            port = free_port()
            conf = _write_conf(replicas, port, folder)
            run = functools.partial(
                trio.run_process, command(conf, folder), check=False, start_new_session=True,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, deliver_cancel=_quit,
            )  # fmt: skip
            process: trio.Process = await nursery.start(run)
            if await _listening(process, port):
                break
        else:
            log = (folder / "error.log").read_text(errors="replace")[-2000:]
            pytest.fail(f"nginx did not start in {_ATTEMPTS} attempts:\n{log}")
        try:
            yield Nginx(port, folder, process, dict(replicas))
        finally:
            nursery.cancel_scope.cancel()


def _workers(master: int) -> set[int]:
    """The pids of nginx's worker processes now."""
    try:
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    except OSError:
        return set()
    return {int(pid) for pid in children}
