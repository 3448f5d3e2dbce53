"""ClientSession back to back with a scripted server through the NDJSON codec, no I/O.

``Peer`` is the server's end of the pipe, built from the codec alone: what the
session queued is encoded as lines and decoded on the server's side; what the test
wants the server to say is encoded and decoded the same way before the session
takes it, so every message crosses the wire format as it would on a pipe. Every
test drives the session through its public surface (``messages_to_send``,
``receive_messages``, ``next_event``) exactly as the connection actor does.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from actors.protocol.era import Era
from actors.protocol.errors import ProtocolError, VersionMismatch
from actors.protocol.listen import ACKNOWLEDGED, SUBSCRIPTION_ID
from actors.protocol.messages import (
    LATEST_PROTOCOL_VERSION,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    METHOD_NOT_FOUND,
    SUPPORTED_PROTOCOL_VERSIONS,
    CallResult,
    ErrorObject,
    ErrorResponse,
    InitializeResult,
    Message,
    Notification,
    Request,
    Response,
)
from actors.protocol.ndjson import LineDecoder, encode_lines
from actors.protocol.pages import parse_tools_page
from actors.protocol.payloads import structure_call_result
from actors.protocol.session import (
    Cancelled,
    ClientSession,
    DiscoverAnswered,
    ErrorReceived,
    Event,
    Initialized,
    ListenAcknowledged,
    LogMessage,
    Phase,
    ProgressReceived,
    PromptsListChanged,
    ResourceChanged,
    ResourcesListChanged,
    ResponseReceived,
    ServerNotification,
    ServerRequest,
    StrayResponse,
    ToolsListChanged,
    method_not_found,
)

DISCOVERED: dict[str, Any] = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
INIT_RESULT: dict[str, Any] = {
    "protocolVersion": LATEST_PROTOCOL_VERSION,
    "capabilities": {"tools": {"listChanged": True}},
    "serverInfo": {"name": "scripted", "version": "1.0"},
}


class Peer:
    """The server end of a ClientSession, without I/O."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session
        self._decoder = LineDecoder()  # the server's end of the pipe
        self._client_decoder = LineDecoder()  # the session's end

    def read(self) -> list[Message]:
        """Everything the session has queued for the wire, decoded."""
        data = encode_lines(self.session.messages_to_send())
        messages = self._decoder.feed(data)
        assert self._decoder.pending_bytes == 0, "the session wrote a partial line"
        return messages

    def say(self, *messages: Message) -> list[Event]:
        """Send messages to the session; return the events they produced."""
        self.session.receive_messages(self._client_decoder.feed(encode_lines(messages)))
        return drain(self.session)


def drain(session: ClientSession) -> list[Event]:
    events: list[Event] = []
    while (event := session.next_event()) is not None:
        events.append(event)
    return events


def ready(**session_kwargs: Any) -> tuple[ClientSession, Peer]:
    """A session whose handshake is done and whose outbox is empty."""
    session = ClientSession(**session_kwargs)
    peer = Peer(session)
    request_id = session.start_initialize()
    peer.read()
    peer.say(Response(request_id, INIT_RESULT))
    assert peer.read() == [Notification("notifications/initialized")]
    assert session.phase is Phase.READY
    return session, peer


# --------------------------------------------------------------------- handshake


def test_initialize_offers_the_latest_version_with_client_info_and_capabilities() -> None:
    assert LATEST_PROTOCOL_VERSION == "2025-11-25"
    session = ClientSession(
        client_info={"name": "host", "version": "9.9"},
        capabilities={"roots": {"listChanged": True}},
    )
    peer = Peer(session)
    request_id = session.start_initialize()
    assert session.phase is Phase.INITIALIZING
    assert peer.read() == [
        Request(
            request_id,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"roots": {"listChanged": True}},
                "clientInfo": {"name": "host", "version": "9.9"},
            },
        )
    ]
    assert session.pending_requests == 1


def test_default_client_info_names_the_supervisor() -> None:
    session = ClientSession()
    session.start_initialize()
    [request] = Peer(session).read()
    assert isinstance(request, Request)
    assert isinstance(request.params, dict)
    assert request.params["clientInfo"]["name"] == "trio-mcp-supervisor"
    assert isinstance(request.params["clientInfo"]["version"], str)
    assert request.params["capabilities"] == {}


def test_initialize_cannot_be_sent_twice() -> None:
    session = ClientSession()
    assert session.phase is Phase.NEW
    assert session.negotiated is None
    session.start_initialize()
    with pytest.raises(RuntimeError, match="already sent"):
        session.start_initialize()


