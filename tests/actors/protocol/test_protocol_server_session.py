"""ServerSession back to back with ClientSession, no I/O: every message crosses the
NDJSON wire format (the client's lines decoded to objects as the gateway's fronts
read them, the server's messages encoded and decoded by the client's codec), in both
eras where they apply. Raw objects stand in for what ClientSession never sends."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from actors.protocol.era import Era, ProbeOutcome
from actors.protocol.errors import FramingError, JsonRpcError, ProtocolError
from actors.protocol.messages import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    META_CLIENT_CAPABILITIES,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    ErrorObject,
    ErrorResponse,
    Message,
    Request,
    Response,
)
from actors.protocol.ndjson import LineDecoder, encode_lines
from actors.protocol.server_session import (
    UNEXPECTED,
    CancelRequested,
    ClientAnswered,
    InitializeReceived,
    Replied,
    RequestReceived,
    ServerEvent,
    ServerPhase,
    ServerSession,
    progress_notification,
    wire_error,
)
from actors.protocol.session import (
    ClientSession,
    DiscoverAnswered,
    ErrorReceived,
    Event,
    Initialized,
    Phase,
    ProgressReceived,
    ResponseReceived,
    ServerRequest,
)

CAPS = {"tools": {"listChanged": True}}
INFO = {"name": "gateway", "version": "1"}


class Wire:
    """A ClientSession and a ServerSession joined by NDJSON bytes."""

    def __init__(self, client: ClientSession, server: ServerSession) -> None:
        self.client, self.server = client, server
        self._decoder = LineDecoder()

    def up(self, tag: Any = None) -> list[ServerEvent | None]:
        """What the client queued, read by the server (one event or None per message)."""
        data = encode_lines(self.client.messages_to_send())
        return [self.server.receive(orjson.loads(line), tag) for line in data.splitlines()]

    def down(self, *messages: Message | None) -> list[Event]:
        """The server's messages (None: nothing to send), read by the client."""
        sent = [message for message in messages if message is not None]
        self.client.receive_messages(self._decoder.feed(encode_lines(sent)))
        events = []
        while (event := self.client.next_event()) is not None:
            events.append(event)
        return events


def handshake(version: str = "2025-11-25") -> Wire:
    """A wire whose client and server finished the handshake at ``version``."""
    wire = Wire(ClientSession(protocol_version=version, capabilities={"sampling": {}}), ServerSession())
    wire.client.start_initialize()
    [event] = wire.up()
    assert isinstance(event, InitializeReceived)
    [initialized] = wire.down(wire.server.accept_initialize(event, capabilities=CAPS, server_info=INFO))
    assert isinstance(initialized, Initialized)
    assert wire.up() == [None]  # notifications/initialized: nothing to do
    return wire


def request(wire: Wire, method: str, params: Any = None, **kwargs: Any) -> tuple[Any, RequestReceived]:
    """The client's request, as the server received it."""
    request_id = wire.client.send_request(method, params, **kwargs)
    [event] = wire.up(tag=f"work-{request_id}")
    assert isinstance(event, RequestReceived)
    return request_id, event


# ------------------------------------------------------------------- handshake


@pytest.mark.parametrize(
    ("offered", "answered"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2025-11-25"),
    ],
)
def test_initialize_answers_the_clients_version_when_served_else_the_newest(
    offered: str, answered: str
) -> None:
    wire = Wire(ClientSession(protocol_version=offered, client_info={"name": "host"}), ServerSession())
    wire.client.start_initialize()
    [event] = wire.up()
    assert isinstance(event, InitializeReceived)
    assert (event.version, event.client_info, event.capabilities) == (answered, {"name": "host"}, {})
    assert wire.server.phase is ServerPhase.INITIALIZING and wire.server.version is None
    answer = wire.server.accept_initialize(
        event, capabilities=CAPS, server_info=INFO, instructions="be brief"
    )
    [initialized] = wire.down(answer)
    assert isinstance(initialized, Initialized)
    assert initialized.result.protocol_version == answered
    assert (initialized.result.capabilities, initialized.result.instructions) == (CAPS, "be brief")
    assert wire.server.phase is ServerPhase.READY and wire.server.version == answered
    assert wire.client.phase is Phase.READY


