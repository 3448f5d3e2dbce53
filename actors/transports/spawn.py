"""Starting a local server: the plan (what exec would refuse is caught first) and the
spawn, with the parent-death signal on Linux.

*Plan*: merge the environment (with the server's marker, see ``escapees.py``), find
the program on the merged ``PATH``, check ``cwd`` and every string exec must carry.
Anything wrong is a :class:`SpawnError` whose text names the server, the entry and the
fix (never a value: it may be a secret). So is anything the spawn itself raises.

*Spawn* in a new session (the server and anything it starts share one process group we
can kill as a whole). On Linux the server also gets ``PR_SET_PDEATHSIG`` = SIGKILL, so
a supervisor that is SIGKILLed (or OOM-killed) does not leave it running until the next
start's sweep. The kernel sends that signal when the *thread* that forked the child
ends, not the process. trio's ``open_process`` forks in a trio worker thread, and those
end after 10 s idle, which would kill every server 10 s after its start. So the fork
happens here, in one of two long-lived threads of a pool kept for the life of the
process; the child sets the signal between fork and exec (``preexec_fn``: a single
``prctl`` call, resolved before the fork) and kills itself at once if the supervisor
died before that.

The cost: with ``preexec_fn`` Python forks instead of vforking, and holds the GIL while
the kernel copies the page tables: about 5 ms per spawn at a 70 MB supervisor (1 ms
before), during which the event loop waits. 300 eager servers came up in 8.4-9.7 s
instead of 6.3-7.1 s on a 2-core VM. An exec wrapper that sets the signal (util-linux
``setpriv``) would avoid the fork, but it is not everywhere, and an exec failure of the
real program would then look like a server that exited at once, not a SpawnError.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import functools
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import TypeVar

import attrs
import trio

from actors.log_events import get_logger
from actors.spec import ServerSpec
from actors.transport_errors import SpawnError
from actors.transports.escapees import MARKER_ENV

_log = get_logger("actors.transports.stdio")

T = TypeVar("T")


@attrs.frozen(slots=True)
class Launch:
    """Everything needed to start the process, decided before anything is started."""

    argv: tuple[str, ...]
    executable: str
    env: Mapping[str, str]
    cwd: str | None


def plan_launch(spec: ServerSpec, environ: Mapping[str, str], marker: str) -> Launch:
    """Resolve the command and check the working directory, or raise SpawnError."""
    name = spec.name
    if not spec.command or not spec.command[0]:
        raise SpawnError(f"mcp server {name}: no command configured; set the server's command")
    _check_strings(spec)
    argv0 = spec.command[0]
    env = {**environ, **spec.env, MARKER_ENV: marker}
    cwd = spec.cwd
    if cwd is not None and not os.path.isdir(cwd):
        raise SpawnError(
            f"mcp server {name}: working directory {cwd!r} does not exist or is not a "
            "directory; fix the server's cwd"
        )
    if os.sep in argv0:
        # A path is taken relative to the server's cwd, as exec in the child would.
        candidate = os.path.join(cwd or os.getcwd(), argv0)
        if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
            raise SpawnError(
                f"mcp server {name}: command {argv0!r} does not exist or is not executable; "
                "check the path in the server's command"
            )
        executable = os.path.abspath(candidate)
    else:
        search = env.get("PATH", os.defpath)
        found = shutil.which(argv0, path=search)
        if found is None:
            # The PATH searched is named: a command found in the user's shell but not
            # here is nearly always a virtualenv that is active there and not here.
            raise SpawnError(
                f"mcp server {name}: command {argv0!r} not found on PATH ({search}); install it, "
                "give its full path in the server's command, or set PATH in the server's env"
            )
        executable = os.path.abspath(found)
    return Launch(argv=tuple(spec.command), executable=executable, env=env, cwd=cwd)


def _check_strings(spec: ServerSpec) -> None:
    """What exec would refuse (a NUL byte, ``=`` in a variable name, a non-string) is a
    SpawnError naming the entry; never the value, which may be a secret."""
    name = spec.name
    for index, arg in enumerate(spec.command):
        where = "the command" if index == 0 else f"argument {index} of the command"
        if not isinstance(arg, str):
            raise SpawnError(f"mcp server {name}: {where} is not a string; fix the server's command or args")
        if "\0" in arg:
            raise SpawnError(
                f"mcp server {name}: {where} contains a NUL byte, which no program can receive; "
                "remove it from the server's command or args"
            )
    for key, value in spec.env.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise SpawnError(
                f"mcp server {name}: env entry {key!r} is not a string pair; fix the server's env"
            )
        if "\0" in key or "=" in key:
            raise SpawnError(
                f"mcp server {name}: env variable name {key!r} contains a NUL byte or '='; "
                "rename it in the server's env"
            )
        if "\0" in value:
            raise SpawnError(
                f"mcp server {name}: the value of env variable {key} contains a NUL byte, which "
                "no environment can hold; fix the server's env (or the file it is read from)"
            )
    if spec.cwd is not None and "\0" in spec.cwd:
        raise SpawnError(
            f"mcp server {name}: the working directory contains a NUL byte; fix the server's cwd"
        )


# What Popen raises for an argument the OS or Python refuses, besides OSError.
_REFUSED = (OSError, ValueError, TypeError, subprocess.SubprocessError)


async def spawn(spec: ServerSpec, launch: Launch) -> trio.Process:
    """Start the server in its own session (pgid == pid), to die with the supervisor
    where the OS can do that; whatever fails is a SpawnError."""
    try:
        if _create_process is None:
            return await trio.lowlevel.open_process(
                list(launch.argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                executable=launch.executable,
                env=dict(launch.env),
                cwd=launch.cwd,
                start_new_session=True,
            )
        return await _spawn_dying_with_us(launch)
    except _REFUSED as exc:  # every failure to start is this server's SpawnError
        reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
        raise SpawnError(
            f"mcp server {spec.name}: could not start {launch.argv[0]!r}: {reason}; "
            "check that the command is an executable program and the cwd is usable"
        ) from exc


# --------------------------------------------------------------- parent-death signal

_PR_SET_PDEATHSIG = 1


def _process_factory() -> Callable[..., trio.Process] | None:
    """trio's private constructor of a Process around a Popen, where the parent-death
    signal works (Linux); None elsewhere, or if a trio release renamed it (then servers
    are spawned as before, and a SIGKILLed supervisor leaves them to the next start)."""
    if not sys.platform.startswith("linux"):
        return None
    create = getattr(trio.Process, "_create", None)
    if create is None:
        _log.warning("this trio has no Process._create: servers will not die with a killed supervisor")
    return create


_create_process = _process_factory()
_pool: concurrent.futures.ThreadPoolExecutor | None = None


def _spawner_pool() -> concurrent.futures.ThreadPoolExecutor:
    """Long-lived threads to fork from (a pool's threads end only with the process)."""
    global _pool
    if _pool is None:
        _pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="mcp-spawn")
    return _pool


