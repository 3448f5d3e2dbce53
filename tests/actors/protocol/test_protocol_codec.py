"""JSON-RPC over newline-delimited JSON (``jsonrpc.py``, ``ndjson.py``): framing,
validation, and the encode round trip.

Everything here is pure: bytes go into a ``LineDecoder``, messages come out. The
property tests at the end check the two promises the transports rely on: whatever
chunking the pipe produces, valid traffic decodes to exactly what was encoded; and
whatever garbage arrives, the only exceptions are ``ProtocolError`` subclasses (which
fail the connection, not the supervisor).
"""

from __future__ import annotations

import itertools
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.protocol.errors import FramingError, ProtocolError, Unencodable
from actors.protocol.jsonrpc import decode_json as decode_line
from actors.protocol.messages import (
    ErrorObject,
    ErrorResponse,
    Message,
    Notification,
    Request,
    Response,
)
from actors.protocol.ndjson import LineDecoder, encode_lines
from actors.protocol.ndjson import encode_line as encode

REQUEST = Request(1, "tools/list", {"cursor": "abc"})
NOTIFICATION = Notification("notifications/tools/list_changed")
RESPONSE = Response("a-1", {"tools": [{"name": "echo"}]})
ERROR = ErrorResponse(7, ErrorObject(-32601, "no such method", {"method": "x"}))
SAMPLE: list[Message] = [REQUEST, NOTIFICATION, RESPONSE, ERROR]
WIRE = b"".join(encode(m) for m in SAMPLE)


def line(obj: Any) -> bytes:
    """One wire line holding ``obj`` as JSON."""
    return orjson.dumps(obj) + b"\n"


def feed_all(decoder: LineDecoder, chunks: list[bytes]) -> list[Message]:
    out: list[Message] = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    return out


# ------------------------------------------------------------------------ encode


def test_encode_writes_one_jsonrpc_line_per_message() -> None:
    assert orjson.loads(encode(REQUEST)) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {"cursor": "abc"},
    }
    assert orjson.loads(encode(NOTIFICATION)) == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
    }
    assert orjson.loads(encode(RESPONSE)) == {
        "jsonrpc": "2.0",
        "id": "a-1",
        "result": {"tools": [{"name": "echo"}]},
    }
    assert orjson.loads(encode(ERROR)) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32601, "message": "no such method", "data": {"method": "x"}},
    }
    for message in SAMPLE:
        data = encode(message)
        assert data.endswith(b"\n")
        assert data.count(b"\n") == 1


def test_encode_omits_absent_params_and_error_data() -> None:
    assert b"params" not in encode(Request(3, "ping"))
    assert b"params" not in encode(Notification("notifications/initialized"))
    assert b"data" not in encode(ErrorResponse(3, ErrorObject(-32603, "boom")))


def test_encode_keeps_newlines_inside_strings_escaped() -> None:
    # A raw newline inside a message would split it into two broken lines on the wire.
    data = encode(Request(1, "tools/call", {"text": "one\ntwo\r\nthree"}))
    assert data.count(b"\n") == 1
    assert LineDecoder().feed(data) == [Request(1, "tools/call", {"text": "one\ntwo\r\nthree"})]


def test_encode_refuses_what_json_cannot_carry_and_names_the_message() -> None:
    bad = Request(1, "tools/call", {"arguments": object()})
    with pytest.raises(Unencodable, match="cannot be encoded") as info:
        encode(bad)
    assert info.value.message is bad
    with pytest.raises(Unencodable) as info:
        encode_lines([REQUEST, Request(2, "tools/call", {"arguments": {1: "key not a string"}})])
    assert info.value.message.id == 2  # type: ignore[union-attr]
    assert isinstance(info.value, ValueError)


def test_encode_lines_is_the_lines_of_its_messages() -> None:
    assert encode_lines(SAMPLE) == WIRE
    assert encode_lines([]) == b""


@pytest.mark.parametrize(
    "message",
    [
        *SAMPLE,
        Request("req-9", "tools/call", ["positional", 1, None]),
        Notification("notifications/progress", {"progressToken": 1, "progress": 0.5}),
        Response(0, {}),
        ErrorResponse(None, ErrorObject(-32700, "parse error")),
        ErrorResponse(2, ErrorObject(-1, "falsy data survives", False)),
    ],
)
def test_encode_round_trip(message: Message) -> None:
    assert LineDecoder().feed(encode(message)) == [message]


