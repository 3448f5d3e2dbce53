"""A Turn: one agent turn over one immutable catalog epoch, and the path of a call.

A turn sees neither the supervisor nor the session class: it is given what it uses
(``supervisor.calls.services``): ``CallServices``, the supervisor's parts a call
needs, and its session as a ``TurnSession``, the session's side of a call (who calls,
what was activated, the trust decision). So this module imports nothing of
``supervisor.sessions.session`` or ``supervisor.service``, which build it.

A call goes: refuse arguments nested deeper than ``MAX_ARGUMENT_DEPTH`` → resolve
the id in the turn's catalog → validate the arguments against the tool's inputSchema
(no server contact when they are wrong) → trust decision (allow / ask / deny; a deny
ends it) → rate limits (``rate_limits.py``: over one, ``rate_limited`` at once) → asking
the host when trust said ask → the connection actor, which sends it only on the
definition it was decided on (else the turn decides again on the server's current
one: ``_redefined``) → one result envelope → one audit row.

A turn is frozen, availability included (docs/turns.md): it calls only the tools it
shows, and a server unavailable when it began stays so until it ends.

Every attempt ends in exactly one envelope and one audit row, refusals included
(``unknown_tool``, ``invalid_arguments``, ``unavailable``, ``denied``), and so do calls of
``tool_search`` through ``call`` (server ``""``, decision ``none``). ``Turn.search``
itself is a lookup, not a call, and leaves no row.

The rest of the surface (resources, templates, prompts, completions) comes from
``TurnSurface`` (``supervisor/calls/turn_surface.py``), the audit rows from ``TurnAudit``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import attrs
import orjson
import trio

from actors.connection.messages import Answered, CallFailed, CallOutcome, CallTool, Redefined
from actors.connection.states import Availability
from actors.log_events import get_logger
from actors.protocol.session import ProgressReceived
from actors.router.catalog import Catalog, ServerView, ToolEntry, make_entry
from actors.router.depth import MAX_ARGUMENT_DEPTH, nested_deeper_than
from actors.router.envelope import Envelope, failure, join_text, success, truncate_utf8
from actors.router.trust import Action, Decision
from actors.router.validation import validate_arguments
from actors.tool_definitions import changed_parts, part_hashes
from supervisor.calls.dispatch import dispatch as _dispatch
from supervisor.calls.dispatch import unavailable_in_turn
from supervisor.calls.in_flight import LiveCall
from supervisor.calls.requests import InFlightRequest
from supervisor.calls.services import CallServices, TurnSession, calling_client
from supervisor.calls.span_content import show_call, show_result
from supervisor.calls.turn_audit import Went
from supervisor.calls.turn_surface import TurnSurface
from supervisor.runtime.sign_ins import needs_auth
from supervisor.runtime.tracing import TRACING
from supervisor.store.records import arguments_digest, audited_name, bounded_hash, bytes_hash

log = get_logger("supervisor.turns")

TOOL_SEARCH = "tool_search"
_SEARCH_DESCRIPTION = (
    "Find tools by what they do (each match with its full description). Matching tools "
    "become callable for the rest of the session."
)
TOOL_SEARCH_ENTRY = ToolEntry(
    TOOL_SEARCH,
    "",
    TOOL_SEARCH,
    _SEARCH_DESCRIPTION,
    {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "what the tool should do"}},
        "required": ["query"],
    },
    listed_description=_SEARCH_DESCRIPTION,
)


class Turn(TurnSurface):
    """One agent turn; everything in it comes from ``catalog`` (its epoch)."""

    def __init__(
        self, session: TurnSession, calls: CallServices, turn_id: str, catalog: Catalog, search_enabled: bool
    ) -> None:
        self.session = session
        self._calls = calls
        self.id = turn_id
        self.catalog = catalog
        self.epoch = catalog.epoch
        self.search_enabled = search_enabled
        # Search on, it shows the pinned and activated before it (numbered below), its matches.
        self._activated_before = len(session.activated)
        self._found: dict[str, None] = {}

    @property
    def tools(self) -> tuple[ToolEntry, ...]:
        """What the model is shown: every tool, or (with search on) the pinned ones,
        those activated before the turn began and those its searches returned, plus
        ``tool_search``."""
        if not self.search_enabled:
            return self.catalog.listing
        tools, session = self.catalog.tools, self.session
        before = itertools.islice(session.activated, self._activated_before)
        chosen = dict.fromkeys((*before, *self._found))
        return (*(tools[i] for i in chosen if i in tools), TOOL_SEARCH_ENTRY)

    def shows(self, tool_id: str) -> bool:
        """Whether a call may name the tool in this turn (``tool_search`` aside)."""
        if tool_id not in self.catalog.tools or not self.search_enabled:
            return tool_id in self.catalog.tools
        before = self.session.activated.get(tool_id, self._activated_before) < self._activated_before
        return before or tool_id in self._found

    def is_available(self, tool_id: str) -> bool:
        """Whether the tool's server was serving when the turn began."""
        return self.availability(tool_id) is Availability.AVAILABLE

    def availability(self, tool_id: str) -> Availability | None:
        """What this turn may expect of the tool's server until it ends (None: no such
        tool): available, on demand (a call starts it), or unavailable."""
        entry = self.catalog.tools.get(tool_id)
        return None if entry is None else self.catalog.servers[entry.server].availability

    def listing(self) -> list[dict[str, Any]]:
        """``tools`` as plain data for a prompt or an API answer (descriptions of
        untrusted servers cut to their listing length; schemas as the server sent them,
        ``output_schema`` only for a tool that declares one)."""
        servers = self.catalog.servers
        listing = []
        for entry in self.tools:
            availability = servers[entry.server].availability if entry.server else Availability.AVAILABLE
            item: dict[str, Any] = {
                "id": entry.id,
                "description": entry.listed_description or entry.description,
                **entry.schemas(),
                "server": entry.server,
                "available": availability is Availability.AVAILABLE,
                "availability": availability.value,
            }
            if entry.schema is not None and entry.schema.problem:
                item["problem"] = entry.schema.problem  # listed, but calls are refused
            listing.append(item)
        return listing

    def search(self, query: str) -> dict[str, Any]:
        """``tool_search``: BM25 over id + full description in this turn's catalog; the
        matches (with full descriptions and their schemas) become callable in this turn
        and are activated for the rest of the session."""
        settings = self._calls.tool_search
        tools = self.catalog.tools
        matches = self.catalog.search_index.search(query, settings.max_matches, allow=tools.__contains__)
        found = []
        for match in matches:
            entry = tools[match.id]
            view = self.catalog.servers[entry.server]
            self._activate(entry.id)
            found.append(
                {
                    "id": entry.id,
                    "description": entry.description,
                    **entry.schemas(),
                    "server_state": view.state.value,
                    "availability": view.availability.value,
                    "stale": view.cached_only,
                }
            )
        return {"matches": found}

    def find(self, tool_id: str) -> bool:
        """Make one tool callable in this turn and activate it for the session, as a
        search match would: for the MCP gateway, whose one-shot clients call a tool by
        its exact name without searching first. False when there is nothing to do
        (search off, no such tool, or the turn shows it already)."""
        if not self.search_enabled or tool_id not in self.catalog.tools or self.shows(tool_id):
            return False
        self._activate(tool_id)
        return True

    def _activate(self, tool_id: str) -> None:
        self.session.activate(tool_id)
        self._found[tool_id] = None

    async def call(
        self,
        tool_id: str,
        arguments: Any = None,
        *,
        progress: trio.MemorySendChannel[ProgressReceived] | None = None,
        request_id: str | None = None,
        raw_request: bytes | None = None,
    ) -> Envelope:
        """Call a tool of this turn.

        Args:
          tool_id: a tool this turn shows (``tools``, or a match of its searches), or
            ``tool_search``.
          arguments: the tool's arguments, a JSON object (None: ``{}``).
          progress: where the server's progress notifications for this call go.
          request_id: lets the call be cancelled by id (``Supervisor.requests.cancel``),
            which ends it ``cancelled``; unique among the tenant's calls in flight.
          raw_request: the request as it arrived (the admin API passes the HTTP body):
            the audit row of arguments nested too deep to hash as JSON hashes it.

        Returns:
          Exactly one envelope, whatever ``tool_id`` and ``arguments`` are: the result,
          or an error code (``unknown_tool``: the turn does not show it,
          ``invalid_arguments``, ``unavailable``: also a server down when the turn
          began, ``denied``, ``rate_limited``, ``timeout``, ``cancelled``, ``server_error``,
          ``tool_error``).

        Raises:
          RequestInFlight: ``request_id`` is in flight already for this tenant (nothing is
            sent, no row is left).

        Error handling:
          What goes wrong on the way (refused arguments, a denial, a server that is
          down, dies, times out or breaks the protocol) is in the envelope, never
          raised. If the calling task is cancelled, the server is told
          (``notifications/cancelled``), the audit row says ``cancelled``, and the
          cancellation propagates; a bug of ours leaves a row that says ``error`` and
          propagates too.

        Resource handling:
          In flight, the call holds a place in its server's in-flight table (bounded by
          the server's call timeout) and a reply channel, which the session reuses for
          a later call; its ``request_id`` is freed when it ends. It leaves exactly one
          audit row: a call that may wait (an approval, the server) first journals an
          ``interrupted`` row, in case the supervisor dies meanwhile; its end journals
          the real one before the envelope is returned (durable against a kill of the
          process from then on), and the folder process puts it into the store.
        """
        tracing = TRACING.active
        if request_id is None and tracing is None:  # nearly every call: no context manager
            return await self._call(tool_id, arguments, progress, None, raw_request)
        if tracing is None:
            with self._in_flight(request_id, tool_id) as request:
                return await self._call(tool_id, arguments, progress, request, raw_request)
        shown = self._calls.tracing  # what the config opts in to (supervisor/calls/span_content.py)
        with (
            tracing.call_span("tools/call", tool_id, self.epoch),
            self._in_flight(request_id, tool_id) as request,
        ):
            limit = show_call(tracing, shown, self.session, self.catalog, tool_id, arguments)
            envelope = await self._call(tool_id, arguments, progress, request, raw_request)
            if shown.results:
                show_result(tracing, envelope, limit)
            return envelope

    async def _call(
        self,
        tool_id: str,
        arguments: Any,
        progress: trio.MemorySendChannel[ProgressReceived] | None,
        request: InFlightRequest | None,
        raw_request: bytes | None,
    ) -> Envelope:
        if arguments is None:
            arguments = {}
        if nested_deeper_than(arguments, MAX_ARGUMENT_DEPTH):
            digest = bytes_hash(raw_request) if raw_request is not None else bounded_hash(arguments)
            why = f"invalid arguments for {tool_id}: $: nested deeper than {MAX_ARGUMENT_DEPTH} levels"
            refused = failure(tool_id, "invalid_arguments", why)
            known = self.catalog.tools.get(tool_id)
            server = known.server if known is not None else ""
            return await self._audited(audited_name(tool_id), server, digest, "none", refused)
        if tool_id == TOOL_SEARCH:
            searched = self._call_search(arguments)
            return await self._audited(TOOL_SEARCH, "", arguments_digest(arguments), "none", searched)
        entry = self.catalog.tools.get(tool_id)
        if entry is None or not self.shows(tool_id):
            hint = (
                f": this turn does not show it; call {TOOL_SEARCH} to find it" if self.search_enabled else ""
            )
            unknown = failure(tool_id, "unknown_tool", f"unknown tool {tool_id}{hint}")
            return await self._audited(
                audited_name(tool_id), "", arguments_digest(arguments), "none", unknown
            )
        if not isinstance(arguments, Mapping):
            why = f"invalid arguments for {tool_id}: $: must be an object"
            refused = failure(tool_id, "invalid_arguments", why)
            return await self._audited(entry.id, entry.server, arguments_digest(arguments), "none", refused)
        digest = arguments_digest(arguments)
        assert entry.schema is not None
        problem = validate_arguments(tool_id, entry.schema, arguments)
        if problem is not None:
            code = "server_error" if entry.schema.problem else "invalid_arguments"
            refused = failure(tool_id, code, problem)
            return await self._audited(entry.id, entry.server, digest, "none", refused)
        view = self.catalog.servers[entry.server]
        if (signing := self.session.sign_in_needed(view)) is not None:  # theirs alone: nobody waits
            return await self._audited(entry.id, entry.server, digest, "none", needs_auth(tool_id, signing))
        if view.availability is Availability.UNAVAILABLE:  # for the whole turn: nobody is asked
            down = failure(tool_id, "unavailable", unavailable_in_turn(view.name, view.state.value))
            return await self._audited(entry.id, entry.server, digest, "none", down)
        first = self.session.first_word(entry, arguments, trusted=view.spec.trusted)
        if first.rule is not None and (tracing := TRACING.active) is not None:
            tracing.decided(first.rule)  # which trust rule decided, on our span
        if first.action is Action.DENY:
            verdict = await self.session.authorize(entry, arguments, first)  # no checkpoint
            denied = failure(tool_id, "denied", verdict.reason)
            return await self._audited(entry.id, entry.server, digest, verdict.decided, denied)
        limited = self._calls.limits.refusal(self.session.tenant, entry.server, entry.name)
        if limited is not None:  # over a rate limit: answered at once, nobody asked
            over = failure(tool_id, limited.code, limited.message, limited.retry_after_ms)
            return await self._audited(entry.id, entry.server, digest, first.action.value, over)
        # From here the call may wait (an approval, the server): a row that says so first.
        go = self._go  # _journaled calls it with the arguments that follow it
        return await self._journaled(
            entry.id, entry.server, digest, first.action.value, go, entry, arguments, first, progress, request
        )

    async def _go(
        self,
        live: LiveCall,
        entry: ToolEntry,
        arguments: Mapping[str, Any],
        first: Decision,
        progress: trio.MemorySendChannel[ProgressReceived] | None,
        request: InFlightRequest | None,
    ) -> Went:
        """Authorize and dispatch an allowed or asked call."""
        tool_id = entry.id
        verdict = await self.session.authorize(entry, arguments, first)
        if verdict.action is not Action.ALLOW:
            return verdict.decided, failure(tool_id, "denied", verdict.reason), 0.0
        if (request is not None and request.cancelled) or live.cancelled_by is not None:
            cancelled = failure(tool_id, "cancelled", f"tools/call {entry.name} was cancelled")
            return verdict.decided, cancelled, 0.0
        view = self.catalog.servers[entry.server]
        started = trio.current_time()
        replies = self.session.replies
        # A reply channel whose one answer was received is empty and known to no actor
        # any more: the session keeps it for its next call. Not when the call can be
        # cancelled by id, whose late CancelCall could name it while it serves another.
        if replies and request is None:
            reply, answers = replies.pop()
        else:
            reply, answers = trio.open_memory_channel[CallOutcome](1)
        if request is not None:
            request.mailbox, request.reply = view.mailbox, reply
        live.mailbox, live.reply = view.mailbox, reply  # from now on cancelled at its server
        timeouts = (view.spec.call_timeout_s, view.spec.max_call_timeout_s)  # as the turn saw them
        client = calling_client(self.session)
        call = CallTool(
            entry.name, arguments, reply, progress, timeouts, client=client, definition=entry.fingerprint
        )
        outcome = await _dispatch(view, call, answers)
        decided = verdict.decided
        if type(outcome) is Redefined:  # rare: the server's tool is not the one decided on
            decided, outcome = await self._redefined(
                entry, arguments, call, answers, outcome, decided, request
            )
        if request is None and len(replies) < _KEPT_REPLIES:
            replies.append((reply, answers))
        seconds = trio.current_time() - started
        return decided, _envelope(tool_id, view, outcome, round(seconds * 1000)), seconds

    async def _redefined(
        self,
        entry: ToolEntry,
        arguments: Mapping[str, Any],
        call: CallTool,
        answers: trio.MemoryReceiveChannel[CallOutcome],
        redefined: Redefined,
        decided: str,
        request: InFlightRequest | None,
    ) -> tuple[str, CallOutcome]:
        """The server's definition of the tool is not the one the call was decided on (a
        lazy server this call started, a relist since the turn's view): decide again on
        the current one as a turn that showed it would (its schema, trust and pin, so an
        ask says ``changed: …``), and send the call on it. (The audit's decision, the
        outcome.)"""
        view = self.catalog.servers[entry.server]
        for _ in range(_MAX_REDEFINITIONS):
            current = make_entry(entry.id, view.spec, redefined.tool, self.catalog.max_description_length)
            assert current.schema is not None
            problem = validate_arguments(entry.id, current.schema, arguments)
            if problem is not None:
                return decided, _refused_by_new_schema(problem, entry, current)
            verdict = await self.session.authorize(
                current, arguments, self.session.first_word(current, arguments, trusted=view.spec.trusted)
            )
            decided = "ask" if "ask" in (decided, verdict.decided) else verdict.decided
            if verdict.action is not Action.ALLOW:
                return decided, CallFailed("denied", verdict.reason)
            if request is not None and request.cancelled:
                return decided, CallFailed("cancelled", f"tools/call {entry.name} was cancelled")
            outcome = await _dispatch(view, attrs.evolve(call, definition=current.fingerprint), answers)
            if type(outcome) is not Redefined:
                return decided, outcome
            redefined = outcome
        times = f"{_MAX_REDEFINITIONS} times while it was being called"
        return decided, CallFailed(
            "server_error", f"mcp server {view.name} changed tool {entry.name} {times}"
        )

    def _call_search(self, arguments: Any) -> Envelope:
        query = arguments.get("query") if isinstance(arguments, Mapping) else None
        if not isinstance(query, str):
            return failure(
                TOOL_SEARCH,
                "invalid_arguments",
                f"invalid arguments for {TOOL_SEARCH}: $.query: must be a string",
            )
        result = self.search(query)
        text = orjson.dumps(result).decode()
        return success(TOOL_SEARCH, [{"type": "text", "text": text}], result, 0, 1 << 20)


