"""The MCP methods of the gateway, over one supervisor ``Session``.

A front (``/mcp`` or ``mcp-supervisor stdio``) parses and frames messages; this class
answers them. One ``GatewayCore`` serves one gateway client: a handshake-era MCP
session (one ``Mcp-Session-Id``, or the stdio peer), or a tenant's new-era clients,
which have no sessions.

The turn rule: every listing (``tools/list``, ``resources/list``,
``resources/templates/list``, ``prompts/list``) begins a new turn of the session, and
calls, reads, prompt gets and completions resolve against the latest turn (one is
begun for a client that calls before it lists). A turn is frozen, so a client calls
what it was last shown, with one exception (``find_by_name``): with ``tool_search`` on,
a ``tools/call`` by the exact name of a tool the session could find activates it, as a
search match would, so a one-shot client (connect, call, hang up) needs no search. The
admin API and the embedding call their turns directly and keep the frozen-turn rule.

Names: tools and prompts are ``<server>_<name>`` (the router's ids), resources keep
their URIs unless several servers publish one (then its qualified form). With
``prefix=False`` (a gateway over exactly one server) the backend's own names are shown.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import orjson
import trio

from actors.connection.client_side import ClientSide
from actors.connection.server_log import SERVER_LOG_LEVELS
from actors.connection.states import Availability
from actors.protocol.notifications import ProgressReceived
from actors.router.catalog import Catalog, ToolEntry
from actors.router.envelope import Envelope
from supervisor.calls.services import answered_by
from supervisor.calls.turns import TOOL_SEARCH, Turn
from supervisor.gateway.outlet import Outlet
from supervisor.gateway.related import with_related
from supervisor.gateway.results import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    JsonRpcError,
    surface_error,
    tool_result,
)
from supervisor.sessions.session import Session

SERVER_NAME = "mcp-supervisor"
LOG_LEVELS = SERVER_LOG_LEVELS


@attrs.define(slots=True, eq=False)
class RequestContext:
    """What the core needs to know about one client request besides its params."""

    outlet: Outlet | None = None
    """Where its related messages go (progress; server requests, when ``client`` is
    None and the session's side has none); None: nowhere."""
    progress_token: Any = None
    """The client's ``_meta.progressToken``, echoed on each progress notification."""
    cancel_key: str | None = None
    """The request's key for ``Supervisor.requests.cancel`` (unique per tenant while in
    flight): the front cancels it on ``notifications/cancelled`` or a hang-up."""
    client: ClientSide | None = None
    """Who answers the server requests this request causes (None: the session's side)."""


Params = Mapping[str, Any]
Result = dict[str, Any]
Handler = Callable[["GatewayCore", Params, RequestContext], Awaitable[Result]]


class GatewayCore:
    """One gateway client's MCP methods over ``session`` (see the module docstring)."""

    def __init__(self, session: Session, *, prefix: bool = True, version: str = "0") -> None:
        self.session = session
        self.prefix = prefix
        self.server_info = {"name": SERVER_NAME, "version": version}
        self.turn: Turn | None = None
        self.log_level = "warning"
        """The least severe backend log message this client is sent (``logging/setLevel``)."""
        self.in_flight = 0
        self.shown: dict[str, bytes] = {}
        """What this client's latest listing of each kind (``tools``, ``resources``,
        ``templates``, ``prompts``) showed, as canonical JSON: the view its list_changed
        notices compare against (``supervisor/gateway/notices.py``)."""
        self.on_activation: Callable[[], None] = lambda: None
        """Called when a call of this client activated tools (a ``tool_search``, or a
        call by exact name: ``find_by_name``)."""
        self.announce: Callable[[], Awaitable[None]] = _no_notices
        """Sends the list_changed notices owed now (the notices task sets it): a search
        that activated tools awaits it before its answer goes out."""
        self.turns = 0
        """Turns begun for this client (one per listing)."""
        self.elicitations: set[str] = set()
        """The ids of the URL elicitations (sign-ins) this client was sent and that are not
        done yet: it hears ``notifications/elicitation/complete`` for each."""

    # ------------------------------------------------------------------ dispatch

    async def handle(self, method: str, params: Params | None, ctx: RequestContext) -> Result:
        """The result of one request; ``JsonRpcError`` for an error answer."""
        handler = _METHODS.get(method)
        if handler is None:
            raise JsonRpcError(METHOD_NOT_FOUND, f"method not found: {method}")
        if params is not None and not isinstance(params, Mapping):
            raise JsonRpcError(INVALID_PARAMS, f"{method}: params must be an object")
        self.in_flight += 1
        try:
            return await handler(self, params or {}, ctx)
        finally:
            self.in_flight -= 1

    def capabilities(self) -> dict[str, Any]:
        """What the gateway declares: tools always; resources, prompts, completions and
        logging only when a server behind it serves them (as last listed)."""
        catalog = self.catalog()
        features = [view.features for view in catalog.servers.values()]
        declared: dict[str, Any] = {"tools": {"listChanged": True}}
        if any(f.resources for f in features):
            declared["resources"] = {"listChanged": True, "subscribe": any(f.subscribe for f in features)}
        if any(f.prompts for f in features):
            declared["prompts"] = {"listChanged": True}
        if any(f.completions for f in features):
            declared["completions"] = {}
        if any(f.logging for f in features):
            declared["logging"] = {}
        return declared

    def catalog(self) -> Catalog:
        """The catalog this client would see now (its latest turn's, else the current)."""
        if self.turn is not None:
            return self.turn.catalog
        return self.session.catalog_now()

    # ------------------------------------------------------------------- turns

    async def new_turn(self) -> Turn:
        """Begin a turn of the session; it is the one later calls resolve against."""
        self.turn = await self.session.begin_turn()
        self.turns += 1
        return self.turn

    async def latest_turn(self) -> Turn:
        """The turn calls resolve against (one is begun if the client never listed)."""
        return self.turn if self.turn is not None else await self.new_turn()

    async def serving_turn(self, turn: Turn, tool_id: str) -> Turn:
        """``turn``, or a new one when the tool's server was down as ``turn`` began and
        is back now. A gateway client has no turns of its own (each listing begins one):
        its next call after a reconnect must not meet the old listing's ``unavailable
        in this turn``, however long ago it listed."""
        if turn.availability(tool_id) is not Availability.UNAVAILABLE:
            return turn
        catalog = self.session.catalog_now()
        entry = catalog.tools.get(tool_id)
        now = None if entry is None else catalog.servers[entry.server].availability
        return turn if now in (None, Availability.UNAVAILABLE) else await self.new_turn()

    def find_by_name(self, turn: Turn, tool_id: str) -> None:
        """Before a ``tools/call``: a tool ``turn`` does not show (search on) but this
        session could find (in its catalog, not denied outright by trust) is activated,
        as a ``tool_search`` match would be. A client that connects, calls a tool it
        knows by name and hangs up never searches: it would otherwise always meet
        ``unknown tool``. The call then goes through trust as any other."""
        if not turn.search_enabled or turn.shows(tool_id):
            return  # nearly every call: nothing to activate, no trust rule to read
        entry = turn.catalog.tools.get(tool_id)
        if entry is None or self.session.denied_outright(entry):
            return  # no such tool, or hidden: the call says unknown tool, as before
        if turn.find(tool_id):
            self.on_activation()

    # ---------------------------------------------------------------- listings

    def listed(self, kind: str, turn: Turn) -> list[dict[str, Any]]:
        """What a listing of ``kind`` shows over ``turn``."""
        return _LISTINGS[kind](self, turn)

    def show(self, kind: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Remember ``items`` as what this client was last shown of ``kind``."""
        self.shown[kind] = view_digest(items)
        return items

    # ------------------------------------------------------------------- names

    def tool_name(self, entry: ToolEntry) -> str:
        """The name a client sees for a tool."""
        return entry.id if self.prefix or entry.id == TOOL_SEARCH else entry.name

    def tool_id(self, turn: Turn, name: str) -> str:
        """The router id of a tool name a client sent (unknown names come back as is)."""
        if self.prefix or name == TOOL_SEARCH:
            return name
        for entry in turn.catalog.tools.values():
            if entry.name == name:
                return entry.id
        return name

    def prompt_name(self, prompt_id: str, name: str) -> str:
        return prompt_id if self.prefix else name

    def prompt_id(self, turn: Turn, name: str) -> str:
        if self.prefix:
            return name
        for prompt in turn.prompts():
            if prompt.name == name:
                return prompt.id
        return name


# ------------------------------------------------------------------------ methods


async def _no_notices() -> None:
    pass


async def _ping(core: GatewayCore, params: Params, ctx: RequestContext) -> Result:
    return {}


def _tool(core: GatewayCore, entry: ToolEntry) -> dict[str, Any]:
    schemas = entry.schemas()
    tool: dict[str, Any] = {
        "name": core.tool_name(entry),
        "description": entry.listed_description or entry.description,
        "inputSchema": schemas["input_schema"],
    }
    if entry.title is not None:
        tool["title"] = entry.title
    if "output_schema" in schemas:
        tool["outputSchema"] = schemas["output_schema"]
    if entry.annotations is not None:
        tool["annotations"] = dict(entry.annotations)
    return tool


def _tools_of(core: GatewayCore, turn: Turn) -> list[dict[str, Any]]:
    """The turn's tools, without those a trust rule denies outright (pattern ``*``)."""
    denied = core.session.denied_outright
    return [_tool(core, entry) for entry in turn.tools if not denied(entry)]


async def _tools_call(core: GatewayCore, params: Params, ctx: RequestContext) -> Result:
    name = _string(params, "name", "tools/call: ")
    arguments = params.get("arguments")
    turn = await core.latest_turn()
    tool_id = core.tool_id(turn, name)
    if turn.availability(tool_id) is Availability.UNAVAILABLE:  # rare: no await otherwise
        turn = await core.serving_turn(turn, tool_id)
    core.find_by_name(turn, tool_id)
    activated = len(core.session.activated)
    envelope = await _with_related(
        ctx,
        lambda progress: turn.call(tool_id, arguments, progress=progress, request_id=ctx.cancel_key),
    )
    if len(core.session.activated) != activated:
        core.on_activation()
        await core.announce()  # before the answer: a client reading one pipe sees the change first
    if envelope.error is not None and envelope.error.elicitation_id is not None:
        core.elicitations.add(envelope.error.elicitation_id)  # its person's sign-in: -32042 below
    return tool_result(envelope)


async def _with_related(
    ctx: RequestContext,
    call: Callable[[trio.MemorySendChannel[ProgressReceived] | None], Awaitable[Envelope]],
) -> Envelope:
    """``related.with_related`` for one client request."""
    return await with_related(ctx.outlet, ctx.progress_token, ctx.client, call)


def _resources_of(core: GatewayCore, turn: Turn) -> list[dict[str, Any]]:
    return [{**entry.raw, "uri": entry.uri} for entry in turn.resources()]


def _templates_of(core: GatewayCore, turn: Turn) -> list[dict[str, Any]]:
    return [{**entry.raw, "uriTemplate": entry.uri_template} for entry in turn.resource_templates()]


async def _resources_read(core: GatewayCore, params: Params, ctx: RequestContext) -> Result:
    uri = _string(params, "uri", "resources/read: ")
    turn = await core.latest_turn()
    envelope = await _with_related(ctx, lambda _: turn.read_resource(uri, request_id=ctx.cancel_key))
    return _surface_result(envelope, "contents")


def _surface_result(envelope: Envelope, key: str) -> dict[str, Any]:
    """A read's, prompt get's or completion's result: the server's as it came, or
    (cut to its bound) rebuilt from the envelope's items."""
    if not envelope.ok:
        raise surface_error(envelope)
    if isinstance(envelope.structured, Mapping):
        return dict(envelope.structured)
    if key == "contents":
        return {"contents": [item.get("resource", item) for item in envelope.content]}
    return {key: [{"role": "user", "content": dict(item)} for item in envelope.content]}


def _prompts_of(core: GatewayCore, turn: Turn) -> list[dict[str, Any]]:
    return [{**prompt.raw, "name": core.prompt_name(prompt.id, prompt.name)} for prompt in turn.prompts()]


async def _prompts_get(core: GatewayCore, params: Params, ctx: RequestContext) -> Result:
    name = _string(params, "name", "prompts/get: ")
    turn = await core.latest_turn()
    arguments, prompt_id = params.get("arguments"), core.prompt_id(turn, name)
    envelope = await _with_related(
        ctx, lambda _: turn.get_prompt(prompt_id, arguments, request_id=ctx.cancel_key)
    )
    return _surface_result(envelope, "messages")


async def _complete(core: GatewayCore, params: Params, ctx: RequestContext) -> Result:
    ref, argument = params.get("ref"), params.get("argument")
    if not isinstance(ref, Mapping) or not isinstance(argument, Mapping):
        why = "completion/complete: params.ref and params.argument must be objects"
        raise JsonRpcError(INVALID_PARAMS, why)
    turn = await core.latest_turn()
    if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
        ref = {**ref, "name": core.prompt_id(turn, ref["name"])}
    context = params.get("context")
    with answered_by(ctx.client):
        envelope = await turn.complete(ref, argument, context if isinstance(context, Mapping) else None)
    if not envelope.ok:
        raise surface_error(envelope)
    if isinstance(envelope.structured, Mapping):
        return dict(envelope.structured)
    return {"completion": {"values": envelope.text.splitlines()[:100]}}


async def _subscribe(core: GatewayCore, params: Params, ctx: RequestContext) -> Result:
    return await _subscription(core, params, subscribe=True)


async def _unsubscribe(core: GatewayCore, params: Params, ctx: RequestContext) -> Result:
    return await _subscription(core, params, subscribe=False)


async def _subscription(core: GatewayCore, params: Mapping[str, Any], *, subscribe: bool) -> dict[str, Any]:
    uri = _string(params, "uri", "")
    session = core.session
    envelope = await (session.subscribe(uri) if subscribe else session.unsubscribe(uri))
    if not envelope.ok:
        raise surface_error(envelope)
    return {}


async def _set_level(core: GatewayCore, params: Params, ctx: RequestContext) -> Result:
    level = params.get("level")
    if level not in LOG_LEVELS:
        raise JsonRpcError(INVALID_PARAMS, f"logging/setLevel: level must be one of {', '.join(LOG_LEVELS)}")
    core.log_level = str(level)
    await core.session.want_logs(core.log_level)  # its servers are asked for it if more verbose
    return {}


def view_digest(items: list[dict[str, Any]]) -> bytes:
    """A listing as canonical JSON (keys sorted; 1, 1.0 and true stay different)."""
    return orjson.dumps(items, option=orjson.OPT_SORT_KEYS, default=plain_json)


def plain_json(value: Any) -> Any:
    """orjson's fallback: frozen mappings (the catalog's) as dicts."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"not JSON: {type(value).__name__}")


_LISTINGS: dict[str, Callable[[GatewayCore, Turn], list[dict[str, Any]]]] = {
    "tools": _tools_of,
    "resources": _resources_of,
    "templates": _templates_of,
    "prompts": _prompts_of,
}


def _string(params: Params, key: str, where: str) -> str:
    """``params[key]``, which must be a string (else -32602 naming it)."""
    value = params.get(key)
    if not isinstance(value, str):
        raise JsonRpcError(INVALID_PARAMS, f"{where}params.{key} must be a string")
    return value


def _listing(kind: str, key: str) -> Handler:
    """The handler of one listing method: a new turn, and what it shows of ``kind``
    (remembered as this client's view, for its list_changed notices)."""

    async def list_kind(core: GatewayCore, params: Params, ctx: RequestContext) -> Result:
        turn = await core.new_turn()
        return {key: core.show(kind, _LISTINGS[kind](core, turn))}

    return list_kind


_METHODS: dict[str, Handler] = {
    "ping": _ping,
    "tools/list": _listing("tools", "tools"),
    "tools/call": _tools_call,
    "resources/list": _listing("resources", "resources"),
    "resources/templates/list": _listing("templates", "resourceTemplates"),
    "resources/read": _resources_read,
    "resources/subscribe": _subscribe,
    "resources/unsubscribe": _unsubscribe,
    "prompts/list": _listing("prompts", "prompts"),
    "prompts/get": _prompts_get,
    "completion/complete": _complete,
    "logging/setLevel": _set_level,
}
METHODS = frozenset(_METHODS)
"""The requests the core answers (besides the era's own: ``initialize``,
``server/discover``, ``subscriptions/listen``, which the fronts handle)."""