async def _in_spawner_thread(fn: Callable[[], T]) -> T:
    """Run ``fn`` in a spawner thread; not cancellable (a started process is never lost)."""
    token = trio.lowlevel.current_trio_token()
    done = trio.Event()
    future = _spawner_pool().submit(fn)
    future.add_done_callback(lambda _: token.run_sync_soon(done.set))
    with trio.CancelScope(shield=True):
        await done.wait()
    return future.result()


def _die_with(parent: int) -> Callable[[], None]:
    """The child's last step before exec: SIGKILL when the forking thread ends, and at
    once if the supervisor already died (the child was reparented)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before the fork

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


async def _spawn_dying_with_us(launch: Launch) -> trio.Process:
    """What ``spawn`` asks of ``open_process``, forked from a spawner thread with the
    parent-death signal set in the child."""
    assert _create_process is not None
    with contextlib.ExitStack() as child_ends, contextlib.ExitStack() as on_failure:
        ours: list[trio.lowlevel.FdStream] = []
        theirs: list[int] = []
        for to_child in (True, False, False):  # stdin, stdout, stderr
            read_fd, write_fd = os.pipe()  # both close-on-exec; Popen dups the child's end
            mine, child = (write_fd, read_fd) if to_child else (read_fd, write_fd)
            child_ends.callback(os.close, child)
            stream = trio.lowlevel.FdStream(mine)
            on_failure.callback(stream.close)
            ours.append(stream)
            theirs.append(child)
        popen = await _in_spawner_thread(
            functools.partial(
                subprocess.Popen,
                list(launch.argv),
                stdin=theirs[0],
                stdout=theirs[1],
                stderr=theirs[2],
                executable=launch.executable,
                env=dict(launch.env),
                cwd=launch.cwd,
                start_new_session=True,
                preexec_fn=_die_with(os.getpid()),
            )
        )
        on_failure.pop_all()
    return _create_process(popen, *ours)