_KEPT_REPLIES = 64
_MAX_REDEFINITIONS = 3
"""How often one call is decided again on a server's new definition of its tool before
it gives up (a server that keeps changing the tool under it)."""


def _refused_by_new_schema(problem: str, seen: ToolEntry, current: ToolEntry) -> CallFailed:
    """Arguments that fit the tool as the turn saw it, not as its server has it now."""
    assert current.schema is not None
    what = changed_parts(
        part_hashes(seen.description, seen.input_schema),
        part_hashes(current.description, current.input_schema),
    )
    code = "server_error" if current.schema.problem else "invalid_arguments"
    why = (
        f"its server changed the tool's {what} since this turn's view of it; a new turn shows the current one"
    )
    return CallFailed(code, f"{problem} ({why})")


def _envelope(tool_id: str, view: ServerView, outcome: CallOutcome, duration_ms: int) -> Envelope:
    if isinstance(outcome, CallFailed):
        return failure(tool_id, outcome.code, outcome.message, outcome.retry_after_ms, outcome.rpc_error)
    if isinstance(outcome, (Answered, Redefined)):  # a tools/call is never answered so here
        return failure(tool_id, "server_error", f"{tool_id}: the answer is not a tools/call result")
    result = outcome.result
    if result.is_error:
        text, _ = truncate_utf8(join_text(result.content), view.spec.max_output_bytes)
        return failure(tool_id, "tool_error", text or f"{tool_id} reported an error")
    return success(
        tool_id, result.content, result.structured_content, duration_ms, view.spec.max_output_bytes
    )
