"""What a gateway client hears of one of its requests while it runs, besides the answer.

``with_related`` runs a request's call with a forwarding task beside it (started only
when there is something to forward): the progress the backend reports, under the
client's own token, and the servers' log messages tied to the call at the client's
level (``ClientSide.logs``; which messages are tied: ``actors/connection/log_levels.py``),
on the request's own outlet, never after its answer. ``wanting_logs`` holds a 2026-07-28
request's ``_meta`` log level for as long as it runs, so its servers are asked for it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from actors.connection.client_side import ClientSide
from actors.connection.server_log import ServerLogged
from actors.mailbox import try_send
from actors.protocol.jsonrpc import to_wire
from actors.protocol.notifications import ProgressReceived
from actors.protocol.server_session import progress_notification
from actors.router.envelope import Envelope
from supervisor.calls.services import answered_by
from supervisor.gateway.outlet import Outlet
from supervisor.gateway.sse_events import StreamOutlet
from supervisor.sessions.session import Session

FORGET_LOGS_S = 5.0
"""How long a request's end waits to tell its servers its log level is no longer wanted."""


async def with_related(
    outlet: Outlet | None,
    token: Any,
    client: ClientSide | None,
    call: Callable[[trio.MemorySendChannel[ProgressReceived] | None], Awaitable[Envelope]],
) -> Envelope:
    """Run ``call``; while it runs (never after its answer), what it reports goes to the
    request's outlet: progress under the client's own token, and the server log messages
    tied to it at the client's level (``ClientSide.logs``: a slow client loses some)."""
    wants_logs = client is not None and client.log_level is not None
    if outlet is None or (token is None and not wants_logs):
        with answered_by(client):
            return await call(None)
    if token is None and isinstance(outlet, StreamOutlet):
        return await _logs_to_stream(outlet, client, call)
    send, receive = trio.open_memory_channel[ProgressReceived | ServerLogged](64)
    idle: trio.Nursery | None = None  # where the first log message starts the forwarding

    def take(record: ServerLogged) -> None:  # the connection actor's, while the call runs
        nonlocal idle
        if idle is not None:
            idle.start_soon(forward)
            idle = None
        try_send(send, record)

    if client is not None and wants_logs:
        client = attrs.evolve(client, logs=take)

    async def forward() -> None:
        async for report in receive:
            if isinstance(report, ServerLogged):
                await outlet.send(log_notification(report))
                continue
            note = progress_notification(token, report.progress, report.total, report.message)
            await outlet.send(to_wire(note))

    try:
        async with trio.open_nursery() as nursery:
            if token is not None:  # progress comes straight from the actor: forward at once
                nursery.start_soon(forward)
            else:  # log messages may never come: no task (a call's cost) until one does
                idle = nursery
            try:
                with answered_by(client):
                    async with send:
                        return await call(send if token is not None else None)
            finally:
                idle = None  # a late message starts nothing
    except BaseExceptionGroup as group:
        raise _as_without_a_nursery(group) from None


async def _logs_to_stream(
    outlet: StreamOutlet,
    client: ClientSide | None,
    call: Callable[[trio.MemorySendChannel[ProgressReceived] | None], Awaitable[Envelope]],
) -> Envelope:
    """A call with no progress token whose client wants log messages, answered on an
    SSE stream: publishing there never waits, so the connection actor publishes each
    message itself, with no forwarding task and no nursery (a call's cost: every
    handshake-era client wants warnings by default)."""
    publish, running = outlet.stream.publish, True

    def take(record: ServerLogged) -> None:
        if running:  # never after the answer
            publish(log_notification(record))

    try:
        with answered_by(attrs.evolve(client, logs=take) if client is not None else None):
            return await call(None)
    finally:
        running = False


def _as_without_a_nursery(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """What escapes a call run beside its forwarding task, as if run alone: a group of
    ``Cancelled`` (the request was cancelled) is one, and another exception with them
    is that one, so the fronts catch what they catch of a call run alone."""
    others = [exc for exc in group.exceptions if not isinstance(exc, trio.Cancelled)]
    if not others:
        return group.exceptions[0]
    return others[0] if len(others) == 1 else group


@asynccontextmanager
async def wanting_logs(session: Session, who: str, level: str | None) -> AsyncIterator[None]:
    """For the block, ``who`` of ``session``'s clients wants its servers' log messages at
    ``level`` (a 2026-07-28 request's ``_meta`` level: its servers are asked for it)."""
    if level is None:
        yield
        return
    await session.want_logs(level, who)
    try:
        yield
    finally:
        with trio.CancelScope(shield=True, deadline=trio.current_time() + FORGET_LOGS_S):
            await session.want_logs(None, who)


def log_notification(record: ServerLogged) -> dict[str, Any]:
    """A server's log message as a gateway client hears it (``logger``: the server)."""
    params = {"level": record.level, "logger": record.server, "data": record.data}
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": params}