# ----------------------------------------------------------------------- framing


def test_message_split_at_every_byte_position() -> None:
    for cut in range(len(WIRE) + 1):
        decoder = LineDecoder()
        assert decoder.feed(WIRE[:cut]) + decoder.feed(WIRE[cut:]) == SAMPLE, f"cut at {cut}"
        assert decoder.pending_bytes == 0


def test_byte_by_byte_yields_each_message_on_its_newline() -> None:
    decoder = LineDecoder()
    seen: list[Message] = []
    for i in range(len(WIRE)):
        got = decoder.feed(WIRE[i : i + 1])
        if WIRE[i : i + 1] == b"\n":
            assert len(got) == 1
        else:
            assert got == []
        seen.extend(got)
    assert seen == SAMPLE


def test_several_messages_in_one_read() -> None:
    assert LineDecoder().feed(WIRE) == SAMPLE


def test_unfinished_line_is_held_until_its_newline() -> None:
    data = encode(REQUEST)
    decoder = LineDecoder()
    assert decoder.feed(data[:-1]) == []
    assert decoder.pending_bytes == len(data) - 1
    assert decoder.feed(b"\n") == [REQUEST]
    assert decoder.pending_bytes == 0


def test_blank_lines_and_crlf_are_tolerated() -> None:
    data = (
        b"\n\r\n   \n" + encode(REQUEST)[:-1] + b"\r\n" + b"\t\n" + encode(NOTIFICATION)[:-1] + b"  \r\n\r\n"
    )
    decoder = LineDecoder()
    assert decoder.feed(data) == [REQUEST, NOTIFICATION]
    assert decoder.pending_bytes == 0


def test_crlf_split_between_reads() -> None:
    data = encode(REQUEST)[:-1] + b"\r"
    decoder = LineDecoder()
    assert decoder.feed(data) == []
    assert decoder.feed(b"\n") == [REQUEST]


def test_batch_array_is_unpacked_in_order() -> None:
    batch = [
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
        {"jsonrpc": "2.0", "id": "s1", "method": "ping"},
    ]
    assert LineDecoder().feed(line(batch)) == [
        Response(1, {}),
        Notification("notifications/tools/list_changed"),
        Request("s1", "ping"),
    ]


def test_empty_batch_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="empty JSON-RPC batch"):
        LineDecoder().feed(b"[]\n")


def test_batch_member_that_is_not_an_object_is_a_framing_error() -> None:
    with pytest.raises(FramingError, match="must be an object"):
        LineDecoder().feed(line([{"jsonrpc": "2.0", "id": 1, "result": {}}, 5]))


# -------------------------------------------------------------------- line limit


def padded_line(length: int) -> bytes:
    """A valid notification line of exactly ``length`` bytes, newline excluded."""
    base = encode(Notification("n", {"pad": ""}))[:-1]
    pad = length - len(base)
    assert pad >= 0
    return base.replace(b'"pad":""', b'"pad":"' + b"x" * pad + b'"')


def test_line_of_exactly_the_limit_is_accepted_even_in_chunks() -> None:
    limit = 100
    data = padded_line(limit)
    assert len(data) == limit
    decoder = LineDecoder(max_line_bytes=limit)
    for i in range(0, limit, 7):
        assert decoder.feed(data[i : i + 7]) == []
        assert decoder.pending_bytes <= limit
    [message] = decoder.feed(b"\n")
    assert encode(message) == data + b"\n"


def test_complete_line_over_the_limit_is_a_framing_error() -> None:
    limit = 100
    decoder = LineDecoder(max_line_bytes=limit)
    with pytest.raises(FramingError, match="longer than 100 bytes"):
        decoder.feed(padded_line(limit + 1) + b"\n")
    assert decoder.pending_bytes == 0


def test_over_long_line_in_small_chunks_fails_with_bounded_memory() -> None:
    limit = 100
    decoder = LineDecoder(max_line_bytes=limit)
    fed = 0
    with pytest.raises(FramingError, match="longer than 100 bytes"):
        while fed < 10 * limit:
            fed += 3
            decoder.feed(b"x" * 3)
            assert decoder.pending_bytes <= limit
    # It failed on the first chunk that took the unfinished line past the limit ...
    assert limit < fed <= limit + 3
    # ... and let go of what it held.
    assert decoder.pending_bytes == 0


