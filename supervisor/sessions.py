"""Sessions and turns: the host-facing facade over the router and the connections.

A ``Session`` is one conversation of an agent host. It owns a nursery for its
private (``scope: session``) connections, which end with it. A ``Turn`` is one model
turn: it holds the catalog epoch current when it began, so its tool list, schemas and
server states never change under it; the next turn sees whatever changed.
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import trio

from actors.connection.actor import ConnectionActor
from actors.connection.messages import (
    CallFailed,
    CallOutcome,
    CallTool,
    CancelCall,
    Command,
    ConnectionMessage,
    Control,
    EnsureStarted,
)
from actors.connection.spec import ServerSpec
from actors.connection.states import DOWN_STATES, State
from actors.mailbox import Channels, open_mailbox, try_send
from actors.protocol.session import ProgressReceived
from actors.router.actor import DropOwner, RegisterServer
from actors.router.catalog import Catalog, ServerView, ToolEntry
from actors.router.envelope import Envelope, failure, join_text, success, truncate_utf8

if TYPE_CHECKING:
    from supervisor.service import Supervisor

log = logging.getLogger("supervisor.sessions")


def _settled(view: ServerView) -> bool:
    """Done starting: serving, or down (a turn stops waiting for it either way)."""
    return view.available or view.state in DOWN_STATES


class Turn:
    """One agent turn over one immutable catalog epoch."""

    def __init__(self, session: Session, turn_id: str, catalog: Catalog) -> None:
        self.session = session
        self.id = turn_id
        self.catalog = catalog
        self.epoch = catalog.epoch

    @property
    def tools(self) -> tuple[ToolEntry, ...]:
        """Every tool of this turn, available or not, in config order."""
        return self.catalog.listing

    def is_available(self, tool_id: str) -> bool:
        """Whether the tool's server was serving when the turn began."""
        entry = self.catalog.tools.get(tool_id)
        return entry is not None and self.catalog.servers[entry.server].available

    def listing(self) -> list[dict[str, Any]]:
        """The tools as plain data for a model prompt or an API answer."""
        servers = self.catalog.servers
        return [
            {
                "id": entry.id,
                "description": entry.description,
                "input_schema": dict(entry.input_schema),
                "server": entry.server,
                "available": servers[entry.server].available,
            }
            for entry in self.catalog.listing
        ]

    async def call(
        self,
        tool_id: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress: trio.MemorySendChannel[ProgressReceived] | None = None,
    ) -> Envelope:
        """Call a tool of this turn; always returns exactly one envelope.

        If the calling task is cancelled, the server is told (``notifications/cancelled``)
        and the cancellation propagates.
        """
        entry = self.catalog.tools.get(tool_id)
        if entry is None:
            return failure(tool_id, "unknown_tool", f"unknown tool {tool_id}")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            return failure(
                tool_id, "invalid_arguments", f"invalid arguments for {tool_id}: $: must be an object"
            )
        view = self.catalog.servers[entry.server]
        started = trio.current_time()
        reply, answers = trio.open_memory_channel[CallOutcome](1)
        outcome = await _dispatch(view, CallTool(entry.name, arguments, reply, progress), answers)
        duration_ms = round((trio.current_time() - started) * 1000)
        if isinstance(outcome, CallFailed):
            return failure(tool_id, outcome.code, outcome.message)
        result = outcome.result
        if result.is_error:
            text, _ = truncate_utf8(join_text(result.content), view.spec.max_output_bytes)
            return failure(tool_id, "tool_error", text or f"{tool_id} reported an error")
        return success(
            tool_id, result.content, result.structured_content, duration_ms, view.spec.max_output_bytes
        )


async def _dispatch(
    view: ServerView, call: CallTool, answers: trio.MemoryReceiveChannel[CallOutcome]
) -> CallOutcome:
    """Send one call to its connection actor and wait for the one answer."""
    mailbox = view.mailbox
    unavailable = CallFailed("unavailable", f"mcp server {view.name} is unavailable")
    try:
        await mailbox.send(call)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return unavailable
    try:
        return await answers.receive()
    except trio.Cancelled:
        try_send(mailbox, CancelCall(call.reply))
        raise


class Session:
    """One conversation; owns its private connections."""

    def __init__(self, supervisor: Supervisor, nursery: trio.Nursery) -> None:
        self.id = secrets.token_hex(8)
        self._supervisor = supervisor
        self._nursery = nursery
        self._turns = itertools.count(1)
        self._private: dict[str, tuple[trio.MemorySendChannel[ConnectionMessage], trio.Event]] = {}

    async def begin_turn(self) -> Turn:
        """Start a turn: start whatever lazy server it needs, then freeze the catalog.

        Waits for starting servers at most their ``init_timeout``; one that is not up
        by then shows as unavailable in this turn and the turn goes ahead.
        """
        await self._spawn_private_servers()
        cell = self._supervisor.router.cell
        catalog = cell.current.view_for(self.id)
        needed = [v for v in catalog.servers.values() if v.state is State.IDLE and v.spec.enabled]
        for view in needed:
            try:
                await view.mailbox.send(EnsureStarted())
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                continue
        waiting = {v.name for v in needed} | {
            v.name for v in catalog.servers.values() if v.spec.enabled and not _settled(v)
        }
        if waiting:
            limit = max(catalog.servers[name].spec.init_timeout_s for name in waiting)
            with trio.move_on_after(limit):
                await cell.wait_until(
                    lambda c: all(_settled(c.view_for(self.id).servers[name]) for name in waiting)
                )
            catalog = cell.current.view_for(self.id)
        return Turn(self, f"{self.id}-{next(self._turns)}", catalog)

    async def _spawn_private_servers(self) -> None:
        for spec in self._supervisor.config.servers:
            if spec.scope.value == "session" and spec.enabled and spec.name not in self._private:
                await self._spawn_private(spec)

    async def _spawn_private(self, spec: ServerSpec) -> None:
        pair: Channels[ConnectionMessage] = open_mailbox()
        send, receive = pair
        done = trio.Event()
        self._private[spec.name] = (send, done)
        router = self._supervisor.router_mailbox
        await router.send(RegisterServer(spec, send, owner=self.id))
        actor = ConnectionActor(
            spec, self._supervisor.connector, receive, router.clone(), owner=self.id, restart=False
        )

        async def run(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                await actor.run(task_status=task_status)
            finally:
                done.set()

        await self._nursery.start(run)
        await send.send(EnsureStarted())

    async def _close(self, grace_s: float) -> None:
        """Stop private connections (their processes go with them), forget the session."""
        for send, _done in self._private.values():
            try_send(send, Command(Control.STOP))
        with trio.move_on_after(grace_s):
            for _send, done in self._private.values():
                await done.wait()
        self._nursery.cancel_scope.cancel()
        try_send(self._supervisor.router_mailbox, DropOwner(self.id))
