"""What goes into a connection actor's mailbox, what it answers, what it publishes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

import attrs
import trio

from actors.connection.client_side import ClientSide
from actors.connection.vocabulary import Control as Control  # an operator command's kind
from actors.connection.vocabulary import Phase, State
from actors.protocol.era import Era
from actors.protocol.messages import (
    CallResult,
    ErrorObject,
    Prompt,
    Resource,
    ResourceTemplate,
    ServerFeatures,
    Tool,
)
from actors.protocol.session import ProgressReceived
from actors.spec import ServerSpec

# ------------------------------------------------------------------------ answers


@attrs.frozen(slots=True)
class CallSucceeded:
    """The server answered ``tools/call`` (``result.is_error`` may still be true)."""

    result: CallResult


@attrs.frozen(slots=True)
class CallFailed:
    """The call ended without a server result; ``code`` is an envelope error code
    (``retry_after_ms``: set with ``busy``; ``rpc_error``: the JSON-RPC error the server
    answered with, for ``server_error``, so a gateway can pass some on as protocol errors)."""

    code: str
    message: str
    retry_after_ms: int | None = None
    rpc_error: ErrorObject | None = None


def unavailable_text(server: str, why: str = "") -> str:
    """``mcp server <name> is unavailable`` (the README's words, which hosts match on),
    then ``why`` when it is known: the one place the text is made."""
    text = f"mcp server {server} is unavailable"
    return f"{text} {why}" if why else text


def unavailable(server: str, why: str = "") -> CallFailed:
    """The answer to a request a server cannot take (down, stopping, gone)."""
    return CallFailed("unavailable", unavailable_text(server, why))


@attrs.frozen(slots=True)
class Answered:
    """The server answered a request of the surface other than ``tools/call``
    (``resources/read``, ``prompts/get``, ``completion/complete``,
    ``resources/subscribe`` …): its result as sent."""

    result: Mapping[str, Any]


@attrs.frozen(slots=True)
class Redefined:
    """A ``tools/call`` was not sent: the server's current definition of the tool (as
    the connection last listed it) is not the one the call was decided on
    (``CallTool.definition``). The caller decides again on ``tool`` and may send anew."""

    tool: Tool


CallOutcome: TypeAlias = CallSucceeded | CallFailed | Answered | Redefined


# ------------------------------------------------------------------------ mailbox


@attrs.frozen(slots=True, eq=False)
class CallTool:
    """Call one tool, or send another request of the surface through the same
    in-flight table (timeouts, cancellation, multi round-trip results). The reply
    channel identifies the call for CancelCall.

    For ``method`` ``"tools/call"`` the params are ``{"name": tool, "arguments":
    arguments}`` and a result is ``CallSucceeded``. For any other method (``resources/read``,
    ``prompts/get``, ``completion/complete``) ``arguments`` are the request's params as
    they are sent, ``tool`` only names the request in messages (the prompt's name, the
    resource's URI), and a result is ``Answered``.
    """

    tool: str
    arguments: Mapping[str, Any]
    reply: trio.MemorySendChannel[CallOutcome]
    progress: trio.MemorySendChannel[ProgressReceived] | None = None
    timeouts: tuple[float, float] | None = None
    """``(call_timeout_s, max_call_timeout_s)`` as the caller's turn saw the server (a
    config reload applies from the next turn); None: the connection's own."""
    method: str = "tools/call"
    client: ClientSide | None = None
    """The calling session's side: who answers the server's requests tied to this call
    (sampling, elicitation, roots, input-required rounds) and, in the per-request era,
    the capabilities its requests declare. None: the supervisor-level default."""
    definition: str = ""
    """The fingerprint (``actors/tool_definitions.py``) of the tool's definition that the
    call was decided on: a ``tools/call`` is sent only while the server's current one is
    that one, else answered ``Redefined``. ``""``: no check (the surface's requests)."""


@attrs.frozen(slots=True, eq=False)
class Subscribe:
    """``resources/subscribe`` for one subscriber (reference-counted by the actor: the
    first subscriber of a URI sends it, and it is sent again after a reconnect). Each
    ``notifications/resources/updated`` for ``uri`` goes to ``updates`` (a slow reader
    loses updates, never the connection). Answered on ``reply``: ``Answered`` or
    ``CallFailed``."""

    uri: str
    subscriber: str
    updates: trio.MemorySendChannel[ResourceUpdated]
    reply: trio.MemorySendChannel[CallOutcome]


