"""The bridge's envelope, back to back: every constructor decodes to itself, ids and
JSON-RPC payloads come through untouched, and every bad frame is an EnvelopeError
that says what is wrong (echoing the frame's id when it could be read)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.protocol import bridge_envelope as env
from actors.protocol.bridge_envelope import EnvelopeError, Frame
from actors.protocol.errors import FramingError
from actors.protocol.ndjson import LineSplitter

FRAMES = [
    env.session_open("time", id=1),
    env.session_open("time", id="open-1"),
    env.open_result("s1", id=7),
    env.open_failed("not_exported", "no", id="x"),
    env.message("s1", {"jsonrpc": "2.0", "id": "abc", "method": "ping"}),
    env.message("s1", {"jsonrpc": "2.0", "id": 2**53, "result": {}}),
    env.message("s1", [{"jsonrpc": "2.0", "method": "notifications/initialized"}]),
    env.session_close("s1"),
    env.session_close("s1", reason="server_exited", message="status 1", id=3),
    env.error("unknown_session", "no session s9", session_id="s9", id=4),
    env.auth("tok-en"),
    env.peer_register([("time", "sha256:ab")], id=5),
    env.peer_register_result(["time"], id=5),
    env.peer_register_result(error=("digest_mismatch", "differs"), id=5),
]


@pytest.mark.parametrize("frame", FRAMES, ids=lambda f: f.type)
def test_every_constructor_round_trips(frame: Frame) -> None:
    text = env.encode(frame)
    assert orjson.loads(text)["v"] == 1
    assert env.decode(text) == frame


json_ids = st.one_of(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.text(max_size=40))


@given(request_id=json_ids, frame_id=st.one_of(st.none(), json_ids))
def test_jsonrpc_ids_and_frame_ids_are_untouched(request_id: int | str, frame_id: int | str | None) -> None:
    jsonrpc = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"x": [1, "2"]}}
    frame = Frame(env.MESSAGE, {"sessionId": "s", "jsonrpc": jsonrpc}, frame_id)
    decoded = env.decode(env.encode(frame))
    assert isinstance(decoded, Frame)
    assert decoded.data["jsonrpc"] == jsonrpc
    assert type(decoded.data["jsonrpc"]["id"]) is type(request_id)
    assert decoded.id == frame_id and type(decoded.id) is type(frame_id)


def test_a_server_line_is_spliced_in_verbatim() -> None:
    line = b'{"jsonrpc":"2.0","id":"07","result":{"big":12345678901234567890.5}}'
    text = env.encode_message_json("s-1", line)
    decoded = env.decode(text)
    assert isinstance(decoded, Frame) and decoded.type == env.MESSAGE
    assert decoded.data["sessionId"] == "s-1" and decoded.data["jsonrpc"]["id"] == "07"
    assert line.decode() in text


@pytest.mark.parametrize(
    ("text", "code", "fragment", "frame_id"),
    [
        ("not json", env.MALFORMED, "not JSON", None),
        ("[1, 2]", env.MALFORMED, "JSON object", None),
        ('{"v": 2, "type": "mcp:message", "id": 4}', env.MALFORMED, "version 2", 4),
        ('{"v": true, "type": "auth"}', env.MALFORMED, "version true", None),
        ('{"v": null, "type": "auth", "id": "a"}', env.MALFORMED, "version null", "a"),
        ('{"v": 1, "id": 1}', env.MALFORMED, "type must be", 1),
        ('{"v": 1, "type": "mcp:message", "id": 1.5}', env.MALFORMED, "id must be", None),
        ('{"v": 1, "type": "mcp:message", "id": true}', env.MALFORMED, "id must be", None),
        ('{"v": 1, "type": "mcp:session:open", "data": []}', env.MALFORMED, "JSON object", None),
        ('{"v": 1, "type": "mcp:session:open", "id": 9}', env.MALFORMED, "data.serverName", 9),
        ('{"v": 1, "type": "mcp:message", "data": {"sessionId": "s"}}', env.MALFORMED, "data.jsonrpc", None),
        ('{"v": 1, "type": "mcp:message", "data": {"jsonrpc": {}}}', env.MALFORMED, "data.sessionId", None),
        ('{"v": 1, "type": "mcp:session:close", "data": {"sessionId": 3}}', env.MALFORMED, "sessionId", None),
        ('{"v": 1, "type": "auth", "data": {}}', env.MALFORMED, "data.token", None),
    ],
)
def test_bad_frames_say_what_is_wrong(text: str, code: str, fragment: str, frame_id: object) -> None:
    problem = env.decode(text)
    assert isinstance(problem, EnvelopeError)
    assert problem.code == code and fragment in problem.message, problem
    assert problem.id == frame_id
    answer = env.of_error(problem)
    assert answer.type == env.ERROR and answer.data["code"] == code and answer.id == frame_id


def test_a_frame_nested_past_the_parser_is_told_so_not_that_it_is_not_json() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    problem = env.decode('{"v": 1, "type": "mcp:message", "data": {"jsonrpc": ' + deep + "}}")
    assert isinstance(problem, EnvelopeError) and problem.code == env.MALFORMED
    assert problem.message.startswith("the frame is nested deeper than 1024 levels"), problem


def test_oversized_frames_are_refused_by_their_utf8_size() -> None:
    frame = env.encode(env.message("s", {"jsonrpc": "2.0", "method": "x", "params": {"t": "é" * 600}}))
    assert len(frame) < 1024 < len(frame.encode())
    problem = env.decode(frame, max_bytes=1024)
    assert isinstance(problem, EnvelopeError) and problem.code == env.TOO_LARGE
    assert "over the limit of 1024" in problem.message
    assert isinstance(env.decode(frame, max_bytes=2048), Frame)
    assert isinstance(env.decode(frame.encode(), max_bytes=1024), EnvelopeError)


def test_a_frame_without_v_is_version_1() -> None:
    """Another project's bridge (AIRI's) sends no ``v``: its frames are version 1."""
    opened = env.decode('{"type": "mcp:session:open", "id": 3, "data": {"serverName": "browser"}}')
    assert opened == Frame(env.OPEN, {"serverName": "browser"}, 3)
    message = env.decode('{"type": "mcp:message", "data": {"sessionId": "s", "jsonrpc": {"id": 1}}}')
    assert isinstance(message, Frame) and message.data["jsonrpc"] == {"id": 1}
    assert env.encode(env.session_open("browser")).startswith('{"v":1,')  # we always send it


def test_unknown_types_decode_for_the_receiver_to_answer() -> None:
    decoded = env.decode('{"v": 1, "type": "mcp:future", "id": "f", "data": {"x": 1}}')
    assert decoded == Frame("mcp:future", {"x": 1}, "f")


def test_the_line_splitter_keeps_lines_as_they_are() -> None:
    splitter = LineSplitter(max_line_bytes=32)
    assert splitter.feed(b'{"id":"07"') == []
    assert splitter.feed(b',"x":1}\r\n\n  \n{"a"') == [b'{"id":"07","x":1}']
    assert splitter.feed(b":2}\n") == [b'{"a":2}']
    with pytest.raises(FramingError, match="longer than 32"):
        splitter.feed(b"x" * 33)
    assert splitter.feed(b"ok\n") == [b"ok"]  # emptied after the error
    with pytest.raises(FramingError):
        splitter.feed(b"y" * 40 + b"\n")
