"""Helpers shared by the benchmark workers (run by hand; never by the test suite).

Every worker is a small script that ``benchmarks/run.py`` starts in a fresh
interpreter, so imports, heaps and event loops never leak from one measurement into
the next; a worker prints exactly one JSON object on its last stdout line.

The code a worker measures is this copy of the project, or the one named in
``PYTHONPATH`` (``worker(..., code=DIR)``: another commit's worktree, for a before /
after in one run). Such a worker reaches the project only through what survives a
reshuffle of its modules: ``from supervisor import Supervisor, load_config`` and
``python -m supervisor.cli``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import resource
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SERVER = HERE / "minimal_server.py"
PYTHON = sys.executable

if not os.environ.get("PYTHONPATH") and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def code_env(code: Path = ROOT) -> dict[str, str]:
    """The environment of a process that runs the project's code from ``code``."""
    return {**os.environ, "PYTHONPATH": str(code)}


def worker(script: str, *args: Any, timeout: float = 900.0, code: Path = ROOT) -> dict[str, Any]:
    """Run ``benchmarks/<script>`` in a fresh interpreter on the code in ``code``; its
    last stdout line is its JSON answer (``{"error": ...}`` when it has none)."""
    argv = [PYTHON, str(HERE / script), *map(str, args)]
    try:
        done = subprocess.run(
            argv,
            cwd=code,
            env=code_env(code),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g} s: {shlex.join(argv[1:])}"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {done.returncode}: {' | '.join(tail)}"}
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def supervisor_argv(*args: str) -> list[str]:
    """``mcp-supervisor ARGS`` by the entry point every layout keeps (``python -m
    supervisor.cli``); run it with ``cwd=code`` and ``env=code_env(code)``."""
    return [PYTHON, "-m", "supervisor.cli", *args]


def imported_from(code: Path) -> str:
    """The file ``import supervisor`` loads for a process started as ``supervisor_argv``
    on ``code``: the proof that a side runs the code it is said to."""
    done = subprocess.run(
        [PYTHON, "-c", "import supervisor; print(supervisor.__file__)"],
        cwd=code,
        env=code_env(code),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def server_argv(*flags: str) -> list[str]:
    """The command line of our minimal server."""
    return [PYTHON, str(SERVER), *flags]


def quantiles(samples: Sequence[float]) -> dict[str, float]:
    """p50, p99, mean, min and max of ``samples`` (same unit as given)."""
    ordered = sorted(samples)
    if len(ordered) == 1:
        only = ordered[0]
        return {"p50": only, "p99": only, "mean": only, "min": only, "max": only, "n": 1}
    cuts = statistics.quantiles(ordered, n=100, method="inclusive")
    return {
        "p50": statistics.median(ordered),
        "p99": cuts[98],
        "mean": statistics.fmean(ordered),
        "min": ordered[0],
        "max": ordered[-1],
        "n": len(ordered),
    }


def rss_kb() -> int:
    """This process's resident set size (VmRSS) in KiB."""
    return rss_parts()["VmRSS"]


def rss_parts() -> dict[str, int]:
    """VmRSS and its parts from /proc/self/status, in KiB: RssAnon (the heaps, where
    a leak would show), RssFile (mapped files: code pages of the interpreter and of
    libraries as they are first used) and RssShmem."""
    parts: dict[str, int] = {}
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                parts[key] = int(value.split()[0])
    if "VmRSS" not in parts:
        raise RuntimeError("no VmRSS in /proc/self/status")
    return parts


def heap_kb() -> dict[str, int]:
    """glibc's view of the C heap (mallinfo2, every arena), in KiB: in use, free inside
    the heap (fragmentation), and mmapped blocks (pymalloc's arenas among them); plus
    Python's live block count. Empty where there is no mallinfo2 (not glibc)."""
    import ctypes
    import sys

    class _MallInfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in (
                *("arena", "ordblks", "smblks", "hblks", "hblkhd"),
                *("usmblks", "fsmblks", "uordblks", "fordblks", "keepcost"),
            )
        ]

    try:
        libc = ctypes.CDLL(None)
        mallinfo2 = libc.mallinfo2
    except (OSError, AttributeError):
        return {}
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return {
        "in_use_kb": info.uordblks // 1024,
        "free_kb": info.fordblks // 1024,
        "mmapped_kb": info.hblkhd // 1024,
        "py_blocks": sys.getallocatedblocks(),
    }


def open_fds() -> int:
    """How many file descriptors this process holds."""
    return len(os.listdir("/proc/self/fd"))


def raise_fd_limit(wanted: int) -> int:
    """Raise the soft RLIMIT_NOFILE towards ``wanted`` (up to the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


def quiet_logging() -> None:
    """Keep the supervisor's log records (they are still made) off the terminal."""
    root = logging.getLogger()
    root.addHandler(logging.NullHandler())
    root.setLevel(logging.WARNING)