@attrs.frozen(slots=True, eq=False)
class Unsubscribe:
    """Drop one subscriber of ``uri``; the last one sends ``resources/unsubscribe``.
    ``reply`` (optional: a session that ends does not wait) gets ``Answered``."""

    uri: str
    subscriber: str
    reply: trio.MemorySendChannel[CallOutcome] | None = None


@attrs.frozen(slots=True, eq=False)
class CancelCall:
    """The caller gave up: tell the server (``notifications/cancelled``), answer ``cancelled``."""

    reply: trio.MemorySendChannel[CallOutcome]
    reason: str = "cancelled by the client"


@attrs.frozen(slots=True)
class EnsureStarted:
    """Someone needs this server's tools: leave ``idle`` now."""


@attrs.frozen(slots=True)
class Command:
    """An operator command for the actor."""

    control: Control


@attrs.frozen(slots=True)
class Retune:
    """A config reload changed settings of this server that need no new connection
    (timeouts, trust, the reconnect schedule): use ``spec`` from now on. Calls in
    flight keep their deadlines; the connection is untouched."""

    spec: ServerSpec


@attrs.frozen(slots=True)
class WantLogs:
    """The clients of this connection's sessions now want its server's log messages at
    ``level`` and above (None: none): a server of the handshake era is asked again
    (``logging/setLevel``) when that changes what it is asked for (``log_levels.py``)."""

    level: str | None


@attrs.frozen(slots=True)
class ConnectionStatus:
    """What only the actor knows: the server's stderr tail and the work in flight."""

    stderr_tail: tuple[str, ...]
    in_flight: int
    transport: str | None


@attrs.frozen(slots=True, eq=False)
class GetStatus:
    """Ask the actor for its ConnectionStatus."""

    reply: trio.MemorySendChannel[ConnectionStatus]


ConnectionMessage: TypeAlias = (
    CallTool | CancelCall | EnsureStarted | Command | GetStatus | Retune | Subscribe | Unsubscribe | WantLogs
)


# ---------------------------------------------------------------------- published


@attrs.frozen(slots=True)
class ServerListed:
    """A complete listing read from the server: its tools (all pages) and, for what
    ``features`` declares, its resources, resource templates and prompts (all pages).
    After a change notification of one kind only that kind is read again; the others
    are carried over from the last listing, so every ``ServerListed`` is whole."""

    server: str
    generation: int
    tools: tuple[Tool, ...]
    problems: tuple[str, ...] = ()
    owner: str | None = None
    resources: tuple[Resource, ...] = ()
    templates: tuple[ResourceTemplate, ...] = ()
    prompts: tuple[Prompt, ...] = ()
    features: ServerFeatures = attrs.field(factory=ServerFeatures)


@attrs.frozen(slots=True)
class ResourceUpdated:
    """``notifications/resources/updated`` from ``server`` for a subscribed ``uri`` (as
    the server names it), sent to each subscriber's ``updates`` channel."""

    server: str
    uri: str


@attrs.frozen(slots=True)
class StateChanged:
    """The connection moved; ``next_retry_at`` is on Trio's clock, set in backoff."""

    server: str
    state: State
    previous: State
    at: float
    attempt: int = 0
    reason: str | None = None
    next_retry_at: float | None = None
    owner: str | None = None
    # "needs_auth": in backoff with no retry scheduled until someone authorizes again;
    # "crashed": parked in backoff after its actor crashed past the restart intensity.
    condition: str | None = None
    # resolve … list: "starting" (calls wait), "reconnecting" (calls are refused) or
    # "relisting" (calls flow on the old list); see states.py.
    phase: Phase | None = None
    # The protocol revision the last handshake settled on ("2026-07-28": the
    # per-request era; up to "2025-11-25": the initialize handshake); None before.
    protocol_version: str | None = None
    # The era the actor remembers for its next attempt (found by a handshake, or None
    # once a remembered one failed): the supervisor keeps it in its store, and hands it
    # back to the server's next actor (``ConnectionActor(known_era=…)``) at next start.
    era: Era | None = None


Published: TypeAlias = ServerListed | StateChanged