def test_supported_versions() -> None:
    assert SUPPORTED_PROTOCOL_VERSIONS == ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_server_may_answer_any_supported_version(version: str) -> None:
    session = ClientSession()
    peer = Peer(session)
    request_id = session.start_initialize()
    peer.read()
    answer = {**INIT_RESULT, "protocolVersion": version, "instructions": "use tools wisely"}
    expected = InitializeResult(
        protocol_version=version,
        capabilities={"tools": {"listChanged": True}},
        server_info={"name": "scripted", "version": "1.0"},
        instructions="use tools wisely",
    )
    assert peer.say(Response(request_id, answer)) == [Initialized(expected)]
    assert session.phase is Phase.READY
    assert session.negotiated == expected
    assert session.pending_requests == 0


def test_initialized_notification_is_queued_right_after_the_answer() -> None:
    session = ClientSession()
    peer = Peer(session)
    request_id = session.start_initialize()
    peer.read()
    assert session.messages_to_send() == []  # nothing before the server answers
    peer.say(Response(request_id, INIT_RESULT))
    assert peer.read() == [Notification("notifications/initialized")]


def test_unknown_version_is_a_version_mismatch() -> None:
    session = ClientSession()
    peer = Peer(session)
    request_id = session.start_initialize()
    peer.read()
    with pytest.raises(VersionMismatch, match="2099-01-01"):
        peer.say(Response(request_id, {**INIT_RESULT, "protocolVersion": "2099-01-01"}))
    assert session.phase is Phase.CLOSED
    assert session.negotiated is None
    assert session.messages_to_send() == []  # no notifications/initialized for a failed handshake


def test_initialize_answered_with_the_per_request_era_speaks_that_era() -> None:
    """A server that answers ``initialize`` with 2026-07-28 (it used to be a version
    mismatch, and the server was declared broken) is spoken to in that era: every
    later request carries its ``_meta``, and no ``notifications/initialized`` is sent
    (the era has none)."""
    session = ClientSession(capabilities={"roots": {}})
    peer = Peer(session)
    request_id = session.start_initialize()
    peer.read()
    [event] = peer.say(Response(request_id, {**INIT_RESULT, "protocolVersion": "2026-07-28"}))
    assert isinstance(event, Initialized)
    assert (session.phase, session.version, session.era) == (Phase.READY, "2026-07-28", Era.PER_REQUEST)
    assert session.capabilities_of_server == INIT_RESULT["capabilities"]
    assert peer.read() == []  # no notifications/initialized
    session.send_request("tools/list")
    [listed] = peer.read()
    assert isinstance(listed, Request) and isinstance(listed.params, dict)
    meta = listed.params["_meta"]
    assert meta[META_PROTOCOL_VERSION] == "2026-07-28"
    assert meta[META_CLIENT_CAPABILITIES] == {"roots": {}}


def test_server_discover_asked_again_once_ready_is_answered_like_any_request() -> None:
    """Only the probe's answer settles the era; ``server/discover`` asked again in
    the per-request era (after a new subscription, ``listener.py``) is a plain answer."""
    session = ClientSession()
    peer = Peer(session)
    probe = session.start_discover()
    peer.read()
    [answered] = peer.say(Response(probe, DISCOVERED))
    assert isinstance(answered, DiscoverAnswered) and answered.result is not None
    session.adopt(answered.result)
    again = session.send_request("server/discover")
    assert peer.say(Response(again, DISCOVERED)) == [ResponseReceived(again, "server/discover", DISCOVERED)]


def test_refused_initialize_is_a_protocol_error() -> None:
    session = ClientSession()
    peer = Peer(session)
    request_id = session.start_initialize()
    with pytest.raises(ProtocolError, match=r"refused initialize: go away \(code -32600\)"):
        peer.say(ErrorResponse(request_id, ErrorObject(-32600, "go away")))
    assert session.phase is Phase.CLOSED


@pytest.mark.parametrize(
    "result",
    [{}, {"protocolVersion": 20251125}, {**INIT_RESULT, "capabilities": "all of them"}],
)
def test_malformed_initialize_result_is_a_protocol_error(result: dict[str, Any]) -> None:
    session = ClientSession()
    request_id = session.start_initialize()
    with pytest.raises(ProtocolError, match="initialize result"):
        Peer(session).say(Response(request_id, result))
    assert session.phase is Phase.CLOSED


