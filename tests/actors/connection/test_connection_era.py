"""Era negotiation in ``handshake``: the connection actor over a scripted server of
each era (``tests/support/fakes.py``), on Trio's MockClock (autojump)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from actors.connection.messages import CallFailed, CallSucceeded, Command, Control, StateChanged
from actors.connection.states import State
from actors.protocol.era import Era
from actors.protocol.messages import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, Request
from actors.spec import Start
from tests.actors.connection.test_connection_actor import hang_handler, running
from tests.support.fakes import MODERN_DISCOVER, FakeServer

STARTING = [State.RESOLVE, State.AUTHENTICATE, State.HANDSHAKE, State.LIST, State.STEADY]


def settled(h: object) -> list[str | None]:
    published = h.published  # type: ignore[attr-defined]
    return [m.protocol_version for m in published if isinstance(m, StateChanged) and m.state is State.LIST]


async def test_a_handshake_era_server_gets_initialize_after_method_not_found(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer()  # answers server/discover with -32601, as SDK 1.x servers do
    async with running(server) as h:
        start = trio.current_time()
        await h.wait_state(State.STEADY)
        assert trio.current_time() - start < 0.1  # no probe timeout waited for
        assert h.states() == STARTING
        assert server.methods()[:3] == ["server/discover", "initialize", "tools/list"]
        assert server.notifications("notifications/initialized")
        assert settled(h) == ["2025-11-25"]
        assert h.actor.era is Era.HANDSHAKE
        assert isinstance(await h.call(), CallSucceeded)


async def test_a_per_request_era_server_gets_no_initialize_and_meta_on_every_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer()
    server.discover = MODERN_DISCOVER
    async with running(server, start=Start.LAZY) as h:
        outcome = await h.call("echo", {"text": "hi"})
        assert isinstance(outcome, CallSucceeded)
        assert h.states() == STARTING  # the same states as the handshake era
        assert server.methods() == ["server/discover", "tools/list", "subscriptions/listen", "tools/call"]
        assert not server.notifications("notifications/initialized")
        for request in server.received:
            assert isinstance(request, Request) and isinstance(request.params, dict)
            meta = request.params["_meta"]
            assert meta[META_PROTOCOL_VERSION] == "2026-07-28"
            assert META_CLIENT_CAPABILITIES in meta
        assert settled(h) == ["2026-07-28"]
        assert h.actor.era is Era.PER_REQUEST


async def test_a_silent_probe_falls_back_after_half_the_init_timeout_on_the_same_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``auto`` waits for ``server/discover`` half of the init timeout (it used to be a
    fixed 2 s), then sends ``initialize``, which gets the other half."""
    server = FakeServer()
    server.discover = "silent"
    async with running(server, init_timeout_s=10.0) as h:
        start = trio.current_time()
        await h.wait_state(State.STEADY)
        assert 5.0 <= trio.current_time() - start < 5.5
        assert len(server.connect_times) == 1
        assert server.methods()[:2] == ["server/discover", "initialize"]
        assert h.states() == STARTING


