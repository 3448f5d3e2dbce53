"""The project's one SSE parser (``actors/protocol/sse.py``), for both of its callers.

The HTTP transports feed it a server's stream and rely on: fields, comments and
defaults; every line ending, split anywhere; ``id`` and ``retry`` that stick without
data and carry over to a resumed stream; the size bounds. The CLI's admin client
reads a call's stream through ``iter_events`` and relies on: a multi-byte character
or a CRLF split across chunks, empty chunks, events without data dropped, and an
event the end of the stream cuts short dropped.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.protocol.sse import ServerSentEvent, SSEError, SSEParser, iter_events


def parse(*chunks: bytes) -> list[ServerSentEvent]:
    parser = SSEParser()
    events = [event for chunk in chunks for event in parser.feed(chunk)]
    return events + parser.close()


def test_sse_fields_comments_and_defaults() -> None:
    events = parse(b": hello\nevent: endpoint\ndata: /messages?x=1\n\nid: 7\ndata: a\ndata:b\n\n")
    assert events == [
        ServerSentEvent("/messages?x=1", "endpoint", ""),
        ServerSentEvent("a\nb", "message", "7"),
    ]


def test_sse_line_endings_bom_and_split_crlf() -> None:
    expected = [ServerSentEvent("x", "message", "1"), ServerSentEvent("y", "message", "1")]
    assert parse(b"\xef\xbb\xbfid: 1\r\ndata: x\r\n\r\ndata: y\r\r") == expected
    assert parse(b"id: 1\r", b"\ndata: x\r", b"\n\r", b"\ndata: y\n\n") == expected
    assert parse(b"id: 1\rdata: x\r\rdata: y\n\n") == expected


def test_sse_mixed_line_endings_comments_and_multiline_data() -> None:
    stream = b"\xef\xbb\xbfevent: progress\r\n: hello\r\ndata: a\rdata:b\n\nid: 7\ndata: c\n\n"
    assert list(iter_events([stream])) == [
        ServerSentEvent("a\nb", "progress", ""),
        ServerSentEvent("c", "message", "7"),
    ]


def test_sse_split_anywhere_even_inside_a_character_gives_the_same_events() -> None:
    stream = 'event: result\r\ndata: {"text": "héllo 時"}\r\n\r\nevent: done\rdata: {}\r\r'.encode()
    whole = list(iter_events([stream]))
    assert whole == [ServerSentEvent('{"text": "héllo 時"}', "result"), ServerSentEvent("{}", "done")]
    for cut_at in range(1, len(stream)):
        assert list(iter_events([stream[:cut_at], stream[cut_at:]])) == whole, cut_at
        assert list(iter_events([stream[:cut_at], b"", stream[cut_at:]])) == whole, cut_at
    assert list(iter_events(bytes([b]) for b in stream)) == whole


def test_sse_id_and_retry_stick_without_data() -> None:
    parser = SSEParser()
    assert parser.feed(b"id: prime-1\nretry: 2000\ndata\n\n") == [
        ServerSentEvent("", "message", "prime-1", 2000)
    ]
    assert parser.feed(b"id: 2\nretry: x\n\n") == []  # no data: nothing dispatched, but the id counts
    assert (parser.last_event_id, parser.retry) == ("2", 2000)
    assert parser.feed(b"id: a\x00b\ndata: z\n\n") == [ServerSentEvent("z", "message", "2")]


def test_sse_events_without_data_are_dropped_but_retry_counts() -> None:
    parser = SSEParser()
    assert parser.feed(b"event: ping\n\nretry: 500\n\n") == []
    assert parser.retry == 500
    assert parser.feed(b"event: result\ndata: {}\n") == []  # not yet ended by a blank line


def test_sse_unterminated_event_is_dropped_and_limits_hold() -> None:
    assert parse(b"data: complete\n\ndata: cut") == [ServerSentEvent("complete")]
    assert list(iter_events([b"event: result\ndata: {}"])) == []
    assert list(iter_events([b"event: result\ndata: {}\n"])) == []  # the blank line never came
    with pytest.raises(SSEError):
        SSEParser(max_event_chars=10).feed(b"data: " + b"x" * 20)
    with pytest.raises(SSEError):
        SSEParser(max_event_chars=10).feed(b"data: 123456\ndata: 123456\n")


def test_iter_events_holds_its_bound_across_chunks() -> None:
    chunks = [b"data: ok\n\n", *([b"x" * 8] * 4), b"\n\n"]
    events = iter_events(chunks, max_event_chars=16)
    assert next(events) == ServerSentEvent("ok")
    with pytest.raises(SSEError, match="longer than 16"):
        next(events)


def test_sse_resumed_parser_keeps_id_and_retry() -> None:
    parser = SSEParser(last_event_id="41", retry=500)
    assert parser.feed(b"data: x\n\n") == [ServerSentEvent("x", "message", "41")]
    assert parser.retry == 500


_field_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x00"), max_size=12
)
_events = st.lists(
    st.fixed_dictionaries(
        {"data": st.lists(_field_text, min_size=1, max_size=3)},
        optional={"event": _field_text.filter(bool), "id": _field_text, "retry": st.integers(0, 10**6)},
    ),
    max_size=5,
)


@settings(max_examples=200, deadline=None)
@given(_events, st.sampled_from(["\n", "\r", "\r\n"]), st.booleans(), st.data())
def test_sse_any_chunking_gives_the_same_events(
    events: list[dict[str, object]], eol: str, bom: bool, data: st.DataObject
) -> None:
    text = "\ufeff" if bom else ""
    expected = []
    last_id = ""
    for event in events:
        text += f":comment{eol}"
        if "event" in event:
            text += f"event: {event['event']}{eol}"
        if "id" in event:
            text += f"id: {event['id']}{eol}"
            last_id = str(event["id"])
        if "retry" in event:
            text += f"retry:{event['retry']}{eol}"
        lines = event["data"]
        assert isinstance(lines, list)
        text += "".join(f"data: {line}{eol}" for line in lines) + eol
        expected.append(
            ServerSentEvent("\n".join(lines), str(event.get("event", "message")), last_id, event.get("retry"))  # type: ignore[arg-type]
        )
    raw = text.encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    assert parse(raw) == expected
    assert parse(*chunks) == expected
    assert list(iter_events(chunks)) == expected