def test_requests_before_ready_are_refused_except_ping() -> None:
    session = ClientSession()
    peer = Peer(session)
    with pytest.raises(RuntimeError, match="before the handshake"):
        session.send_request("tools/list")
    ping_new = session.send_request("ping")
    init = session.start_initialize()
    with pytest.raises(RuntimeError, match="before the handshake"):
        session.send_request("tools/call", {"name": "x"})
    ping_initializing = session.send_request("ping")
    sent = peer.read()
    assert [(m.id, m.method) for m in sent if isinstance(m, Request)] == [
        (ping_new, "ping"),
        (init, "initialize"),
        (ping_initializing, "ping"),
    ]
    assert len(sent) == 3  # nothing of the refused requests reached the wire


def test_ping_answered_during_the_handshake_resolves_normally() -> None:
    session = ClientSession()
    peer = Peer(session)
    ping = session.send_request("ping")
    init = session.start_initialize()
    peer.read()
    events = peer.say(Response(ping, {}), Response(init, INIT_RESULT))
    assert events[0] == ResponseReceived(ping, "ping", {})
    assert isinstance(events[1], Initialized)


# ------------------------------------------------------------------- correlation


def test_out_of_order_responses_find_their_requests() -> None:
    session, peer = ready()
    first = session.send_request("tools/list")
    second = session.send_request("tools/call", {"name": "slow", "arguments": {}})
    third = session.send_request("resources/list", {"cursor": "c"})
    assert len({first, second, third}) == 3
    assert peer.read() == [
        Request(first, "tools/list"),
        Request(second, "tools/call", {"name": "slow", "arguments": {}}),
        Request(third, "resources/list", {"cursor": "c"}),
    ]
    assert session.pending_requests == 3
    events = peer.say(
        Response(third, {"resources": []}),
        Response(first, {"tools": []}),
        ErrorResponse(second, ErrorObject(-32000, "tool crashed", {"why": "bug"})),
    )
    assert events == [
        ResponseReceived(third, "resources/list", {"resources": []}),
        ResponseReceived(first, "tools/list", {"tools": []}),
        ErrorReceived(second, "tools/call", ErrorObject(-32000, "tool crashed", {"why": "bug"})),
    ]
    assert session.pending_requests == 0


def test_error_received_carries_the_method() -> None:
    session, peer = ready()
    request_id = session.send_request("prompts/get", {"name": "p"})
    [event] = peer.say(ErrorResponse(request_id, ErrorObject(-32602, "unknown prompt")))
    assert isinstance(event, ErrorReceived)
    assert event.method == "prompts/get"
    assert event.error.message == "unknown prompt"


def test_response_to_an_unknown_id_is_a_stray() -> None:
    session, peer = ready()
    request_id = session.send_request("tools/list")
    assert peer.say(Response(999, {})) == [StrayResponse(999)]
    assert peer.say(Response(str(request_id), {})) == [StrayResponse(str(request_id))]
    assert peer.say(ErrorResponse("nope", ErrorObject(-1, "x"))) == [StrayResponse("nope")]
    # The real request is still waiting, and the session is unharmed.
    assert session.pending_requests == 1
    assert session.phase is Phase.READY
    assert peer.say(Response(request_id, {"tools": []})) == [
        ResponseReceived(request_id, "tools/list", {"tools": []})
    ]


def test_second_answer_to_the_same_request_is_a_stray() -> None:
    session, peer = ready()
    request_id = session.send_request("tools/list")
    peer.say(Response(request_id, {"tools": []}))
    assert peer.say(Response(request_id, {"tools": []})) == [StrayResponse(request_id)]


def test_error_response_with_null_id_closes_the_session() -> None:
    session, peer = ready()
    session.send_request("tools/list")
    with pytest.raises(ProtocolError, match="unreadable request: Parse error"):
        peer.say(ErrorResponse(None, ErrorObject(-32700, "Parse error")))
    assert session.phase is Phase.CLOSED


# -------------------------------------------------------------- server to client


def test_server_ping_is_answered_automatically() -> None:
    session, peer = ready()
    assert peer.say(Request("srv-1", "ping")) == []
    assert session.wants_to_send
    assert encode_lines(session.messages_to_send()) == b'{"jsonrpc":"2.0","id":"srv-1","result":{}}\n'
    assert peer.say(Request(41, "ping", {})) == []
    assert encode_lines(session.messages_to_send()) == b'{"jsonrpc":"2.0","id":41,"result":{}}\n'
    assert not session.wants_to_send


