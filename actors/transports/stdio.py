"""The stdio transport: a local MCP server as a child process, spoken to over its pipes.

Lifetime, all inside :func:`open_stdio_transport`:

1. *Plan* (pure apart from two filesystem lookups) and *spawn* in a new session, to
   die with the supervisor (``spawn.py``); anything wrong is a :class:`SpawnError`
   whose text names the server and the fix.
2. Write a pidfile, hand stderr and the exit to the hub (``stdio_hub``: one task for
   every server's stderr and exit); the redacted, bounded tail of stderr is kept by
   ``stderr_tail.py``.
3. *Use*: ``send`` / ``receive`` move JSON-RPC messages, one per line on the pipes
   (``actors/protocol/ndjson.py`` frames them); trio and OS errors become
   :class:`TransportClosed` here and nowhere else, a line that does not decode is
   the codec's ProtocolError.
4. *Teardown* (``process_group.py``), always, also under cancellation or while an
   exception propagates; shielded and under its own deadline: close stdin, wait
   ``shutdown_grace_s``, SIGTERM the group, wait again, SIGKILL the group, reap the
   leader, SIGKILL the group once more for members that outlived it, delete the pidfile.

A leader that exits on its own (crash) also takes its group along at once, and its
exit (seen through its pidfd) ends ``receive()`` once the pipe is drained: a grandchild
holding stdout open, even one that left the group with ``setsid``, would otherwise
hide the crash (no EOF) until a call timed out.

A server that leaves processes outside its process group (a daemon of its own, with
``setsid``) is caught by its marker in their environment and, in a child subreaper,
killed and reaped at its teardown (``escapees.py``).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import trio

from actors.log_events import get_logger
from actors.protocol.messages import Message
from actors.protocol.ndjson import LineDecoder, encode_lines
from actors.redaction import Redactor
from actors.spec import ServerSpec
from actors.transport_errors import SpawnError, TransportClosed
from actors.transports.base import Abilities, Connector, Transport
from actors.transports.pipes import WriterGone, read_some
from actors.transports.spawned import SpareSource, Spawned, spawn_server
from actors.transports.stderr_tail import StderrTail
from actors.transports.stdio_hub import StdioHub

_log = get_logger("actors.transports.stdio")

# What one read takes from a server's pipe is decoded and handled before any other
# task runs, so a server that sends in bulk (a log flood) holds the loop every server
# shares for one read's worth at a time: about 0.5 ms at 16 KB, 2 ms at 64 KB, which
# moved a healthy server's p50 by 2.5 ms during a flood (benchmarks/RESULTS.md, "A
# log flood beside a healthy server").
_RECEIVE_CHUNK = 16384
# How long teardown waits for a dead server's last words on stderr (EOF).
_STDERR_DRAIN_S = 0.25
_DRAIN_READS = 64  # at teardown, at most this many chunks (1 MB) still in the pipe

_IO_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)
T = TypeVar("T", bound="StdioTransport")


class StdioTransport(Transport):
    """One running server process.

    Made only by :func:`open_stdio_transport`, which owns the process and tears it down.
    """

    abilities = Abilities(writes_at_once=True)

    def __init__(self, spec: ServerSpec, process: trio.Process, redactor: Redactor) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        self._name = spec.name
        self._argv0 = os.path.basename(spec.command[0])
        self._process = process
        self._stdin = process.stdin
        self._stdout = process.stdout
        # A pipe on every POSIX system: the hub reads it by its descriptor.
        assert isinstance(process.stderr, trio.lowlevel.FdStream)
        self._stderr_stream = process.stderr
        self._tail = StderrTail(spec.name, redactor)
        self._stderr_done = trio.Event()  # EOF (or a read error) on stderr
        self._hub: StdioHub | None = None
        self._stderr_fd = -1
        self._server_gone = WriterGone()  # set when the server process has exited
        self._decoder = LineDecoder()
        self._unsent = bytearray()  # what send_nowait could not write; the next write starts with it

    @property
    def pid(self) -> int:
        """The server's pid, which is also its process group id."""
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        """Exit status once the process has exited (negative: killed by that signal)."""
        return self._process.returncode

    async def send(self, messages: Sequence[Message]) -> None:
        """Write ``messages`` to the server's stdin, one line each, after what an earlier
        ``send_nowait`` left; Unencodable (nothing written) if one cannot be encoded."""
        data = encode_lines(messages)
        if self._unsent:
            data = bytes(self._unsent) + data
            self._unsent.clear()
        if not data:
            return
        try:
            await self._stdin.send_all(data)
        except _IO_ERRORS as exc:
            raise TransportClosed(
                f"mcp server {self._name}: cannot write to the server, its stdin is closed{self._exit_note()}"
            ) from exc

    def send_nowait(self, messages: Sequence[Message]) -> bool:
        """Write what the pipe takes at once, without waiting; True when all of it went.

        False: the rest is kept, and the next ``send`` writes it first (``send([])``
        just that). Never raises for I/O: a full, closed or broken pipe writes nothing
        here and leaves ``send`` to wait or to report the failure. Unencodable (nothing
        written) if a message cannot be encoded. Not while a ``send`` is under way (the
        bytes would interleave): the caller keeps to one writer.
        """
        data = encode_lines(messages)
        if self._unsent:  # never ahead of an earlier rest
            self._unsent += data
            return False
        written = 0
        stdin = self._stdin
        fd = stdin.fileno() if isinstance(stdin, trio.lowlevel.FdStream) else -1
        if fd >= 0:  # -1: closed (trio marks a closed stream's descriptor -1, so no reuse)
            try:  # noqa: SIM105 - suppress() would add three calls to every tools/call
                written = os.write(fd, data)
            except OSError:
                pass
        if written < len(data):
            self._unsent += data[written:]
            return False
        return True

    async def receive(self) -> list[Message]:
        """The next messages from the server's stdout (at least one), or ``[]`` once it
        is closed. A line that does not decode raises the codec's ProtocolError, after
        the messages that came before it were returned."""
        self._decoder.raise_held()
        while True:
            try:  # read here, not in a coroutine of its own: every answer comes this way
                data = await read_some(self._stdout, _RECEIVE_CHUNK, self._server_gone)
            except _IO_ERRORS as exc:
                raise self._unreadable() from exc
            if not data:
                self._stdout_ended()
                return []
            if messages := self._decoder.take(data):
                return messages

    async def _read_stdout(self) -> bytes | bytearray:
        """The next chunk of stdout; empty once the server is gone (``receive``'s read,
        for a subclass that frames the bytes its own way)."""
        try:
            data = await read_some(self._stdout, _RECEIVE_CHUNK, self._server_gone)
        except _IO_ERRORS as exc:
            raise self._unreadable() from exc
        if not data:
            self._stdout_ended()
        return data

    def _unreadable(self) -> TransportClosed:
        """What a failed read of stdout becomes (for both readers: one wording)."""
        return TransportClosed(f"mcp server {self._name}: cannot read from the server{self._exit_note()}")

    def _stdout_ended(self) -> None:
        """The server is gone or going. What it wrote to stderr before closing stdout
        is in that pipe now; take it (without waiting: a process it left behind may hold
        stderr open) rather than leave it to the hub's next turn, so the failure reason
        can quote its last line."""
        for _ in range(_DRAIN_READS):
            if not self._stderr_ready():
                break

    def stderr_tail(self) -> list[str]:
        """The last lines of the server's stderr, redacted and cut (a copy)."""
        return self._tail.lines()

    def describe(self) -> str:
        """``pid=1234 cmd=python``."""
        return f"pid={self._process.pid} cmd={self._argv0}"

    def _exit_note(self) -> str:
        code = self._process.returncode
        if code is None:
            return ""
        if code < 0:
            return f" (process killed by signal {-code})"
        return f" (process exited with status {code})"

    def _read_stderr_with(self, hub: StdioHub) -> None:
        """Keep the redacted tail of stderr (logged at debug level), read by the hub."""
        self._hub = hub
        self._stderr_fd = self._stderr_stream.fileno()  # unwatched by this number, before the close
        hub.watch_readable(self._stderr_fd, self._stderr_ready)

    def _stderr_ready(self) -> bool:
        """Hub callback: stderr is readable; take one chunk, or finish at EOF. False when
        there was nothing to take."""
        fd = self._stderr_stream.fileno()
        try:
            chunk = os.read(fd, _RECEIVE_CHUNK) if fd >= 0 else b""
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""
        if chunk:
            self._tail.feed(chunk)
            return True
        self._end_stderr()
        return False

    def _end_stderr(self) -> None:
        if self._stderr_done.is_set():
            return
        if self._hub is not None:
            self._hub.unwatch(self._stderr_fd)
        self._tail.end()
        self._stderr_done.set()

    async def _finish_stderr(self, within: float) -> None:
        """After the process ended: a dying server's last words, for at most ``within``
        seconds (a grandchild may hold stderr open), then whatever the pipe still holds."""
        with trio.CancelScope(shield=True), trio.move_on_after(within):
            await self._stderr_done.wait()
        for _ in range(_DRAIN_READS):
            if not self._stderr_ready():  # empty for now, at EOF, or closed
                break
        self._end_stderr()


