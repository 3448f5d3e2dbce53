"""The per-request era (2026-07-28) in the sans-I/O core: ``server/discover``, the
``_meta`` every request carries, the fall back to ``initialize``, and the negotiation
tables of ``era.py``. Back to back through the NDJSON codec, no I/O."""

from __future__ import annotations

from typing import Any

import pytest

from actors.protocol.era import (
    Era,
    Opening,
    ProbeOutcome,
    Setting,
    Verdict,
    after_probe,
    opening,
    probe_wait,
    remembered_after,
)
from actors.protocol.errors import ProtocolError
from actors.protocol.http_framing import header_value, request_headers
from actors.protocol.messages import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    METHOD_NOT_FOUND,
    ErrorObject,
    ErrorResponse,
    Notification,
    Request,
    Response,
)
from actors.protocol.session import (
    Adopted,
    ClientSession,
    DiscoverAnswered,
    Initialized,
    Phase,
    ResponseReceived,
    StrayResponse,
)
from tests.actors.protocol.test_protocol_session import INIT_RESULT, Peer

DISCOVER_RESULT: dict[str, Any] = {
    "supportedVersions": ["2025-11-25", "2026-07-28"],
    "capabilities": {"tools": {"listChanged": True}},
    "resultType": "complete",
    "ttlMs": 0,
    "cacheScope": "public",
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern", "version": "2.3"}},
}
INFO = {"name": "host", "version": "9.9"}
CAPS = {"sampling": {}}
META = {
    META_PROTOCOL_VERSION: "2026-07-28",
    META_CLIENT_INFO: INFO,
    META_CLIENT_CAPABILITIES: CAPS,
}


def probing() -> tuple[ClientSession, Peer, Request]:
    session = ClientSession(client_info=INFO, capabilities=CAPS)
    peer = Peer(session)
    session.start_discover()
    [probe] = peer.read()
    assert isinstance(probe, Request)
    return session, peer, probe


def test_discover_carries_the_era_meta_and_no_initialize() -> None:
    session, _, probe = probing()
    assert probe.method == "server/discover"
    assert probe.params == {"_meta": META}
    assert session.phase is Phase.DISCOVERING
    with pytest.raises(RuntimeError, match="before the handshake"):
        session.send_request("tools/list")


def test_adopted_every_request_carries_meta_and_keeps_its_own() -> None:
    session, peer, probe = probing()
    [event] = peer.say(Response(probe.id, DISCOVER_RESULT))
    assert isinstance(event, DiscoverAnswered)
    assert event.outcome is ProbeOutcome.PER_REQUEST
    assert event.result is not None and event.result.server_info == {"name": "modern", "version": "2.3"}
    session.adopt(event.result)
    assert session.phase is Phase.READY
    assert session.era is Era.PER_REQUEST and session.version == "2026-07-28"
    assert peer.read() == []  # no notifications/initialized in this era
    listed = session.send_request("tools/list")
    called = session.send_request(
        "tools/call", {"name": "echo", "arguments": {}, "_meta": {"trace": "t"}}, progress=True
    )
    session.send_request("ping")
    sent = peer.read()
    assert sent[0] == Request(listed, "tools/list", {"_meta": META})
    assert sent[1] == Request(
        called,
        "tools/call",
        {"name": "echo", "arguments": {}, "_meta": {"trace": "t", **META, "progressToken": called}},
    )
    assert sent[2].params == {"_meta": META}  # type: ignore[union-attr]
    events = peer.say(Response(listed, {"tools": []}))
    assert events == [ResponseReceived(listed, "tools/list", {"tools": []})]


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        (ErrorResponse(0, ErrorObject(METHOD_NOT_FOUND, "Method not found")), ProbeOutcome.REFUSED),
        (
            Response(0, {"supportedVersions": ["2025-11-25"], "capabilities": {}}),
            ProbeOutcome.NO_MUTUAL_VERSION,
        ),
        (Response(0, {"capabilities": {}}), ProbeOutcome.NO_MUTUAL_VERSION),
    ],
)
def test_no_evidence_of_the_new_era_falls_back_to_initialize(answer: Any, outcome: ProbeOutcome) -> None:
    session, peer, probe = probing()
    assert probe.id == 0
    [event] = peer.say(answer)
    assert isinstance(event, DiscoverAnswered) and event.outcome is outcome and event.detail
    if event.result is not None:  # it answered, but speaks no era-2026 version we do
        with pytest.raises(RuntimeError, match="cannot adopt"):
            session.adopt(event.result)
    session.fall_back()
    init_id = session.start_initialize()
    [init] = peer.read()
    assert isinstance(init, Request) and init.method == "initialize"
    [initialized] = peer.say(Response(init_id, INIT_RESULT))
    assert isinstance(initialized, Initialized)
    assert peer.read() == [Notification("notifications/initialized")]
    assert session.era is Era.HANDSHAKE and session.version == "2025-11-25"
    session.send_request("tools/list")
    [listing] = peer.read()
    assert isinstance(listing, Request) and listing.params is None  # no _meta in this era