def test_server_ping_is_answered_even_mid_handshake() -> None:
    session = ClientSession()
    peer = Peer(session)
    session.start_initialize()
    peer.read()
    assert peer.say(Request(0, "ping")) == []
    assert peer.read() == [Response(0, {})]


def test_tools_list_changed() -> None:
    _, peer = ready()
    assert peer.say(Notification("notifications/tools/list_changed")) == [ToolsListChanged()]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (
            {"progressToken": 3, "progress": 5, "total": 10, "message": "half way"},
            ProgressReceived(3, 5.0, 10.0, "half way"),
        ),
        ({"progressToken": "tok", "progress": 0.25}, ProgressReceived("tok", 0.25, None, None)),
        # Ill-typed optional members are dropped; the progress itself still counts.
        (
            {"progressToken": 1, "progress": 1, "total": "10", "message": 5},
            ProgressReceived(1, 1.0, None, None),
        ),
        ({"progressToken": 1, "progress": 1, "total": True}, ProgressReceived(1, 1.0, None, None)),
    ],
)
def test_progress_notification(params: dict[str, Any], expected: ProgressReceived) -> None:
    _, peer = ready()
    [event] = peer.say(Notification("notifications/progress", params))
    assert event == expected
    assert type(event.token) is type(expected.token)  # True == 1, "1" != 1: be exact


@pytest.mark.parametrize(
    "params",
    [
        None,
        [3, 0.5],
        {"progress": 1},
        {"progressToken": 1},
        {"progressToken": 1, "progress": "1"},
        {"progressToken": 1.5, "progress": 1},
        {"progressToken": None, "progress": 1},
        # true == 1 to Python: it must not be taken for request id 1.
        {"progressToken": True, "progress": 1},
        {"progressToken": 1, "progress": True},
    ],
)
def test_malformed_progress_is_a_plain_server_notification(params: Any) -> None:
    _, peer = ready()
    assert peer.say(Notification("notifications/progress", params)) == [
        ServerNotification("notifications/progress", params)
    ]


@pytest.mark.parametrize(
    ("notification", "expected"),
    [
        (Notification("notifications/resources/list_changed"), ResourcesListChanged()),
        (Notification("notifications/prompts/list_changed"), PromptsListChanged()),
        (Notification("notifications/resources/updated", {"uri": "file:///a"}), ResourceChanged("file:///a")),
        (
            Notification("notifications/message", {"level": "error", "logger": "db", "data": {"x": 1}}),
            LogMessage("error", "db", {"x": 1}),
        ),
        (
            Notification("notifications/message", {"level": "info", "logger": 5}),
            LogMessage("info", None, None),
        ),
        # Malformed: passed through as they came.
        (
            Notification("notifications/resources/updated", {"uri": 7}),
            ServerNotification("notifications/resources/updated", {"uri": 7}),
        ),
        (
            Notification("notifications/message", {"data": "no level"}),
            ServerNotification("notifications/message", {"data": "no level"}),
        ),
        (
            Notification("notifications/message", ["info"]),
            ServerNotification("notifications/message", ["info"]),
        ),
    ],
)
def test_surface_notifications_become_typed_events(notification: Notification, expected: Event) -> None:
    _, peer = ready()
    assert peer.say(notification) == [expected]


def test_other_notifications_pass_through() -> None:
    _, peer = ready()
    params = {"name": "x"}
    assert peer.say(Notification("notifications/other", params)) == [
        ServerNotification("notifications/other", params)
    ]


@pytest.mark.parametrize(
    ("notification", "expected"),
    [
        (Notification("notifications/cancelled", {"requestId": 3, "reason": "bye"}), Cancelled(3)),
        (
            Notification("notifications/cancelled", {"requestId": True}),
            ServerNotification("notifications/cancelled", {"requestId": True}),
        ),
        (
            Notification(ACKNOWLEDGED, {"notifications": {}, "_meta": {SUBSCRIPTION_ID: "listen-1"}}),
            ListenAcknowledged("listen-1"),
        ),
        (Notification(ACKNOWLEDGED, {"notifications": {}}), ListenAcknowledged(None)),
        (
            Notification(ACKNOWLEDGED, {"notifications": {"resourceSubscriptions": ["a://x", 3, "b://y"]}}),
            ListenAcknowledged(None, ("a://x", "b://y")),
        ),
        (
            Notification(ACKNOWLEDGED, {"notifications": {"resourceSubscriptions": "a://x"}}),
            ListenAcknowledged(None),
        ),
        (
            Notification("notifications/tools/list_changed", {"_meta": {SUBSCRIPTION_ID: 7}}),
            ToolsListChanged(7),
        ),
        (
            Notification("notifications/prompts/list_changed", {"_meta": {SUBSCRIPTION_ID: [7]}}),
            PromptsListChanged(None),
        ),
    ],
)
def test_listen_notifications_name_their_subscription(notification: Notification, expected: Event) -> None:
    """The 2026-07-28 era's listen frames carry their request's id in ``_meta``
    (``io.modelcontextprotocol/subscriptionId``); a server's cancellation names ours."""
    _, peer = ready()
    assert peer.say(notification) == [expected]