def test_ping_is_answered_in_any_phase_and_other_requests_wait_for_initialize() -> None:
    wire = Wire(ClientSession(), ServerSession())
    ping = wire.client.send_request("ping")
    [replied] = wire.up()
    assert isinstance(replied, Replied)
    assert wire.down(replied.message) == [ResponseReceived(ping, "ping", {})]
    early = wire.server.receive({"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
    assert early == Replied(
        ErrorResponse(7, ErrorObject(INVALID_REQUEST, "tools/list before initialize: send initialize first"))
    )
    assert wire.server.in_flight == 0


def test_initialize_is_refused_without_a_version_twice_and_may_follow_a_failed_one() -> None:
    server = ServerSession()
    bare = server.receive({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": []})
    assert bare == Replied(
        ErrorResponse(1, ErrorObject(INVALID_PARAMS, "initialize: params.protocolVersion must be a string"))
    )
    init = {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    first = server.receive(init)
    assert isinstance(first, InitializeReceived)
    assert server.fail(first, RuntimeError("the servers did not start")) == ErrorResponse(
        2, ErrorObject(INTERNAL_ERROR, UNEXPECTED)
    )
    assert server.phase is ServerPhase.NEW
    second = server.receive(init)
    assert isinstance(second, InitializeReceived)
    server.accept_initialize(second, capabilities={}, server_info=INFO)
    again = server.receive({**init, "id": 3})
    assert again == Replied(
        ErrorResponse(3, ErrorObject(INVALID_REQUEST, "initialize: this session is initialized already"))
    )
    with pytest.raises(RuntimeError, match="no initialize to accept"):
        server.accept_initialize(second, capabilities={}, server_info=INFO)


# -------------------------------------------------------------- requests, errors


def test_a_request_is_answered_with_its_result_or_its_wire_error() -> None:
    wire = handshake()
    listed, event = request(wire, "tools/list", {"cursor": "c"})
    assert (event.method, event.params, event.tag, wire.server.in_flight) == (
        "tools/list",
        {"cursor": "c"},
        f"work-{listed}",
        1,
    )
    assert wire.down(wire.server.respond(event, {"tools": []})) == [
        ResponseReceived(listed, "tools/list", {"tools": []})
    ]
    assert wire.server.in_flight == 0
    called, event = request(wire, "tools/call", {"name": "x"})
    refused = JsonRpcError(INVALID_PARAMS, "unknown tool x", {"code": "unknown_tool"})
    [error] = wire.down(wire.server.fail(event, refused))
    assert error == ErrorReceived(
        called, "tools/call", ErrorObject(INVALID_PARAMS, "unknown tool x", {"code": "unknown_tool"})
    )
    read, event = request(wire, "resources/read", {"uri": "file:///secret"})
    [crashed] = wire.down(wire.server.fail(event, KeyError("/home/me/.token"), unexpected="see the log"))
    assert crashed == ErrorReceived(read, "resources/read", ErrorObject(INTERNAL_ERROR, "see the log"))


@pytest.mark.parametrize(
    ("exc", "error"),
    [
        (
            JsonRpcError(-32002, "no such resource", {"uri": "u"}),
            ErrorObject(-32002, "no such resource", {"uri": "u"}),
        ),
        (FramingError("line is not JSON"), ErrorObject(PARSE_ERROR, "line is not JSON")),
        (ProtocolError("empty JSON-RPC batch"), ErrorObject(INVALID_REQUEST, "empty JSON-RPC batch")),
        (ValueError("a secret in the text"), ErrorObject(INTERNAL_ERROR, UNEXPECTED)),
    ],
)
def test_wire_error_maps_our_errors_and_hides_the_rest(exc: BaseException, error: ErrorObject) -> None:
    assert wire_error(exc) == error


def test_ids_are_matched_as_the_client_wrote_them() -> None:
    server = handshake().server
    number = server.receive({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    text = server.receive({"jsonrpc": "2.0", "id": "1", "method": "tools/list"})
    odd = server.receive({"id": {"an": "object"}, "method": "tools/list"})  # stdio took these, and still does
    assert isinstance(number, RequestReceived) and isinstance(text, RequestReceived)
    assert isinstance(odd, RequestReceived) and server.in_flight == 3
    cancel = server.receive(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "1"}}
    )
    assert cancel == CancelRequested(text) and text.cancelled and not number.cancelled
    assert server.respond(odd, {}) == Response({"an": "object"}, {})  # type: ignore[arg-type]


# ---------------------------------------------------------------- cancellation


def test_a_cancelled_request_is_never_answered_and_other_cancels_are_ignored() -> None:
    wire = handshake()
    called, event = request(wire, "tools/call", {"name": "slow"})
    wire.client.send_cancelled(called, "the user gave up")
    [cancel] = wire.up()
    assert cancel == CancelRequested(event, "the user gave up")
    assert isinstance(cancel, CancelRequested) and cancel.request.tag == f"work-{called}"
    assert wire.server.respond(event, {"content": []}) is None
    assert wire.server.fail(event, JsonRpcError(-32800, "cancelled")) is None
    assert wire.server.in_flight == 0
    wire.client.send_cancelled(called, "again")  # answered (not) already: nothing to cancel
    wire.client.send_notification("notifications/cancelled", {"requestId": 99})
    wire.client.send_notification("notifications/cancelled", {"reason": "no id"})
    wire.client.send_notification("notifications/roots/list_changed")
    assert wire.up() == [None, None, None, None]


def test_a_cancel_names_the_newest_request_of_a_reused_id() -> None:
    server = handshake().server
    older = server.receive({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})
    newer = server.receive({"jsonrpc": "2.0", "id": 5, "method": "prompts/list"})
    assert isinstance(older, RequestReceived) and isinstance(newer, RequestReceived)
    server.receive({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}})
    assert newer.cancelled and not older.cancelled
    assert server.respond(older, {"tools": []}) == Response(5, {"tools": []})
    assert server.in_flight == 1  # the newer one is still tracked until its work ends
    server.end(newer)
    assert server.in_flight == 0


def test_progress_goes_under_the_clients_token() -> None:
    wire = handshake()
    called, event = request(wire, "tools/call", {"name": "long"}, progress=True)
    assert event.progress_token == called
    note = progress_notification(event.progress_token, 1, total=3, message="one of three")
    [progress] = wire.down(note)
    assert progress == ProgressReceived(called, 1.0, 3.0, "one of three")
    assert progress_notification("t", 0.5).params == {"progressToken": "t", "progress": 0.5}


# ---------------------------------------------------------- our requests to it


def test_our_requests_are_numbered_and_their_answers_come_back_with_their_tag() -> None:
    wire = handshake()
    asked = wire.server.send_request("sampling/createMessage", {"messages": []}, tag="waiter-1")
    roots = wire.server.send_request("roots/list", tag="waiter-2")
    assert (asked.id, roots.id, wire.server.waiting) == ("s-1", "s-2", 2)
    first, second = wire.down(asked, roots)
    assert first == ServerRequest("s-1", "sampling/createMessage", {"messages": []})
    assert isinstance(second, ServerRequest) and second.params is None
    wire.client.send_response("s-1", {"role": "assistant", "content": {"type": "text", "text": "hi"}})
    wire.client.send_error("s-2", METHOD_NOT_FOUND, "no roots here")
    answered, refused = wire.up()
    assert answered == ClientAnswered(
        "s-1",
        "sampling/createMessage",
        "waiter-1",
        result={"role": "assistant", "content": {"type": "text", "text": "hi"}},
    )
    assert refused == ClientAnswered(
        "s-2", "roots/list", "waiter-2", error=ErrorObject(METHOD_NOT_FOUND, "no roots here")
    )
    wire.client.send_response("s-1", {})  # answered twice: the first answer stands
    assert wire.up() == [None] and wire.server.waiting == 0


def test_odd_answers_forgotten_requests_and_a_closed_session() -> None:
    server = handshake().server
    hollow = server.send_request("elicitation/create", {}, tag="a")
    vague = server.send_request("elicitation/create", {}, tag="b")
    assert server.receive({"jsonrpc": "2.0", "id": hollow.id, "result": "yes"}) == ClientAnswered(
        "s-1",
        "elicitation/create",
        "a",
        error=ErrorObject(INTERNAL_ERROR, "the client's answer to elicitation/create has no result object"),
    )
    assert server.receive({"jsonrpc": "2.0", "id": vague.id, "error": {"code": "x"}}) == ClientAnswered(
        "s-2",
        "elicitation/create",
        "b",
        error=ErrorObject(INTERNAL_ERROR, "the client refused elicitation/create"),
    )
    forgotten = server.send_request("roots/list")
    server.forget(forgotten.id)
    assert server.receive({"jsonrpc": "2.0", "id": forgotten.id, "result": {}}) is None
    assert server.receive({"jsonrpc": "2.0", "id": 3, "result": {}}) is None  # never one of ours
    waiting = server.send_request("roots/list", tag="c")
    assert server.close("the client closed stdin") == [
        ClientAnswered(
            waiting.id, "roots/list", "c", error=ErrorObject(INTERNAL_ERROR, "the client closed stdin")
        )
    ]
    with pytest.raises(JsonRpcError, match="the client closed stdin") as closed:
        server.send_request("roots/list")
    assert closed.value.code == INTERNAL_ERROR


# ------------------------------------------------------------ per-request era


def per_request(message: dict[str, Any]) -> ServerEvent | None:
    """A per-request-era message, read by a session of its own."""
    return ServerSession(era=Era.PER_REQUEST).receive(message)


def test_the_per_request_era_discovers_and_carries_meta_on_every_request() -> None:
    client = ClientSession(capabilities={"elicitation": {}})
    wire = Wire(client, ServerSession(era=Era.PER_REQUEST))
    client.start_discover()
    [discover] = wire.up()
    assert isinstance(discover, RequestReceived) and discover.capabilities == {"elicitation": {}}
    result = {"supportedVersions": ["2026-07-28"], "capabilities": CAPS, "resultType": "complete"}
    [answered] = wire.down(wire.server.respond(discover, result))
    assert isinstance(answered, DiscoverAnswered) and answered.outcome is ProbeOutcome.PER_REQUEST
    assert answered.result is not None
    client.adopt(answered.result)
    wire.server = ServerSession(era=Era.PER_REQUEST)  # no session: one per exchange
    called = client.send_request("tools/call", {"name": "x"}, progress=True, capabilities={"sampling": {}})
    [event] = wire.up()
    assert isinstance(event, RequestReceived)
    assert (event.capabilities, event.progress_token) == ({"sampling": {}}, called)
    assert event.params["_meta"][META_CLIENT_CAPABILITIES] == {"sampling": {}}
    with pytest.raises(RuntimeError, match="no requests"):
        wire.server.send_request("elicitation/create")


def test_the_per_request_era_refuses_requests_without_its_meta_and_removed_methods() -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", META_CLIENT_CAPABILITIES: {}}
    bare = per_request({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert isinstance(bare, Replied) and isinstance(bare.message, ErrorResponse)
    assert (
        bare.message.error.code == INVALID_PARAMS and "params._meta is missing" in bare.message.error.message
    )
    old = per_request(
        {
            "id": 2,
            "method": "tools/list",
            "params": {"_meta": {**meta, "io.modelcontextprotocol/protocolVersion": "2025-11-25"}},
        }
    )
    assert isinstance(old, Replied) and isinstance(old.message, ErrorResponse)
    assert old.message.error.code == UNSUPPORTED_PROTOCOL_VERSION
    assert old.message.error.data == {"supported": ["2026-07-28"], "requested": "2025-11-25"}
    ping = per_request({"id": 3, "method": "ping", "params": {"_meta": meta}})
    assert ping == Replied(
        ErrorResponse(
            3,
            ErrorObject(
                METHOD_NOT_FOUND,
                "method not found: ping is not part of protocol 2026-07-28 "
                "(see subscriptions/listen and _meta)",
            ),
        )
    )
    init = per_request({"id": 4, "method": "initialize", "params": {"_meta": meta}})
    assert init == Replied(
        ErrorResponse(
            4,
            ErrorObject(METHOD_NOT_FOUND, "method not found: initialize is not part of protocol 2026-07-28"),
        )
    )
    assert per_request({"jsonrpc": "2.0", "method": "notifications/initialized"}) is None
    assert per_request({"jsonrpc": "2.0", "id": "s-1", "result": {}}) is None  # the era asks clients nothing


def test_a_handshake_client_meets_a_per_request_server() -> None:
    wire = Wire(ClientSession(), ServerSession(era=Era.PER_REQUEST))
    wire.client.start_initialize()
    [refused] = wire.up()
    assert isinstance(refused, Replied)
    with pytest.raises(
        ProtocolError,
        match=r"server refused initialize: initialize: params._meta is missing.*\(code -32602\)",
    ):
        wire.down(refused.message)


def test_messages_cross_as_the_client_wrote_them() -> None:
    wire = handshake()
    wire.client.send_request("tools/list")
    [raw] = encode_lines(wire.client.messages_to_send()).splitlines()
    assert orjson.loads(raw) == {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert isinstance(wire.server.receive(orjson.loads(raw)), RequestReceived)
    assert wire.server.send_request("roots/list") == Request("s-1", "roots/list")