LOCKED = ErrorObject(-32022, "connection is serving the 2026-07-28 protocol", {"supported": ["2026-07-28"]})
"""What a slow-starting SDK server that answered our timed-out probe says to ``initialize``."""


def fell_back() -> tuple[ClientSession, Peer, Request, Request]:
    """The probe timed out and ``initialize`` was sent: the probe, ``initialize``."""
    session, peer, probe = probing()
    session.fall_back()
    session.start_initialize()
    [init] = peer.read()
    assert isinstance(init, Request)
    return session, peer, probe, init


def assert_adopted(session: ClientSession, peer: Peer, event: object) -> None:
    assert isinstance(event, Adopted) and event.result.supported_versions == ("2025-11-25", "2026-07-28")
    assert session.phase is Phase.READY and session.era is Era.PER_REQUEST
    assert peer.read() == []  # no notifications/initialized, no second probe
    session.send_request("tools/list")
    [listing] = peer.read()
    assert isinstance(listing, Request) and listing.params == {"_meta": META}


def test_initialize_answered_after_a_late_discover_answer_settles_the_era_itself() -> None:
    """The server answered our timed-out probe, then ``initialize``: that answer
    decides, and the late probe's answer is dropped (a stray one once it is settled)."""
    session, peer, probe, init = fell_back()
    assert peer.say(Response(probe.id, DISCOVER_RESULT)) == []  # kept until initialize is answered
    [event] = peer.say(Response(init.id, INIT_RESULT))
    assert isinstance(event, Initialized) and session.era is Era.HANDSHAKE
    session, peer, probe, init = fell_back()
    peer.say(Response(init.id, INIT_RESULT))
    assert peer.say(Response(probe.id, DISCOVER_RESULT)) == [StrayResponse(probe.id)]


@pytest.mark.parametrize(
    "refusal",
    [
        ErrorResponse(1, LOCKED),  # the SDK's dual-era loop, locked by our probe
        ErrorResponse(1, ErrorObject(METHOD_NOT_FOUND, "Method not found: initialize")),
        Response(1, {}),  # a mock of the new era that answers anything with {}
    ],
    ids=["locked", "method-not-found", "no-protocol-version"],
)
@pytest.mark.parametrize("late_first", [True, False], ids=["late-answer-first", "refusal-first"])
def test_initialize_failed_after_a_timed_out_probe_adopts_its_late_answer(
    refusal: Response | ErrorResponse, late_first: bool
) -> None:
    """Under load the probe times out before its answer is read; the server (of the
    new era, or locked to it by our probe) then fails ``initialize``. The probe's late
    answer settles the era, whether it came before that failure or after it (the
    connection used to fail: "server refused initialize", or a late answer dropped)."""
    session, peer, probe, init = fell_back()
    assert init.id == refusal.id
    late = Response(probe.id, DISCOVER_RESULT)
    if late_first:
        assert peer.say(late) == []
        [event] = peer.say(refusal)
    else:
        assert peer.say(refusal) == []  # held: the probe may still answer
        assert session.phase is Phase.DISCOVERING
        [event] = peer.say(late)
    assert_adopted(session, peer, event)


def test_a_late_answer_that_names_none_of_ours_lets_the_initialize_failure_stand() -> None:
    _, peer, probe, init = fell_back()
    peer.say(ErrorResponse(init.id, LOCKED))
    with pytest.raises(ProtocolError, match=r"refused initialize: .*code -32022"):
        peer.say(Response(probe.id, {"supportedVersions": ["2025-11-25"], "capabilities": {}}))


def test_initialize_refused_without_a_probe_before_it_is_not_probed_again() -> None:
    session = ClientSession()
    peer = Peer(session)
    init_id = session.start_initialize()
    peer.read()
    with pytest.raises(ProtocolError, match="refused initialize"):
        peer.say(ErrorResponse(init_id, LOCKED))


def test_discover_only_from_a_new_session() -> None:
    session, _, _ = probing()
    with pytest.raises(RuntimeError, match="discover"):
        session.start_discover()
    with pytest.raises(RuntimeError, match="nothing to fall back"):
        ClientSession().fall_back()


# ------------------------------------------------------------ negotiation tables


@pytest.mark.parametrize(
    ("setting", "remembered", "first"),
    [
        (Setting.HANDSHAKE, None, Opening.INITIALIZE),
        (Setting.HANDSHAKE, Era.PER_REQUEST, Opening.INITIALIZE),
        (Setting.PER_REQUEST, Era.HANDSHAKE, Opening.PROBE),
        (Setting.AUTO, None, Opening.PROBE),
        (Setting.AUTO, Era.PER_REQUEST, Opening.PROBE),
        (Setting.AUTO, Era.HANDSHAKE, Opening.INITIALIZE),
    ],
)
def test_opening(setting: Setting, remembered: Era | None, first: Opening) -> None:
    assert opening(setting, remembered) is first
    assert opening(setting, remembered, handshake_only=True) is Opening.INITIALIZE  # legacy HTTP+SSE