def test_server_request_and_method_not_found() -> None:
    session, peer = ready()
    params = {"messages": [], "maxTokens": 10}
    [event] = peer.say(Request("s-7", "sampling/createMessage", params))
    assert event == ServerRequest("s-7", "sampling/createMessage", params)
    assert METHOD_NOT_FOUND == -32601
    method_not_found(session, event)
    [answer] = peer.read()
    assert isinstance(answer, ErrorResponse)
    assert answer.id == "s-7"
    assert answer.error.code == -32601
    assert "sampling/createMessage" in answer.error.message


def test_answering_a_server_request() -> None:
    session, peer = ready()
    [event] = peer.say(Request(5, "roots/list"))
    assert isinstance(event, ServerRequest)
    session.send_response(event.id, {"roots": []})
    assert peer.read() == [Response(5, {"roots": []})]


# ------------------------------------------------------- progress and cancelling


def test_progress_token_is_the_request_id_and_keeps_existing_meta() -> None:
    session, peer = ready()
    params = {"name": "long", "arguments": {"n": 1}, "_meta": {"traceId": "t-1"}}
    request_id = session.send_request("tools/call", params, progress=True)
    assert peer.read() == [
        Request(
            request_id,
            "tools/call",
            {"name": "long", "arguments": {"n": 1}, "_meta": {"traceId": "t-1", "progressToken": request_id}},
        )
    ]
    assert params == {"name": "long", "arguments": {"n": 1}, "_meta": {"traceId": "t-1"}}  # not mutated
    [event] = peer.say(Notification("notifications/progress", {"progressToken": request_id, "progress": 1}))
    assert event == ProgressReceived(request_id, 1.0)


def test_progress_token_replaces_a_stale_one() -> None:
    # Progress is matched by request id; a token left in the caller's _meta would orphan it.
    session, peer = ready()
    request_id = session.send_request("tools/call", {"_meta": {"progressToken": "stale"}}, progress=True)
    assert peer.read() == [Request(request_id, "tools/call", {"_meta": {"progressToken": request_id}})]


def test_progress_token_without_params() -> None:
    session, peer = ready()
    request_id = session.send_request("resources/list", progress=True)
    assert peer.read() == [Request(request_id, "resources/list", {"_meta": {"progressToken": request_id}})]


def test_no_meta_without_progress() -> None:
    session, peer = ready()
    request_id = session.send_request("tools/call", {"name": "quick"})
    assert peer.read() == [Request(request_id, "tools/call", {"name": "quick"})]


def test_send_cancelled_notifies_and_turns_the_late_answer_into_a_stray() -> None:
    session, peer = ready()
    request_id = session.send_request("tools/call", {"name": "slow"})
    peer.read()
    session.send_cancelled(request_id, "timed out after 30 s")
    assert peer.read() == [
        Notification("notifications/cancelled", {"requestId": request_id, "reason": "timed out after 30 s"})
    ]
    assert session.pending_requests == 0
    assert peer.say(Response(request_id, {"content": []})) == [StrayResponse(request_id)]


def test_forget_is_silent_but_also_strays_the_late_answer() -> None:
    session, peer = ready()
    request_id = session.send_request("tools/list")
    peer.read()
    session.forget(request_id)
    assert session.messages_to_send() == []
    assert peer.say(Response(request_id, {"tools": []})) == [StrayResponse(request_id)]


# ---------------------------------------------------------------------- closing


def test_after_a_protocol_error_the_session_is_closed() -> None:
    session, _ = ready()
    with pytest.raises(ProtocolError, match="unreadable request"):
        session.receive_message(ErrorResponse(None, ErrorObject(-32700, "Parse error")))
    assert session.phase is Phase.CLOSED
    with pytest.raises(ProtocolError, match="closed"):
        session.receive_message(Notification("notifications/tools/list_changed"))
    assert drain(session) == []
    with pytest.raises(RuntimeError):
        session.send_request("tools/list")


