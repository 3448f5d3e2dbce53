"""The folder's parent side: it runs this instance's folder process (``folder.py``),
wakes it when lines were written, and knows how far it has folded.

Spawned as the servers are (``actors.transports.spawned``): its own process group,
the parent-death signal (a SIGKILLed supervisor leaves no folder behind), a pidfile
(the next start reaps what is left), the instance's marker, reaped at its end. A
folder that dies is started again after a backoff; nothing is lost, since the journal
holds the rows and the folder reads them again from the oldest segment, idempotently.

Wake-ups are coalesced: a written line asks for one, and the waker sends one byte at
most every ``WAKE_EVERY_S``, never a syscall per call. ``flush`` waits until the folder
has committed every line written before it (the store actor's ``flush`` does, so that
a reader after it sees the rows).

The folder's reports set ``journal.waiting`` (rows the database refused, waiting in the
journal); while rows wait, one line says how many and why, at most every
``REPORT_EVERY_S``, and one line says when the database has them all again: nothing is
lost, so nothing is called lost.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import orjson
import trio

from actors.log_events import get_logger
from actors.spec import ServerSpec
from actors.transport_errors import SpawnError
from actors.transports.spawned import Spawned, spawn_server
from supervisor.store.database import DB_FILENAME
from supervisor.store.folder import FolderSettings
from supervisor.store.journal import AuditJournal, Position

log = get_logger("supervisor.store.journal")

NAME = "audit-folder"
"""The folder as its pidfile and its marker name it."""
WAKE_EVERY_S = 0.05
"""At most one wake-up this often: at 5 ms the calls' p99 was 4 times worse and 64 in flight
answered 14% fewer calls a second (benchmarks/RESULTS.md, issue 37); a row's durability
is the journal's, so only its arrival in the database waits."""
FLUSH_S = 10.0
"""How long ``flush`` waits for the folder at most (real seconds)."""
REPORT_EVERY_S = 10.0
RESTART_S = (0.1, 5.0)
"""The first and the longest wait before a folder that died is started again."""
STOP_S = 5.0
"""How long ``stop`` waits for the folder's last pass before killing it."""
KILL_S = 5.0
STEADY_S = 30.0
"""A folder that ran this long starts its backoff afresh when it dies."""
_POLL_S = 0.05

BOOTSTRAP = """\
import sys, types
root = sys.argv[1]
for name in ("supervisor", "supervisor.store"):
    package = types.ModuleType(name)
    package.__path__ = [root + "/" + name.replace(".", "/")]
    sys.modules[name] = package
sys.path.insert(0, root)
from supervisor.store.folder import main
sys.exit(main())
"""
"""``python -m supervisor.store.folder`` without the packages' ``__init__``: they import
the whole supervisor (a third of a second per start), the folder needs the store alone."""


def folder_command() -> tuple[str, ...]:
    """The folder's argv: no setting in it (argv is world-readable in /proc)."""
    root = str(Path(__file__).resolve().parents[2])  # the folder holding supervisor/
    return (sys.executable, "-I", "-c", BOOTSTRAP, root)


def folder_settings(state_dir: Path, instance: str, url: str | None) -> FolderSettings:
    """The folder of ``instance``'s journal, writing to the state directory's SQLite
    file, or with ``url`` to that PostgreSQL store."""
    sqlite = None if url is not None else str(state_dir / DB_FILENAME)
    return FolderSettings(state_dir=str(state_dir), instance=instance, sqlite=sqlite, url=url)