async def test_a_server_that_closes_under_the_probe_is_opened_again_for_initialize(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer()
    server.discover = "close"
    async with running(server, start=Start.LAZY) as h:
        outcome = await h.call()  # parked through the probe and the respawn
        assert isinstance(outcome, CallSucceeded)
        assert len(server.connect_times) == 2
        assert h.states() == STARTING  # no backoff, no second resolve
        assert server.sessions[1].server is server
        assert server.methods() == ["server/discover", "initialize", "tools/list", "tools/call"]


async def test_a_probe_answered_after_initialize_was_refused_still_settles_the_era(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """On a machine too busy to read the ``server/discover`` answer within half of the
    init timeout, ``initialize`` follows and a server of the new era refuses it at
    once; the probe's answer, read late, settles the era (the connection used to fail
    with "server refused initialize" and go to backoff)."""
    server = FakeServer()
    server.discover = MODERN_DISCOVER
    server.discover_delay = 6.0
    async with running(server, init_timeout_s=10.0) as h:
        start = trio.current_time()
        await h.wait_state(State.STEADY)
        assert 6.0 <= trio.current_time() - start < 6.5
        assert h.states() == STARTING  # no backoff
        assert server.methods()[:3] == ["server/discover", "initialize", "tools/list"]
        assert settled(h) == ["2026-07-28"]


async def test_a_server_that_answers_initialize_with_the_per_request_era_is_spoken_to_in_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The probe went unanswered (a busy machine), ``initialize`` followed, and the
    server answered it with 2026-07-28, as the conformance suite's mock servers of that
    era do: that connection speaks the per-request era (it used to fail with "server
    answered protocol version '2026-07-28'", and the server went to backoff)."""
    server = FakeServer()
    server.discover = "silent"
    server.protocol_version = "2026-07-28"
    async with running(server, init_timeout_s=10.0) as h:
        outcome = await h.call("echo", {"text": "hi"})
        assert isinstance(outcome, CallSucceeded)
        assert h.states() == STARTING  # no backoff
        assert server.methods()[:3] == ["server/discover", "initialize", "tools/list"]
        assert not server.notifications("notifications/initialized")
        [call] = server.calls()
        assert isinstance(call.params, dict)
        assert call.params["_meta"][META_PROTOCOL_VERSION] == "2026-07-28"
        assert settled(h) == ["2026-07-28"]
        assert h.actor.era is Era.PER_REQUEST


async def test_pinned_handshake_sends_no_probe(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer()
    server.discover = MODERN_DISCOVER
    async with running(server, protocol="2025-11-25") as h:
        await h.wait_state(State.STEADY)
        assert "server/discover" not in server.methods()
        assert settled(h) == ["2025-11-25"]


async def test_pinned_per_request_era_fails_against_a_handshake_server(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer()
    async with running(server, protocol="2026-07-28") as h:
        backoff = await h.wait_state(State.BACKOFF)
        assert backoff.reason is not None
        assert "set to protocol 2026-07-28" in backoff.reason and "Method not found" in backoff.reason
        assert "initialize" not in server.methods()


async def test_pinned_per_request_era_waits_out_a_slow_start_inside_the_init_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Pinned, the probe is the handshake: a server that answers ``server/discover``
    well after the probe timeout of ``auto`` (a spawn on a busy machine) is adopted,
    not failed (it used to go to backoff, and a turn saw none of its tools)."""
    server = FakeServer()
    server.discover = MODERN_DISCOVER
    server.start_delay = 6.0
    async with running(server, protocol="2026-07-28", init_timeout_s=60.0) as h:
        start = trio.current_time()
        await h.wait_state(State.STEADY)
        assert trio.current_time() - start < 10.0  # the answer's delay, well inside the 60 s
        assert h.states() == STARTING  # no backoff
        assert settled(h) == ["2026-07-28"]


async def test_pinned_per_request_era_says_so_when_server_discover_never_answers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Pinned and silent: the probe's own verdict names the pin, not the init timeout."""
    server = FakeServer()
    server.discover = "silent"
    async with running(server, protocol="2026-07-28", init_timeout_s=60.0) as h:
        backoff = await h.wait_state(State.BACKOFF)
        assert backoff.reason is not None
        reason = backoff.reason
        assert "set to protocol 2026-07-28" in reason and "did not answer in time" in reason, reason


@pytest.mark.parametrize(
    ("start_s", "methods"),
    [
        (3.0, ["server/discover", "tools/list"]),
        (6.0, ["server/discover", "initialize", "tools/list"]),
    ],
    ids=["inside-the-probe", "after-the-probe"],
)
async def test_a_per_request_server_slow_to_start_is_adopted(
    autojump_clock: trio.testing.MockClock, start_s: float, methods: list[str]
) -> None:
    """``auto`` with a 10 s init timeout: the probe waits 5 s. A per-request server that
    answers ``server/discover`` after 3 s (its start on a busy machine, as the
    conformance suite run in parallel makes it) is adopted by the probe itself: no
    ``initialize`` (with the old fixed 2 s probe it got one, and had to refuse it).
    One that answers only after 6 s gets ``initialize`` at 5 s; once up, it answers the
    probe (which locks its connection to the new era) and refuses ``initialize`` with
    -32022. The probe's late answer settles the era: the server is adopted on the same
    connection (it used to go to backoff and, as slow on every try, never came up)."""
    server = FakeServer()
    server.discover = MODERN_DISCOVER
    server.start_delay = start_s
    async with running(server, init_timeout_s=10.0) as h:
        start = trio.current_time()
        await h.wait_state(State.STEADY)
        assert start_s <= trio.current_time() - start < start_s + 0.5
        assert h.states() == STARTING  # no backoff
        assert len(server.connect_times) == 1
        assert server.methods()[: len(methods)] == methods
        assert settled(h) == ["2026-07-28"]
        assert h.actor.era is Era.PER_REQUEST
        assert isinstance(await h.call(), CallSucceeded)


async def test_the_era_found_is_tried_first_next_time(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer()
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        await h.mailbox.send(Command(Control.RESTART))
        await h.wait_state(State.STEADY, count=2)
        assert server.methods().count("server/discover") == 1  # the restart went straight to initialize
        assert server.methods().count("initialize") == 2


async def test_a_remembered_handshake_era_that_fails_probes_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer()
    server.discover = MODERN_DISCOVER
    server.die_during_init = True  # the server was upgraded: initialize now fails
    async with running(server, known_era=Era.HANDSHAKE) as h:
        await h.wait_state(State.BACKOFF)
        assert server.methods() == ["initialize"]
        server.die_during_init = False
        await h.wait_state(State.STEADY)
        assert server.methods()[1:3] == ["server/discover", "tools/list"]
        assert h.actor.era is Era.PER_REQUEST


async def test_a_per_request_server_killed_mid_call_answers_every_call_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer()
    server.discover = MODERN_DISCOVER
    server.call_handler = hang_handler(trio.Event())
    async with running(server, call_timeout_s=30.0) as h:
        await h.wait_state(State.STEADY)
        replies = [await h.send_call() for _ in range(3)]
        await trio.sleep(0.1)  # virtual time: the server reads all three
        assert len(server.calls()) == 3
        killed = trio.current_time()
        await server.current.close()
        for reply in replies:
            outcome = await reply.receive()
            assert isinstance(outcome, CallFailed) and outcome.code == "unavailable"
        assert trio.current_time() - killed < 1.0  # well before the 30 s call timeout