def test_events_keep_arrival_order_across_partial_reads() -> None:
    session, _ = ready()
    request_id = session.send_request("tools/list")
    messages: list[Message] = [
        Notification("notifications/tools/list_changed"),
        Response(request_id, {"tools": []}),
        Notification("notifications/message", {"level": "info"}),
    ]
    wire = encode_lines(messages)
    decoder = LineDecoder()
    for i in range(0, len(wire), 5):
        session.receive_messages(decoder.feed(wire[i : i + 5]))
    assert drain(session) == [
        ToolsListChanged(),
        ResponseReceived(request_id, "tools/list", {"tools": []}),
        LogMessage("info", None, None),
    ]


def test_structure_call_result() -> None:
    result = structure_call_result(
        {
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "image", "data": "AA==", "mimeType": "image/png"},
            ],
            "structuredContent": {"answer": 42},
            "isError": True,
        }
    )
    assert result == CallResult(
        content=(
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "AA==", "mimeType": "image/png"},
        ),
        structured_content={"answer": 42},
        is_error=True,
    )


def test_call_result_defaults() -> None:
    assert structure_call_result({}) == CallResult(content=(), structured_content=None, is_error=False)


@pytest.mark.parametrize("value", [False, None, 1, "true", "yes", [True], {}])
def test_is_error_only_when_exactly_true(value: Any) -> None:
    assert structure_call_result({"content": [], "isError": value}).is_error is False


@pytest.mark.parametrize(
    "content", ["hi", {"type": "text", "text": "hi"}, [1], ["hi"], [{"type": "text"}, None]]
)
def test_malformed_call_content_is_a_protocol_error(content: Any) -> None:
    with pytest.raises(ProtocolError, match="content must be a list of objects"):
        structure_call_result({"content": content})


def test_a_whole_conversation_back_to_back() -> None:
    """Handshake, two pages of tools, a call with progress, a relist: the actor's day."""
    session = ClientSession()
    peer = Peer(session)
    init = session.start_initialize()
    [request] = peer.read()
    assert isinstance(request, Request) and request.method == "initialize"
    assert isinstance(peer.say(Response(init, INIT_RESULT))[0], Initialized)

    first = session.send_request("tools/list")
    assert peer.read() == [Notification("notifications/initialized"), Request(first, "tools/list")]
    [page1] = peer.say(Response(first, {"tools": [{"name": "a"}], "nextCursor": "2"}))
    assert isinstance(page1, ResponseReceived)
    cursor = parse_tools_page(page1.result).next_cursor
    second = session.send_request("tools/list", {"cursor": cursor})
    assert peer.read() == [Request(second, "tools/list", {"cursor": "2"})]
    [page2] = peer.say(Response(second, {"tools": [{"name": "b"}]}))
    assert isinstance(page2, ResponseReceived)
    assert [t.name for t in parse_tools_page(page2.result).tools] == ["b"]

    call = session.send_request("tools/call", {"name": "b", "arguments": {}}, progress=True)
    [call_request] = peer.read()
    assert isinstance(call_request, Request) and isinstance(call_request.params, dict)
    token = call_request.params["_meta"]["progressToken"]
    events = peer.say(
        Notification("notifications/progress", {"progressToken": token, "progress": 1, "total": 2}),
        Request("srv", "ping"),
        Notification("notifications/tools/list_changed"),
        Response(call, {"content": [{"type": "text", "text": "done"}]}),
    )
    assert events[0] == ProgressReceived(call, 1.0, 2.0)
    assert events[1] == ToolsListChanged()
    assert isinstance(events[2], ResponseReceived)
    assert structure_call_result(events[2].result).content == ({"type": "text", "text": "done"},)
    assert orjson.loads(encode_lines(session.messages_to_send())) == {
        "jsonrpc": "2.0",
        "id": "srv",
        "result": {},
    }
    assert session.pending_requests == 0


def test_messages_before_the_one_that_breaks_the_protocol_are_not_lost() -> None:
    session, _ = ready()
    request_id = session.send_request("tools/call", {"name": "x", "arguments": {}})
    good = Response(request_id, {"content": []})
    with pytest.raises(ProtocolError):
        session.receive_messages([good, ErrorResponse(None, ErrorObject(-32700, "Parse error"))])
    assert drain(session) == [ResponseReceived(request_id, "tools/call", {"content": []})]
