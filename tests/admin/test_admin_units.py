"""The admin API's pure parts, without a server: the gates, the token book, event
visibility, secret scrubbing, time conversion, and the stream orders in the cases the
wire tests cannot provoke on demand (a call task that crashes or is cancelled)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import trio
import trio.testing

from actors.broadcast import Broadcast
from actors.connection.messages import ConnectionStatus
from actors.connection.states import State
from actors.protocol.session import ProgressReceived
from actors.redaction import Redactor
from actors.router.catalog import ServerView, Transition
from actors.router.envelope import Envelope, success
from actors.spec import ServerSpec
from supervisor.admin.sse import EventFeeds, StreamedCall, event_data, visible_to
from supervisor.admin.views import Clock, server_detail, server_summary
from supervisor.settings.model import Role, TokenGrant
from supervisor.web.auth import (
    Admitted,
    Denial,
    TokenBook,
    authority_is_loopback,
    check_request,
    origin_is_loopback,
)
from supervisor.web.roles import LOOPBACK_OPERATOR, Principal
from supervisor.web.scrubber import SecretScrubber

ALICE = Principal("a", Role.TENANT)


@pytest.mark.parametrize(
    ("authority", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.1:8765", True),
        ("127.9.8.7:1", True),
        ("localhost", True),
        ("LOCALHOST:80", True),
        ("[::1]", True),
        ("[::1]:8765", True),
        ("[0:0:0:0:0:0:0:1]:1", True),
        ("127.0.0.1:99999", False),
        ("127.1", False),
        ("::1", False),  # an IPv6 authority needs its brackets
        ("[::2]:1", False),
        ("evil.example", False),
        ("localhost.evil.example", False),
        ("127.0.0.1.evil.example", False),
        ("127.0.0.1@evil.example", False),
        ("evil.example@127.0.0.1", False),
        ("127.0.0.1:80/path", False),
        ("127.0.0.1 ", False),
        ("", False),
        ("0.0.0.0:1", False),
        ("10.0.0.1", False),
    ],
)
def test_loopback_authorities(authority: str, loopback: bool) -> None:
    assert authority_is_loopback(authority) is loopback


@pytest.mark.parametrize(
    ("origin", "loopback"),
    [
        ("http://127.0.0.1:3000", True),
        ("https://localhost", True),
        ("http://[::1]:1", True),
        ("HTTP://LOCALHOST:1", True),
        ("null", False),
        ("http://evil.example", False),
        ("http://localhost:1/", False),
        ("http://user@localhost", False),
        ("ws://localhost", False),
        ("file://", False),
        ("", False),
    ],
)
def test_loopback_origins(origin: str, loopback: bool) -> None:
    assert origin_is_loopback(origin) is loopback


def test_token_book_maps_tokens_to_principals_and_never_shows_them() -> None:
    grants = {"first-token-aaaa": TokenGrant("a"), "second-token-bbb": TokenGrant("b", Role.OPERATOR)}
    book = TokenBook(grants)
    assert book.enabled and not TokenBook({}).enabled
    assert book.principal_of("first-token-aaaa") == Principal("a", Role.TENANT)
    assert book.principal_of("second-token-bbb") == Principal("b", Role.OPERATOR)
    assert book.principal_of("first-token-aaa") is None and book.principal_of("") is None
    assert book.principal_of("first-token-aaaa\u00e9") is None
    assert "first" not in repr(book) and repr(book) == "TokenBook(<2 tokens>)"


def _check(**overrides: Any) -> Admitted | Denial:
    request: dict[str, Any] = {
        "public": False,
        "hosts": ["127.0.0.1:8765"],
        "origins": [],
        "authorizations": ["Bearer first-token-aaaa"],
        "tokens": TokenBook({"first-token-aaaa": TokenGrant("a")}),
        "bind_is_loopback": True,
    }
    request.update(overrides)
    return check_request(**request)


def test_gates_in_order_host_origin_token() -> None:
    assert _check() == Admitted(ALICE)
    # The Host gate comes first: even a valid token does not pass a foreign Host.
    host = _check(hosts=["evil.example"])
    assert isinstance(host, Denial) and host.status == 403
    assert _check(hosts=["evil.example"], bind_is_loopback=False) == Admitted(ALICE)
    assert isinstance(denied := _check(hosts=[]), Denial) and denied.status == 403
    assert isinstance(denied := _check(hosts=["localhost", "localhost"]), Denial) and denied.status == 403
    # Then Origin, also for public routes and also without tokens.
    for origins in (["null"], ["http://evil.example"], ["http://localhost", "http://localhost"]):
        denial = _check(origins=origins, public=True, tokens=TokenBook({}))
        assert isinstance(denial, Denial) and denial.status == 403, origins
    assert _check(origins=["http://localhost:5173"]) == Admitted(ALICE)
    # Then the token.
    for authorizations in ([], ["Bearer"], ["Bearer wrong-token"], ["Basic first-token-aaaa"], ["x", "y"]):
        denial = _check(authorizations=authorizations)
        assert isinstance(denial, Denial) and denial.status == 401, authorizations
        assert denial.headers["WWW-Authenticate"].startswith("Bearer")
    assert _check(authorizations=["bearer   first-token-aaaa"]) == Admitted(ALICE)
    assert _check(authorizations=[], public=True) == Admitted(None)
    assert _check(authorizations=["Bearer wrong"], public=True) == Admitted(None)
    # Without tokens, a loopback client is the operator; any other is refused.
    assert _check(authorizations=[], tokens=TokenBook({})) == Admitted(LOOPBACK_OPERATOR)
    remote = {"tokens": TokenBook({}), "bind_is_loopback": False, "hosts": ["10.0.0.1:8765"]}
    assert _check(**remote, client_is_loopback=True) == Admitted(LOOPBACK_OPERATOR)
    assert isinstance(denied := _check(**remote, client_is_loopback=False), Denial) and denied.status == 403


def test_event_visibility_fails_closed() -> None:
    assert visible_to({"type": "state", "server": "x"}, "a")
    assert visible_to({"type": "epoch", "epoch": 3}, "a")
    assert visible_to({"type": "call", "tenant": "a"}, "a")
    assert not visible_to({"type": "call", "tenant": "b"}, "a")
    assert not visible_to({"type": "approval", "tenant": "b"}, "a")
    assert not visible_to({"type": "call"}, "a")  # a call event that names no tenant
    assert not visible_to({"type": "state", "tenant": "b"}, "a")
    assert not visible_to({"type": "something-new"}, "a")
    # The operator's view (None): every tenant's events, and still nothing unknown.
    assert visible_to({"type": "call", "tenant": "b"}, None)
    assert visible_to({"type": "state", "server": "x"}, None)
    assert not visible_to({"type": "call"}, None) and not visible_to({"type": "something-new"}, None)


def test_scrubber_masks_exact_secrets_everywhere_and_nothing_else() -> None:
    scrubber = SecretScrubber(["sekrit-value-1", "abc", "sekrit-value-1-longer"])
    value = {
        "text": "a sekrit-value-1-longer and sekrit-value-1",
        "sekrit-value-1": ["sekrit-value-1", 3, None, {"max_tokens": 5, "abc": "abc"}],
    }
    assert scrubber.scrub(value) == {
        "text": "a *** and ***",
        "***": ["***", 3, None, {"max_tokens": 5, "abc": "abc"}],  # "abc" is too short to mask
    }
    assert "sekrit" not in repr(scrubber)
    assert SecretScrubber([]).scrub(value) is value


def _view(**fields: Any) -> ServerView:
    send, _ = trio.open_memory_channel[Any](1)
    return ServerView("srv", ServerSpec("srv", command=("x",)), send, **fields)


def test_clock_and_server_shapes() -> None:
    clock = Clock(trio_now=100.0, unix_now=1_700_000_000.0)
    assert clock.unix(90.0) == 1_699_999_990.0 and clock.unix(130.5) == 1_700_000_030.5
    redactor = Redactor(["the-secret-1234"])
    never = server_summary(_view(), clock, redactor)
    assert never["since"] is None and never["retry_in_s"] is None and never["state"] == "idle"
    backoff = _view(
        state=State.BACKOFF,
        since=95.0,
        attempt=2,
        next_retry_at=104.5,
        last_error="died: the-secret-1234",
        last_error_at=95.0,
        transitions=(Transition(95.0, State.BACKOFF, State.STEADY, "died: the-secret-1234"),),
    )
    status = ConnectionStatus(("the-secret-1234 was here", "token=abc123"), 0, "pid=1")
    detail = server_detail(backoff, status, clock, redactor)
    assert detail["since"] == 1_699_999_995.0 and detail["attempt"] == 2
    assert detail["retry_in_s"] == 4.5 and detail["next_retry_at"] == 1_700_000_004.5
    assert detail["last_error"] == "died: ***" and detail["transitions"][0]["reason"] == "died: ***"
    assert detail["last_error_at"] == 1_699_999_995.0 and detail["last_error_age_s"] == 5.0
    assert never["last_error_at"] is None and never["last_error_age_s"] is None
    assert detail["stderr_tail"] == ["*** was here", "token=***"]
    overdue = server_summary(_view(state=State.BACKOFF, next_retry_at=99.0), clock, redactor)
    assert overdue["retry_in_s"] == 0.0
    assert server_detail(backoff, None, clock, redactor)["stderr_tail"] is None


async def test_event_feed_hello_heartbeat_filtering_and_close(autojump_clock: trio.testing.MockClock) -> None:
    events: Broadcast[Mapping[str, Any]] = Broadcast()
    feeds = EventFeeds(events)
    stream = feeds.stream("a", lambda: 7, lambda value: value, heartbeat_s=15)
    assert await stream.__anext__() == b'event: hello\ndata: {"epoch":7}\n\n'
    start = trio.current_time()
    assert await stream.__anext__() == b": keepalive\n\n"
    assert trio.current_time() - start == pytest.approx(15)
    events.publish({"type": "call", "tenant": "b", "tool": "theirs"})
    events.publish({"type": "call", "tenant": "a", "tool": "mine"})
    assert await stream.__anext__() == b'event: call\ndata: {"tenant":"a","tool":"mine"}\n\n'
    events.publish({"type": "epoch", "epoch": 8})
    assert await stream.__anext__() == b'event: epoch\ndata: {"epoch":8}\n\n'

    async def close_later() -> None:
        await trio.sleep(1)
        feeds.close()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(close_later)
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()
    assert events.subscribers == 0 and feeds.closed


class _FakeTurn:
    """Stands in for a Turn: sends progress, then answers, fails or hangs."""

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour

    async def call(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        progress: trio.MemorySendChannel[ProgressReceived],
        request_id: str,
        raw_request: bytes | None = None,
    ) -> Envelope:
        progress.send_nowait(ProgressReceived("t", 1, 2, "half"))
        if self.behaviour == "crash":
            raise RuntimeError("a bug in the call path")
        if self.behaviour == "hang":
            await trio.sleep_forever()
        return success(tool, [{"type": "text", "text": "fine"}], None, 1, 1000)


@pytest.mark.parametrize("behaviour", ["answer", "crash", "hang"])
async def test_streamed_call_order_holds_whatever_the_call_does(
    behaviour: str, autojump_clock: trio.testing.MockClock
) -> None:
    call = StreamedCall(_FakeTurn(behaviour), "srv_tool", {}, "rid-1")  # type: ignore[arg-type]
    frames: list[bytes] = []

    async def read() -> None:
        frames.extend([frame async for frame in call.stream(lambda value: value)])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call.run)
        nursery.start_soon(read)
        await trio.sleep(5)
        call.scope.cancel()  # the shutdown's last resort, for the one that hangs
    names = [frame.split(b"\n", 1)[0] for frame in frames if not frame.startswith(b":")]
    assert names == [
        b"event: request_received",
        b"event: progress",
        b"event: result",
        b"event: done",
    ], frames
    result = next(frame for frame in frames if frame.startswith(b"event: result"))
    expected = {"answer": b'"ok":true', "crash": b'"code":"server_error"', "hang": b'"code":"cancelled"'}
    assert expected[behaviour] in result
    assert b"a bug in the call path" not in result  # internals stay in the log


async def test_an_abandoned_stream_cancels_its_call(autojump_clock: trio.testing.MockClock) -> None:
    """The client left: cancel by request id first (audited, the server told); a call
    that ignores that (waiting for an approval) is cancelled outright after a grace."""
    cancelled: list[str] = []
    turn: Any = _FakeTurn("hang")
    call = StreamedCall(turn, "srv_tool", {}, "rid-2", lambda: cancelled.append("rid-2"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(call.run)
        stream = call.stream(lambda value: value)
        assert (await stream.__anext__()).startswith(b"event: request_received")
        await stream.aclose()  # what Quart does when the client has gone
        start = trio.current_time()
    assert cancelled == ["rid-2"]
    assert trio.current_time() - start == pytest.approx(2.0)  # ABANDON_GRACE_S
    assert call.envelope is None


def test_an_epoch_event_tells_only_the_operator_how_many_tools_every_server_has() -> None:
    """A tenant's exposure lists may hide tools: the count of all of them is not its."""
    epoch = {"type": "epoch", "epoch": 3, "tools": 12}
    assert event_data(epoch, None) == {"epoch": 3, "tools": 12}
    assert event_data(epoch, "alice") == {"epoch": 3}
    call = {"type": "call", "tenant": "alice", "tools": 1}
    assert event_data(call, "alice") == {"tenant": "alice", "tools": 1}
