"""A turn for an asyncio host: ``supervisor.calls.turns.Turn`` with its requests awaitable
from asyncio.

What reads the turn's frozen view (``tools``, ``listing``, ``search``, the surface's
listings) is plain Python over an immutable catalog epoch: the host calls it directly.
What talks to a server (``call``, ``read_resource``, ``get_prompt``, ``complete``) runs
as a Trio task of the guest run (``supervisor/aio/guest.py``), and is awaited from
asyncio: its envelope, or its exception (``RequestInFlight``), comes back as the Trio
API gives it, and cancelling the asyncio task cancels the request (the server is sent
``notifications/cancelled``; the audit row says ``cancelled``).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping
from typing import Any

import trio

from actors.connection.states import Availability
from actors.protocol.notifications import ProgressReceived
from actors.router.catalog import ToolEntry
from actors.router.envelope import Envelope
from actors.router.surface_entries import PromptEntry, ResourceEntry, TemplateEntry
from supervisor.aio.guest import Guest
from supervisor.calls import turns

Progress = Callable[[ProgressReceived], object]
"""Called on the host's loop with each progress notification of a call, in order."""
PROGRESS_BUFFER = 256  # notifications the forwarder may lag behind; beyond, they are dropped


class Turn:
    """One agent turn over one frozen catalog epoch (``await session.begin_turn()``); see
    ``docs/turns.md`` for what is frozen and what a call may name."""

    def __init__(self, guest: Guest, turn: turns.Turn) -> None:
        self._guest = guest
        self._turn = turn

    @property
    def id(self) -> str:
        return self._turn.id

    @property
    def epoch(self) -> int:
        """The catalog epoch the turn shows."""
        return self._turn.epoch

    @property
    def search_enabled(self) -> bool:
        return self._turn.search_enabled

    # ------------------------------------------------------------ the frozen view

    @property
    def tools(self) -> tuple[ToolEntry, ...]:
        """What the model is shown (with search on: pinned, activated, found, ``tool_search``)."""
        return self._turn.tools

    def shows(self, tool_id: str) -> bool:
        """Whether a call may name the tool in this turn."""
        return self._turn.shows(tool_id)

    def availability(self, tool_id: str) -> Availability | None:
        """What the turn may expect of the tool's server until it ends (None: no such tool)."""
        return self._turn.availability(tool_id)

    def is_available(self, tool_id: str) -> bool:
        return self._turn.is_available(tool_id)

    def listing(self) -> list[dict[str, Any]]:
        """``tools`` as plain data for a prompt (the Trio ``Turn.listing``)."""
        return self._turn.listing()

    def search(self, query: str) -> dict[str, Any]:
        """``tool_search``: the matches, with full descriptions, become callable."""
        return self._turn.search(query)

    def resources(self) -> tuple[ResourceEntry, ...]:
        return self._turn.resources()

    def resource_templates(self) -> tuple[TemplateEntry, ...]:
        return self._turn.resource_templates()

    def prompts(self) -> tuple[PromptEntry, ...]:
        return self._turn.prompts()

    def resource_listing(self) -> list[dict[str, Any]]:
        return self._turn.resource_listing()

    def template_listing(self) -> list[dict[str, Any]]:
        return self._turn.template_listing()

    def prompt_listing(self) -> list[dict[str, Any]]:
        return self._turn.prompt_listing()

    # ------------------------------------------------------------------ requests

    async def call(
        self,
        tool_id: str,
        arguments: Any = None,
        *,
        progress: Progress | None = None,
        request_id: str | None = None,
    ) -> Envelope:
        """Call a tool of this turn: exactly one envelope (the Trio ``Turn.call``).

        ``progress``: a plain callable, called on the loop with each of the server's
        progress notifications for this call (in the context this call was made in).
        ``request_id``: cancellable by id (``Supervisor.cancel_request``); one in flight
        already raises RequestInFlight. Cancelling the awaiting task cancels the call at
        the server."""
        if progress is None:
            return await self._guest.run(self._turn.call, tool_id, arguments, request_id=request_id)
        if not callable(progress):
            raise TypeError(f"progress=: expected a callable (a ProgressReceived each); got {progress!r}")
        tell = _on_the_loop(self._guest, progress)
        return await self._guest.run(_call_with_progress, self._turn, tool_id, arguments, request_id, tell)

    async def read_resource(
        self, uri: str, server: str | None = None, *, request_id: str | None = None
    ) -> Envelope:
        """Read a resource as the turn shows it (or qualified, or ``server``'s own URI)."""
        return await self._guest.run(self._turn.read_resource, uri, server, request_id=request_id)

    async def get_prompt(
        self, prompt_id: str, arguments: Mapping[str, str] | None = None, *, request_id: str | None = None
    ) -> Envelope:
        """Get a prompt by its id, with its arguments (strings)."""
        return await self._guest.run(self._turn.get_prompt, prompt_id, arguments, request_id=request_id)

    async def complete(
        self, ref: Mapping[str, Any], argument: Mapping[str, Any], context: Mapping[str, Any] | None = None
    ) -> Envelope:
        """Completions of one argument of a prompt or a resource template."""
        return await self._guest.run(self._turn.complete, ref, argument, context)


def _on_the_loop(guest: Guest, progress: Progress) -> Progress:
    """``progress`` scheduled on the loop, in the caller's context, out of the Trio run."""
    context = contextvars.copy_context()

    def tell(event: ProgressReceived) -> None:
        guest.loop.call_soon(progress, event, context=context)

    return tell


async def _call_with_progress(
    turn: turns.Turn, tool_id: str, arguments: Any, request_id: str | None, tell: Progress
) -> Envelope:
    """(Trio side) The call, its progress forwarded to the host while it runs."""
    send, receive = trio.open_memory_channel[ProgressReceived](PROGRESS_BUFFER)

    async def forward() -> None:
        async for event in receive:
            tell(event)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(forward)
        with send:
            return await turn.call(tool_id, arguments, progress=send, request_id=request_id)