@asynccontextmanager
async def open_stdio_transport(
    spec: ServerSpec,
    *,
    state_dir: Path | None = None,
    redactor: Redactor | None = None,
    hub: StdioHub | None = None,
    instance: str | None = None,
    kind: type[T] = StdioTransport,  # type: ignore[assignment]  # T is StdioTransport here
    spares: SpareSource | None = None,
) -> AsyncIterator[T]:
    """Spawn ``spec.command`` and yield its transport; leaving the block stops it.

    ``hub`` reads the server's stderr and watches its exit; without a running one, the
    transport runs a hub of its own for as long as it lives. ``instance``: the id of
    the supervisor instance that runs the server (its pidfile names it). ``kind``: the
    transport class (a subclass reads the pipes its own way, as the bridge's raw one).
    ``spares``: where an already spawned, idle process of ``spec`` may be taken instead
    of spawning one (a warm pool's); the transport then owns and tears down that one.

    Raises SpawnError if the server cannot be started. An exception raised in the
    block comes out as itself (not wrapped in an ExceptionGroup).
    """
    if redactor is None:
        redactor = Redactor(spec.secrets)
    if hub is not None and hub.running:
        async with _open(spec, state_dir, redactor, hub, instance, kind, spares) as transport:
            yield transport
        return
    body_error: BaseException | None = None
    async with trio.open_nursery() as nursery:
        own = StdioHub()
        await nursery.start(own.run)
        try:
            async with _open(spec, state_dir, redactor, own, instance, kind, spares) as transport:
                yield transport
        except BaseException as exc:
            # Re-raised below, outside the nursery, so callers see it unwrapped.
            body_error = exc
        nursery.cancel_scope.cancel()
    if body_error is not None:
        raise body_error


