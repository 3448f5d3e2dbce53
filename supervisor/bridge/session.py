"""One bridge session: a process of the server's own, and its lines passed through.

The hub never speaks MCP to the process: the client's ``initialize`` is the first
thing it reads, so capability negotiation, subscriptions and state are the client's.
A client message becomes one line on the process's stdin (its JSON re-encoded
compactly, its ids untouched), written by the socket's reader through the session's
``StdinFeed`` (``stdin_feed.py``: at once when the pipe takes it, else queued, bounded,
for the session's feeder task); each line the process writes goes back verbatim in an
``mcp:message`` (checked to be JSON, never rewritten). Nothing is broadcast: a
session's lines go to the socket that opened it and nowhere else.

``open`` is answered once the process is spawned. The session ends when the client
closes it, when its socket goes away (the socket's nursery is cancelled), or when the
process exits; each way leaves the ``async with`` of the process, whose teardown is
the stdio transport's (close stdin, SIGTERM, SIGKILL the group, reap), shielded.
Only then does the hub count the process out and write the close's audit row; a
process that exited by itself is then announced to the client with
``mcp:session:close`` and its reason.
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractAsyncContextManager
from typing import Protocol

import orjson
import trio

from actors.log_events import get_logger
from actors.protocol import bridge_envelope as env
from actors.protocol.bridge_envelope import FrameId
from actors.protocol.errors import FramingError
from actors.spec import ServerSpec
from actors.transport_errors import SpawnError, TransportClosed
from actors.transports.raw_stdio import RawStdio
from supervisor.bridge.hub import BridgeSession
from supervisor.bridge.stdin_feed import SERVER_NOT_READING, StdinFeed

log = get_logger("supervisor.bridge")


class SessionHost(Protocol):
    """What a session uses of its hub (``hub.BridgeHub``, or a dial-out peer's own)."""

    @property
    def max_message_bytes(self) -> int: ...

    def open_process(
        self, session: BridgeSession, spec: ServerSpec
    ) -> AbstractAsyncContextManager[RawStdio]: ...

    def opened(self, session: BridgeSession) -> None: ...

    def ended(self, session: BridgeSession, failed: str | None = None) -> None: ...


class BridgeLink(Protocol):
    """What a session uses of its socket (``link.BridgeLink``, ``dialout.PeerLink``)."""

    @property
    def hub(self) -> SessionHost: ...

    sessions: dict[str, BridgeSession]

    async def send(self, frame: env.Frame) -> None: ...

    async def send_text(self, text: str) -> None: ...

    def post(self, frame: env.Frame) -> None: ...


SERVER_EXITED = "server_exited"
TOO_LONG = "server_message_too_large"


async def run_session(
    link: BridgeLink, session: BridgeSession, spec: ServerSpec, frame_id: FrameId | None
) -> None:
    """Spawn, answer the open, pass lines both ways until the session ends; then tear
    down and send the client ``mcp:session:close`` with the reason (echoing the id of
    its own close), unless its socket is gone."""
    hub = link.hub
    failed: str | None = None
    child: RawStdio | None = None
    try:
        with session.scope:
            try:
                async with hub.open_process(session, spec) as child:
                    session.pid = child.pid
                    child.set_max_line_bytes(hub.max_message_bytes)
                    session.feed = feed = StdinFeed(child)
                    hub.opened(session)
                    link.sessions[session.id] = session
                    await link.send(env.open_result(session.id, frame_id))
                    async with trio.open_nursery() as pumps:
                        pumps.start_soon(_feed, feed)
                        reason = await _pump(child, session, link)
                        session.close(reason)  # the first reason wins: a client's close came first
            except SpawnError as exc:
                failed = "spawn_failed"
                log.warning("bridge: cannot start a session", extra={"fields": {"error": str(exc)}})
                message = f"server {spec.name!r} could not be started; the supervisor's log says why"
                link.post(env.open_failed(failed, message, frame_id))
    finally:
        link.sessions.pop(session.id, None)
        hub.ended(session, failed)
    if child is not None:  # torn down: its exit status is known
        link.post(_close_frame(session, spec.name, child.exit_note()))


def _close_frame(session: BridgeSession, server: str, note: str) -> env.Frame:
    reason = session.close_reason or SERVER_EXITED
    if reason == SERVER_EXITED:
        text = f"the process of server {server!r} ended{note}"
    elif reason == TOO_LONG:
        text = f"server {server!r} wrote a message over the bridge's frame bound; the session was closed"
    elif reason == SERVER_NOT_READING:
        text = f"server {server!r} stopped reading its input (too much waited for it); the session was closed"
    else:
        text = f"the session was closed ({reason})"
    return env.session_close(session.id, reason, text, id=session.close_id)


async def _feed(feed: StdinFeed) -> None:
    """What the process's stdin could not take at once, in order."""
    with contextlib.suppress(TransportClosed):  # the process is going: ``_pump`` sees it end
        await feed.run()


def offer(session: BridgeSession, line: bytes) -> bool:
    """Pass a client's message line to the session's process without waiting; False
    when it cannot take it (its stdin closed: the session is ending). A process that
    stopped reading is closed (``SERVER_NOT_READING``), not waited for."""
    feed = session.feed
    if feed is None:
        return False
    try:
        accepted = feed.offer(line)
    except TransportClosed:
        return False
    if not accepted:
        if session.close_reason is None:  # once: later lines of a closing session are dropped quietly
            log.warning(
                "bridge: a server stopped reading its input; its session was closed",
                extra={"fields": {"session": session.id, "server": session.server}},
            )
        session.close(SERVER_NOT_READING)
    else:
        session.messages_in += 1
    return True


async def _pump(child: RawStdio, session: BridgeSession, link: BridgeLink) -> str:
    """The process's lines to the client until it ends; the reason it ended."""
    while True:
        try:
            lines = await child.receive_lines()
        except FramingError:
            return TOO_LONG
        except TransportClosed:
            lines = []
        if not lines:
            return SERVER_EXITED
        for line in lines:
            try:
                orjson.loads(line)
            except orjson.JSONDecodeError:
                problem = "the server wrote a line that is not JSON; it was dropped"
                await link.send(env.error("bad_server_output", problem, session.id))
                continue
            session.messages_out += 1
            await link.send_text(env.encode_message_json(session.id, line))