def emit(result: dict[str, Any]) -> None:
    """The worker's answer: one JSON line, last on stdout; with the file ``supervisor``
    was imported from, when it was (which copy of the project was measured)."""
    if "supervisor" in sys.modules:
        result.setdefault("supervisor_from", sys.modules["supervisor"].__file__)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def ours_config(
    servers: Sequence[tuple[str, Sequence[str]]],
    *,
    eager: bool = False,
    search: bool | str = "auto",
    init_timeout_s: float = 60.0,
    limited: bool = False,
    store_url: str | None = None,
) -> Any:
    """A Config of trusted local servers with a 0 s reconnect schedule; ``limited``: with
    the exposure lists and rate limits of ``LIMITED`` too; ``store_url``: the store on
    that PostgreSQL."""
    entries = {
        name: {
            "command": argv[0],
            "args": list(argv[1:]),
            "trusted": True,
            "start": "eager" if eager else "lazy",
            "reconnect_schedule_s": [0.0],
            "init_timeout_ms": round(init_timeout_s * 1000),
        }
        for name, argv in servers
    }
    store = {"store": {"url": store_url}} if store_url else {}
    return load_json_config(
        {"tool_search": {"enabled": search}, "servers": entries, **(LIMITED if limited else {}), **store}
    )


LIMITED: dict[str, Any] = {
    "exposure": [
        {"tenant": "*", "server": "*", "tools": {"allow": ["echo", "extra*"], "deny": ["secret_*"]}},
        {"tenant": "default", "prompts": {"deny": ["admin_*"]}, "resources": {"deny": ["file:///etc/*"]}},
    ],
    "limits": [
        {"tenant": "*", "per_s": 1_000_000, "burst": 1_000_000},
        {"tenant": "*", "server": "*", "tool": "echo", "per_s": 1_000_000, "burst": 1_000_000},
    ],
}
"""Issue 32's settings as a call meets them and passes: exposure lists that apply to
every tenant and server (the echo tool allowed), and two rate limits that cover every
call with room to spare (one per tenant, one per tenant, server and tool). Code from
before the issue ignores both keys, with a config warning."""


def load_json_config(data: dict[str, Any]) -> Any:
    """``supervisor.load_config`` of ``data`` (written to a file for the while)."""
    from supervisor import load_config

    with tempfile.TemporaryDirectory(prefix="bench-config-") as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(data))
        return load_config(path)


async def server_pid(sup: Any, name: str) -> int:
    """The pid of a running server of ``sup`` (from its connection actor's status)."""
    status = await sup.connection_status(name)
    if status is None or status.transport is None:
        raise RuntimeError(f"server {name} has no transport")
    return int(status.transport.split()[0].removeprefix("pid="))


async def wait_steady(sup: Any, names: Sequence[str], newer_than: dict[str, int] | None = None) -> None:
    """Wait until every named server is available (and, if given, re-listed since)."""
    wanted = set(names)

    def ready(catalog: Any) -> bool:
        servers = catalog.servers
        for name in wanted:
            view = servers[name]
            if not view.available:
                return False
            if newer_than is not None and view.generation <= newer_than.get(name, -1):
                return False
        return True

    await sup.router.cell.wait_until(ready)


def child_pids() -> list[int]:
    """Pids of this process's direct children."""
    me = os.getpid()
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            kids.append(int(entry))
    return kids


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        kids = [child for child, ppid in parents.items() if ppid == parent]
        found += kids
        frontier += kids
    return found


def fds_and_rss(pid: int) -> tuple[int, int]:
    """Descriptors and VmRSS (KiB) of another process."""
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return fds, proc_status(pid)["VmRSS"]


def proc_status(pid: int) -> dict[str, int]:
    """The KiB fields of /proc/<pid>/status (VmRSS, VmHWM: the peak, …)."""
    found: dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            if value.strip().endswith("kB"):
                found[key] = int(value.split()[0])
    return found


@contextlib.contextmanager
def serve_running(
    config_of: Callable[[int], dict[str, Any]], prefix: str, code: Path = ROOT
) -> Iterator[tuple[int, int]]:
    """A real ``serve`` subprocess (of the code in ``code``) on a free loopback port, its
    state in a temporary directory, with the config ``config_of(port)``; yields
    (port, pid), then SIGTERM."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        config_file = Path(tmp) / "config.json"
        config_file.write_text(json.dumps(config_of(port)))
        command = supervisor_argv("serve", "--config", str(config_file), "--state-dir", tmp)
        serve = subprocess.Popen(
            command, cwd=code, env=code_env(code), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            yield port, serve.pid
        finally:
            serve.send_signal(signal.SIGTERM)
            serve.wait(timeout=60)


def free_port() -> int:
    """A free loopback port, for a server that is told its port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def now() -> float:
    return time.perf_counter()