@asynccontextmanager
async def _open(
    spec: ServerSpec,
    state_dir: Path | None,
    redactor: Redactor,
    hub: StdioHub,
    instance: str | None,
    kind: type[T] = StdioTransport,  # type: ignore[assignment]  # T is StdioTransport here
    spares: SpareSource | None = None,
) -> AsyncIterator[T]:
    # A spare is taken, or a process spawned, with no checkpoint before the try: it cannot be lost.
    server = spares(spec) if spares is not None else None
    if server is None:
        server = await spawn_server(spec, state_dir, instance)
    process, group = server.process, server.group
    try:
        transport = kind(spec, process, redactor)
        if not hub.running:  # it stopped while we spawned: the supervisor is going away
            raise SpawnError(f"mcp server {spec.name}: not started, the supervisor is stopping")

        def exited() -> None:
            group.exited()
            transport._server_gone.set()  # a daemon holding stdout cannot hide the death

        hub.watch_exit(process, exited)
        transport._read_stderr_with(hub)
        try:
            yield transport
        finally:
            try:
                await server.stop_group()
            finally:
                hub.unwatch_exit(process)
                await transport._finish_stderr(within=_STDERR_DRAIN_S)
    finally:
        await server.close()  # the group stop is a no-op unless it never got that far


class StdioConnector:
    """Connector for local servers: ``connector(spec)`` opens a stdio transport.

    ``redactor_factory`` builds the redactor for a spec (default: one that knows the
    spec's secrets), e.g. to add secrets known to the supervisor as a whole. ``hub``
    serves every server's stderr and exit while it runs (see ``stdio_hub``).
    ``instance``: the supervisor instance the servers belong to.
    """

    def __init__(
        self,
        state_dir: Path | None = None,
        redactor_factory: Callable[[ServerSpec], Redactor] | None = None,
        hub: StdioHub | None = None,
        instance: str | None = None,
    ) -> None:
        self._state_dir = state_dir
        self._redactor_factory = redactor_factory
        self._hub = hub
        self._instance = instance

    def __call__(self, spec: ServerSpec) -> AbstractAsyncContextManager[StdioTransport]:
        return self.of_kind(spec, StdioTransport)

    def of_kind(
        self, spec: ServerSpec, kind: type[T], spares: SpareSource | None = None
    ) -> AbstractAsyncContextManager[T]:
        """Open ``spec`` as a ``kind`` transport, with this connector's hub and pidfiles
        (on a process taken from ``spares`` when it has one)."""
        redactor = self._redactor_factory(spec) if self._redactor_factory is not None else None
        return open_stdio_transport(
            spec,
            state_dir=self._state_dir,
            redactor=redactor,
            hub=self._hub,
            instance=self._instance,
            kind=kind,
            spares=spares,
        )

    async def spawn(self, spec: ServerSpec) -> Spawned:
        """Spawn ``spec``'s process alone, as this connector would (a warm pool's spare);
        the caller owns it (``Spawned.aclose``) until a transport takes it."""
        return await spawn_server(spec, self._state_dir, self._instance)


if TYPE_CHECKING:  # mypy proves the connector satisfies the protocol in base.py
    _connector: Connector = StdioConnector()