def test_unfinished_line_after_a_good_message_counts_only_its_own_bytes() -> None:
    decoder = LineDecoder(max_line_bytes=100)
    notification = encode(NOTIFICATION)
    assert decoder.feed(notification + b"y" * 60) == [NOTIFICATION]
    assert decoder.pending_bytes == 60
    with pytest.raises(FramingError):
        decoder.feed(b"y" * 41)
    assert decoder.pending_bytes == 0


def test_take_hands_out_the_good_lines_and_holds_the_error_for_once() -> None:
    decoder = LineDecoder()
    decoder.raise_held()  # nothing held: nothing raised
    assert decoder.take(WIRE + b"not json\n" + encode(REQUEST)) == SAMPLE
    with pytest.raises(FramingError, match="not JSON"):
        decoder.raise_held()
    decoder.raise_held()  # once
    assert decoder.take(encode(NOTIFICATION)) == [NOTIFICATION]
    with pytest.raises(FramingError):  # nothing good before it: raised at once
        decoder.take(b"not json either\n")


# -------------------------------------------------------------------- validation


def test_non_json_line_quotes_only_a_short_snippet() -> None:
    garbage = b"this is not json " * 500
    with pytest.raises(FramingError, match="not JSON") as info:
        LineDecoder().feed(garbage + b"\n")
    text = str(info.value)
    assert "this is not json" in text
    assert len(text) < 200


def test_invalid_utf8_is_a_framing_error() -> None:
    with pytest.raises(FramingError):
        LineDecoder().feed(b'{"jsonrpc": "2.0", "method": "\xff\xfe"}\n')


@pytest.mark.parametrize("value", [b"1", b'"text"', b"null", b"true", b"[1]"])
def test_non_object_json_is_a_framing_error(value: bytes) -> None:
    with pytest.raises(FramingError, match="must be an object"):
        decode_line(value)


@pytest.mark.parametrize(
    "obj",
    [
        {"id": 1, "method": "ping"},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": 2.0, "id": 1, "method": "ping"},
        {"jsonrpc": None, "method": "notifications/initialized"},
    ],
)
def test_missing_or_wrong_jsonrpc_member(obj: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError, match="jsonrpc"):
        decode_line(line(obj))


@pytest.mark.parametrize("bad_id", [True, False, 1.5, 1.0, None, [1], {"id": 1}])
def test_bad_request_ids(bad_id: Any) -> None:
    with pytest.raises(ProtocolError, match="id must be a string or an integer"):
        decode_line(line({"jsonrpc": "2.0", "id": bad_id, "method": "tools/list"}))


@pytest.mark.parametrize("bad_id", [True, 2.5, None, ["x"]])
def test_bad_response_ids(bad_id: Any) -> None:
    with pytest.raises(ProtocolError, match="id must be a string or an integer"):
        decode_line(line({"jsonrpc": "2.0", "id": bad_id, "result": {}}))


def test_string_and_integer_ids_are_kept_as_sent() -> None:
    assert decode_line(line({"jsonrpc": "2.0", "id": "7", "result": {}})) == [Response("7", {})]
    assert decode_line(line({"jsonrpc": "2.0", "id": 7, "result": {}})) == [Response(7, {})]
    assert decode_line(line({"jsonrpc": "2.0", "id": -(2**63), "method": "m"})) == [Request(-(2**63), "m")]


@pytest.mark.parametrize("method", [5, True, ["tools/list"], {"name": "x"}])
def test_method_must_be_a_string(method: Any) -> None:
    with pytest.raises(ProtocolError, match="method must be a string"):
        decode_line(line({"jsonrpc": "2.0", "id": 1, "method": method}))


@pytest.mark.parametrize("params", [1, "text", True, 2.5])
@pytest.mark.parametrize("with_id", [True, False])
def test_params_must_be_object_or_array(params: Any, with_id: bool) -> None:
    obj: dict[str, Any] = {"jsonrpc": "2.0", "method": "tools/call", "params": params}
    if with_id:
        obj["id"] = 1
    with pytest.raises(ProtocolError, match="params of 'tools/call'"):
        decode_line(line(obj))


def test_null_params_count_as_absent() -> None:
    obj = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": None}
    assert decode_line(line(obj)) == [Request(1, "ping", None)]