def _exits_within(pid: int, seconds: float) -> bool:
    """Whether our child ``pid`` exits within ``seconds`` of real time (it stays to be
    reaped by its ``trio.Process``; one reaped already counts as exited)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)


async def _ended(spawned: Spawned, grace_s: float) -> None:
    """Wait for the folder to exit, in a thread (real time, whatever the clock), and
    SIGKILL its group after ``grace_s``; then its teardown has nothing left to wait for."""
    pid = spawned.process.pid
    if not await trio.to_thread.run_sync(_exits_within, pid, grace_s):
        spawned.group.signal(signal.SIGKILL)
        await trio.to_thread.run_sync(_exits_within, pid, KILL_S)


class Folding:
    """The folder of one journal, kept running; see the module docstring."""

    def __init__(self, journal: AuditJournal, settings: FolderSettings) -> None:
        self.journal = journal
        self.settings = settings
        self.folded: Position = (0, 0)
        """Every line before this point is committed."""
        self.error: str | None = None
        self._refusals = 0  # reports of a database that refused rows
        self._spec = ServerSpec(name=NAME, command=folder_command(), shutdown_grace_s=5.0)
        self._spawned: Spawned | None = None
        self._ready = False  # its settings are sent: wake-ups may follow
        self._due = False
        self._now = False
        self._wake = trio.Event()
        self._progress = trio.Event()
        self._running = False
        self._stopping = False
        self._done = trio.Event()
        self._backoff = trio.CancelScope()
        self._reported_at: float | None = None
        journal.on_write = self.wake

    # ------------------------------------------------------------ callers' side

    @property
    def pid(self) -> int | None:
        """The folder process's pid while one runs."""
        return None if self._spawned is None else self._spawned.process.pid

    def wake(self) -> None:
        """Lines were written: the folder hears of it within ``WAKE_EVERY_S``."""
        if not self._due:
            self._due = True
            self._wake.set()

    async def flush(self, timeout_s: float = FLUSH_S) -> bool:
        """Wait until the folder has committed every line written before the call; False
        when it has not within ``timeout_s`` real seconds, or said that the database
        refused them (waiting longer would not help: they wait in the journal)."""
        target, refusals = self.journal.position, self._refusals
        deadline = time.monotonic() + timeout_s
        while self.folded < target:
            if not self._running or self._refusals > refusals or time.monotonic() >= deadline:
                return False
            self._now = True
            self._wake.set()
            with trio.move_on_after(_POLL_S):
                await self._progress.wait()
        return True

    async def stop(self) -> Position:
        """Ask the folder for a last pass, wait for it to end (``STOP_S`` at most, then
        it is killed); how far it folded. Shielded: every wait in it is bounded in real
        time, so a virtual clock's jump cannot cut the last pass short."""
        self._stopping = True
        self._backoff.cancel()
        with trio.CancelScope(shield=True):
            spawned = self._spawned
            if spawned is not None:
                with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
                    assert spawned.process.stdin is not None
                    await spawned.process.stdin.aclose()
                await _ended(spawned, STOP_S)
            if self._running:
                await self._done.wait()
        return self.folded

    # ------------------------------------------------------------ the task

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep a folder running until ``stop``."""
        self._running = True
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._waker)
                task_status.started()
                wait = RESTART_S[0]
                while not self._stopping:
                    began = trio.current_time()
                    try:
                        status = await self._run_folder()
                    except (SpawnError, OSError) as exc:
                        log.error("audit folder could not start", extra={"fields": {"error": str(exc)}})
                        status = None
                    if self._stopping:
                        break
                    wait = RESTART_S[0] if trio.current_time() - began >= STEADY_S else wait
                    log.warning(
                        "audit folder ended; starting it again",
                        extra={"fields": {"status": status, "restart_in_s": wait}},
                    )
                    with self._backoff:
                        await trio.sleep(wait)
                    self._backoff = trio.CancelScope()
                    wait = min(wait * 2, RESTART_S[1])
                nursery.cancel_scope.cancel()
        finally:
            self._running = False
            self._done.set()

    async def _run_folder(self) -> int | None:
        """One folder, from its spawn to its exit (reaped, pidfile gone); its status."""
        spawned = await spawn_server(self._spec, Path(self.settings.state_dir), self.journal.instance_id)
        self._spawned = spawned
        process = spawned.process
        try:
            assert process.stdin is not None and process.stdout is not None and process.stderr is not None
            with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
                await process.stdin.send_all(self.settings.encode())
                self._ready = True
                if self._stopping:  # ``stop`` came during the spawn: a last pass at once
                    await process.stdin.aclose()
                self._now = True
                self._wake.set()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._said, process.stderr)
                await self._reports(process.stdout)
        finally:
            self._ready = False
            self._spawned = None
            with trio.CancelScope(shield=True):
                await _ended(spawned, 0.0)
                await spawned.aclose()
        return process.returncode

    async def _reports(self, stream: trio.abc.ReceiveStream) -> None:
        buffer = b""
        while data := await stream.receive_some(65536):
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                self._heard(orjson.loads(line))

    async def _said(self, stream: trio.abc.ReceiveStream) -> None:
        """What the folder says on stderr (a traceback if it crashed), in our log."""
        said = b""
        while data := await stream.receive_some(65536):
            said = (said + data)[-8192:]
        if said.strip():
            log.error("audit folder said", extra={"fields": {"stderr": said.decode(errors="replace")}})

    def _heard(self, report: dict[str, object]) -> None:
        segment, offset, waiting = report["segment"], report["offset"], report["waiting"]
        assert isinstance(segment, int) and isinstance(offset, int) and isinstance(waiting, int)
        self.folded = max(self.folded, (segment, offset))
        self.journal.waiting = waiting
        self.error = report["error"] if isinstance(report["error"], str) else None
        self._refusals += self.error is not None
        if report.get("bad"):
            log.warning(
                "audit journal lines skipped: unreadable",
                extra={"fields": {"lines": report["bad"], "path": str(self.journal.directory)}},
            )
        self._report()
        self._progress.set()
        self._progress = trio.Event()

    def _report(self) -> None:
        """Say what is true of the rows the database refused: how many wait in the
        journal (one line at most every ``REPORT_EVERY_S``), or that it holds them all again."""
        waiting, now = self.journal.waiting, trio.current_time()
        if waiting and (self._reported_at is None or now - self._reported_at >= REPORT_EVERY_S):
            self._reported_at = now
            fields = {
                "rows": waiting,
                "error": self.error or "",
                "retry_s": self.settings.retry_s,
                "path": str(self.journal.directory),
            }
            log.warning("audit rows wait in the journal for the database", extra={"fields": fields})
        elif not waiting and self._reported_at is not None:
            self._reported_at = None
            log.info(
                "audit rows folded in from the journal: the database holds every row again",
                extra={"fields": {"path": str(self.journal.directory)}},
            )

    async def _waker(self) -> None:
        """The one sender of wake-ups: a byte at most every ``WAKE_EVERY_S`` (at once for ``flush``)."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            if not self._now:
                await trio.sleep(WAKE_EVERY_S)
            self._due = self._now = False
            spawned = self._spawned
            if spawned is not None and self._ready and not self._stopping:
                assert spawned.process.stdin is not None
                with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
                    await spawned.process.stdin.send_all(b"w")