@pytest.mark.parametrize(
    ("setting", "outcome", "verdict"),
    [
        (Setting.AUTO, ProbeOutcome.PER_REQUEST, Verdict.ADOPT),
        (Setting.AUTO, ProbeOutcome.REFUSED, Verdict.FALL_BACK),
        (Setting.AUTO, ProbeOutcome.NO_MUTUAL_VERSION, Verdict.FALL_BACK),
        (Setting.AUTO, ProbeOutcome.TIMED_OUT, Verdict.FALL_BACK),
        (Setting.AUTO, ProbeOutcome.CLOSED, Verdict.REOPEN_AND_FALL_BACK),
        (Setting.PER_REQUEST, ProbeOutcome.PER_REQUEST, Verdict.ADOPT),
        (Setting.PER_REQUEST, ProbeOutcome.REFUSED, Verdict.FAIL),
        (Setting.PER_REQUEST, ProbeOutcome.CLOSED, Verdict.FAIL),
        (Setting.PER_REQUEST, ProbeOutcome.TIMED_OUT, Verdict.FAIL),
    ],
)
def test_after_probe(setting: Setting, outcome: ProbeOutcome, verdict: Verdict) -> None:
    assert after_probe(setting, outcome) is verdict


@pytest.mark.parametrize(
    ("setting", "left", "wait"),
    [
        (Setting.AUTO, 60.0, 30.0),  # half of what is left: a slow start is no verdict either
        (Setting.AUTO, 3.0, 1.5),  # and initialize gets the other half
        (Setting.PER_REQUEST, 60.0, 54.0),  # nothing to fall back to: a slow start is no verdict
    ],
)
def test_probe_wait(setting: Setting, left: float, wait: float) -> None:
    assert probe_wait(setting, left) == wait


def test_a_remembered_handshake_that_found_nothing_is_forgotten() -> None:
    assert remembered_after(Opening.INITIALIZE, Era.HANDSHAKE, None) is None
    assert remembered_after(Opening.PROBE, Era.PER_REQUEST, None) is Era.PER_REQUEST
    assert remembered_after(Opening.PROBE, None, Era.HANDSHAKE) is Era.HANDSHAKE
    assert remembered_after(Opening.INITIALIZE, Era.HANDSHAKE, Era.HANDSHAKE) is Era.HANDSHAKE


def test_an_unsupported_version_refusal_naming_ours_is_probed_again_once() -> None:
    _, peer, probe = probing()
    refused = ErrorObject(-32022, "Unsupported protocol version", {"supported": ["2026-07-28"]})
    assert peer.say(ErrorResponse(probe.id, refused)) == []  # no verdict yet: probed again
    [again] = peer.read()
    assert isinstance(again, Request) and again.method == "server/discover"
    assert again.params == {"_meta": META}
    [event] = peer.say(ErrorResponse(again.id, refused))  # only once
    assert isinstance(event, DiscoverAnswered) and event.outcome is ProbeOutcome.REFUSED


def test_an_unsupported_version_refusal_naming_none_of_ours_falls_back() -> None:
    _, peer, probe = probing()
    refused = ErrorObject(-32022, "Unsupported protocol version", {"supported": ["2030-01-01"]})
    [event] = peer.say(ErrorResponse(probe.id, refused))
    assert isinstance(event, DiscoverAnswered) and event.outcome is ProbeOutcome.REFUSED


# ------------------------------------------------------------ the HTTP headers


def test_a_per_request_era_post_names_version_method_and_name() -> None:
    call = Request(3, "tools/call", {"name": "echo", "arguments": {}, "_meta": META})
    assert request_headers(call) == {
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "echo",
    }
    read = Request(4, "resources/read", {"uri": "file:///a b", "_meta": META})
    assert request_headers(read)["Mcp-Name"] == "file:///a b"
    assert "Mcp-Name" not in request_headers(Request(5, "tools/list", {"_meta": META}))


def test_a_name_a_header_cannot_carry_is_sent_as_base64() -> None:
    call = Request(3, "tools/call", {"name": "héllo", "_meta": META})
    assert request_headers(call)["Mcp-Name"] == "=?base64?aMOpbGxv?="
    assert header_value(" padded") == "=?base64?IHBhZGRlZA==?="
    assert header_value("=?base64?eA==?=") == "=?base64?PT9iYXNlNjQ/ZUE9PT89?="


def test_a_handshake_era_request_gets_no_era_headers() -> None:
    assert request_headers(Request(1, "tools/call", {"name": "echo"})) == {}
    assert request_headers(Request(1, "ping")) == {}