def test_unknown_members_are_ignored() -> None:
    obj = {"jsonrpc": "2.0", "id": 1, "method": "ping", "extra": {"x": 1}}
    assert decode_line(line(obj)) == [Request(1, "ping")]


@pytest.mark.parametrize(
    "obj",
    [
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "error": "it broke"},
        {"jsonrpc": "2.0", "id": 1, "error": {"message": "no code"}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": "-32000", "message": "m"}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000.5, "message": "m"}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": True, "message": "bool is not an integer"}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": None}},
    ],
)
def test_response_without_result_or_valid_error(obj: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError, match="neither a result nor a valid error"):
        decode_line(line(obj))


@pytest.mark.parametrize("result", [None, [], "ok", 1])
def test_result_must_be_an_object(result: Any) -> None:
    with pytest.raises(ProtocolError, match="must be an object"):
        decode_line(line({"jsonrpc": "2.0", "id": 1, "result": result}))


def test_message_that_is_neither_request_nor_response() -> None:
    with pytest.raises(ProtocolError, match="neither request, notification nor response"):
        decode_line(line({"jsonrpc": "2.0", "result": {}}))


def test_error_response_with_null_id_is_a_message() -> None:
    obj = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    assert decode_line(line(obj)) == [ErrorResponse(None, ErrorObject(-32700, "Parse error"))]


@pytest.mark.parametrize("jsonrpc", ["1.0", "2.0"])
def test_deeply_nested_junk_is_still_a_protocol_error(jsonrpc: str) -> None:
    # orjson reads 1024 levels but writes only 255; quoting such a message in the error
    # text once escaped as a TypeError instead of a ProtocolError.
    deep = b"[" * 300 + b"]" * 300
    with pytest.raises(ProtocolError):
        LineDecoder().feed(b'{"jsonrpc": "' + jsonrpc.encode() + b'", "x": ' + deep + b"}\n")


# -------------------------------------------------------------------- properties

# JSON that orjson writes and reads back unchanged: 64-bit integers, finite floats,
# strings without lone surrogates.
_ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_scalars = st.none() | st.booleans() | _ints | st.floats(allow_nan=False, allow_infinity=False) | _text
json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(_text, json_values, max_size=4)
ids = _ints | _text
params = st.none() | json_objects | st.lists(json_values, max_size=4)
messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(Request, ids, _text, params),
    st.builds(Notification, _text, params),
    st.builds(Response, ids, json_objects),
    st.builds(ErrorResponse, st.none() | ids, st.builds(ErrorObject, _ints, _text, json_values)),
)


@st.composite
def chunkings(draw: st.DrawFn, data: bytes) -> list[bytes]:
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=200)
@given(
    batch=st.lists(st.tuples(messages, st.sampled_from([b"\n", b"\r\n", b"\n\n", b" \n"])), max_size=6),
    data=st.data(),
)
def test_any_messages_in_any_chunking_decode_unchanged(
    batch: list[tuple[Message, bytes]], data: st.DataObject
) -> None:
    wire = b"".join(encode(m)[:-1] + ending for m, ending in batch)
    decoded = feed_all(LineDecoder(), data.draw(chunkings(wire)))
    sent = [m for m, _ in batch]
    assert decoded == sent
    # Equality is lenient (1 == 1.0 == True); the bytes are not.
    assert [encode(m) for m in decoded] == [encode(m) for m in sent]


# Lines that look like JSON-RPC more often than random bytes do, so the property
# below reaches the validation code and not only the JSON parser.
_keys = st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "code", "message"])
_near_misses = st.recursive(
    st.sampled_from(["2.0", "ping", -32601, 0, 1.5, True, None]) | _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys | _text, inner, max_size=5),
    max_leaves=10,
)
_junk_chunks = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"\n", b"\r\n", b"[", b"{", b'"', b"\\", b"\xff", b"[]"]),
    _near_misses.map(lambda v: orjson.dumps(v) + b"\n"),
)


@settings(max_examples=300)
@given(chunks=st.lists(_junk_chunks, max_size=12))
def test_arbitrary_bytes_only_ever_raise_protocol_errors(chunks: list[bytes]) -> None:
    limit = 256
    decoder = LineDecoder(max_line_bytes=limit)
    for chunk in chunks:
        try:
            decoder.feed(chunk)
        except ProtocolError:
            return  # the connection is failed here; anything else would escape the actor
        assert decoder.pending_bytes <= limit
