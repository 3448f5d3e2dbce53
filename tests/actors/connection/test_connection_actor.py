"""Connection actor over a scripted fake server, on Trio's MockClock (autojump)."""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from actors.connection import retry
from actors.connection.actor import ConnectionActor
from actors.connection.messages import (
    CallFailed,
    CallOutcome,
    CallSucceeded,
    CallTool,
    CancelCall,
    Command,
    ConnectionMessage,
    Control,
    Published,
    ServerListed,
    StateChanged,
)
from actors.connection.states import State
from actors.log_events import event_name, record_fields
from actors.protocol.messages import Request, Response
from actors.protocol.payloads import structure_call_result
from actors.protocol.session import ProgressReceived
from actors.spec import ServerSpec, Start
from tests.support.fakes import FakeServer, FakeSession

# Every test takes ``autojump_clock``: pytest-trio runs a test on the clock it is given
# as an argument, so timeouts and backoff schedules run on virtual time.


@attrs.define
class Harness:
    actor: ConnectionActor
    mailbox: trio.MemorySendChannel[ConnectionMessage]
    published: list[Published] = attrs.field(factory=list)
    changed: trio.Event = attrs.field(factory=trio.Event)
    last_reply: Any = None

    async def collect(self, receive: trio.MemoryReceiveChannel[Published]) -> None:
        async for message in receive:
            self.published.append(message)
            self.changed.set()
            self.changed = trio.Event()

    def states(self) -> list[State]:
        return [m.state for m in self.published if isinstance(m, StateChanged)]

    async def wait_for(self, predicate: Callable[[Published], bool], count: int = 1) -> Published:
        with trio.fail_after(100_000):
            while True:
                matches = [m for m in self.published if predicate(m)]
                if len(matches) >= count:
                    return matches[count - 1]
                await self.changed.wait()

    async def wait_state(self, state: State, count: int = 1) -> StateChanged:
        message = await self.wait_for(lambda m: isinstance(m, StateChanged) and m.state is state, count)
        assert isinstance(message, StateChanged)
        return message

    async def send_call(
        self, tool: str = "echo", arguments: dict[str, Any] | None = None, progress: Any = None
    ) -> trio.MemoryReceiveChannel[CallOutcome]:
        reply, answers = trio.open_memory_channel[CallOutcome](1)
        await self.mailbox.send(CallTool(tool, arguments or {}, reply, progress))
        self.last_reply = reply
        return answers

    async def call(self, tool: str = "echo", arguments: dict[str, Any] | None = None) -> CallOutcome:
        answers = await self.send_call(tool, arguments)
        return await answers.receive()


@asynccontextmanager
async def running(server: FakeServer, **spec_options: Any) -> AsyncIterator[Harness]:
    spec_options.setdefault("start", Start.EAGER)
    restart = spec_options.pop("restart", True)
    server_requests = spec_options.pop("server_requests", None)
    known_era = spec_options.pop("known_era", None)
    draw = spec_options.pop("draw", retry.draw)
    log_sink, wanted_logs = spec_options.pop("log_sink", None), spec_options.pop("wanted_logs", None)
    spec = ServerSpec(name="fake", command=("fake",), **spec_options)
    send, receive = trio.open_memory_channel[ConnectionMessage](256)
    publish, published = trio.open_memory_channel[Published](10_000)
    actor = ConnectionActor(
        spec,
        server.connector,
        receive,
        publish,
        restart=restart,
        server_requests=server_requests,
        client_capabilities={"elicitation": {}} if server_requests else None,
        known_era=known_era,
        log_sink=log_sink,
        wanted_logs=wanted_logs,
        draw=draw,
    )
    harness = Harness(actor, send)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(harness.collect, published)
        await nursery.start(actor.run)
        yield harness
        nursery.cancel_scope.cancel()


def hang_handler(release: trio.Event) -> Any:
    async def handler(session: FakeSession, request: Request) -> dict[str, Any] | None:
        await release.wait()
        return {"content": [{"type": "text", "text": "done"}]}

    return handler


async def never_answer(session: FakeSession, request: Request) -> dict[str, Any] | None:
    await trio.sleep_forever()
    raise AssertionError


async def test_full_state_sequence_to_steady(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer()
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        assert h.states() == [State.RESOLVE, State.AUTHENTICATE, State.HANDSHAKE, State.LIST, State.STEADY]
        listed = [m for m in h.published if isinstance(m, ServerListed)]
        assert [t.name for t in listed[0].tools] == ["echo"]
        assert server.notifications("notifications/initialized")


async def test_lazy_server_stays_idle_until_a_call_needs_it(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer()
    async with running(server, start=Start.LAZY) as h:
        await trio.sleep(30)
        assert server.connect_times == [] and h.actor.state is State.IDLE
        outcome = await h.call("echo", {"text": "hi"})
        assert isinstance(outcome, CallSucceeded)
        assert outcome.result.content[0]["text"] == '{"text":"hi"}'


async def test_reconnect_schedule_1_2_5_15_60_60(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer()
    deaths: list[float] = []
    async with running(server, reconnect_jitter=0.0) as h:  # no jitter: exactly the schedule
        for n in range(1, 8):
            await h.wait_state(State.STEADY, n)
            deaths.append(trio.current_time())
            await server.current.close()
            await h.wait_state(State.BACKOFF, n)
        await h.wait_state(State.STEADY, 8)
    delays = [round(server.connect_times[i + 1] - deaths[i], 6) for i in range(7)]
    assert delays == [1, 2, 5, 15, 60, 60, 60]
    backoffs = [m for m in h.published if isinstance(m, StateChanged) and m.state is State.BACKOFF]
    assert [m.attempt for m in backoffs] == [1, 2, 3, 4, 5, 6, 7]
    assert all(m.next_retry_at is not None for m in backoffs)


async def test_schedule_resets_after_60_s_steady(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer()
    deaths: list[float] = []
    async with running(server, reconnect_jitter=0.0) as h:
        for n in range(1, 4):
            await h.wait_state(State.STEADY, n)
            deaths.append(trio.current_time())
            await server.current.close()
        await h.wait_state(State.STEADY, 4)
        await trio.sleep(61)
        deaths.append(trio.current_time())
        await server.current.close()
        await h.wait_state(State.STEADY, 5)
    delays = [round(server.connect_times[i + 1] - deaths[i], 6) for i in range(4)]
    assert delays == [1, 2, 5, 1]


async def reconnect_delays(seed: int, deaths: int = 6) -> tuple[list[float], list[StateChanged]]:
    """How long after each of ``deaths`` deaths a server (default jitter) came back,
    its draws from a generator seeded with ``seed``; and the backoffs it announced."""
    server = FakeServer()
    died: list[float] = []
    async with running(server, draw=random.Random(seed).random) as h:
        for n in range(1, deaths + 1):
            await h.wait_state(State.STEADY, n)
            died.append(trio.current_time())
            await server.current.close()
            await h.wait_state(State.BACKOFF, n)
        await h.wait_state(State.STEADY, deaths + 1)
    backoffs = [m for m in h.published if isinstance(m, StateChanged) and m.state is State.BACKOFF]
    return [server.connect_times[i + 1] - died[i] for i in range(deaths)], backoffs


async def test_retries_are_jittered_within_a_tenth_and_shown_as_retry_in_s(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    delays, backoffs = await reconnect_delays(seed=7)
    for delay, base in zip(delays, (1, 2, 5, 15, 60, 60), strict=True):
        assert 0.9 * base <= delay <= 1.1 * base and abs(delay - base) > 1e-6
    # What the admin API (next_retry_at) and the log (retry_in_s) say is the delay kept.
    assert [m.next_retry_at - m.at for m in backoffs] == pytest.approx(delays, abs=1e-6)  # type: ignore[operator]
    lines = [record_fields(r) for r in caplog.records if event_name(r) == "state"]
    assert [f["retry_in_s"] for f in lines if f["state"] == "backoff"] == pytest.approx(delays, abs=1e-3)
    assert (await reconnect_delays(seed=7))[0] == pytest.approx(delays, abs=1e-6), "seeded: the same delays"


async def test_servers_that_fail_together_retry_apart(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retry, "GENERATOR", random.Random(3))  # the process's draws, seeded
    servers = [FakeServer() for _ in range(4)]
    async with contextlib.AsyncExitStack() as stack:
        actors = [await stack.enter_async_context(running(server)) for server in servers]
        for h in actors:
            await h.wait_state(State.STEADY)
        for server in servers:  # a network blip: they all fail in one instant
            await server.current.close()
        for h in actors:
            await h.wait_state(State.STEADY, 2)
    retried = [server.connect_times[1] for server in servers]
    assert len({round(at, 3) for at in retried}) == len(servers), retried


async def test_call_against_down_server_is_answered_at_once(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer()
    server.fail_connect = True
    async with running(server) as h:
        backoff = await h.wait_state(State.BACKOFF)
        assert backoff.reason is not None and "not found on PATH" in backoff.reason
        before = trio.current_time()
        outcome = await h.call()
        assert outcome == CallFailed("unavailable", "mcp server fake is unavailable")
        assert trio.current_time() == before


async def test_in_flight_calls_fail_at_once_when_the_server_dies(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer()
    server.call_handler = never_answer
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        pending = [await h.send_call() for _ in range(5)]
        await trio.sleep(1)
        died_at = trio.current_time()
        await server.current.close()
        outcomes = [await p.receive() for p in pending]
        assert trio.current_time() == died_at
        assert (
            outcomes
            == [CallFailed("unavailable", "MCP server stopped responding during tools/call echo")] * 5
        )
        # and the server comes back on schedule; later calls succeed
        await h.wait_state(State.STEADY, 2)
        server.call_handler = FakeServer().call_handler
        assert isinstance(await h.call(), CallSucceeded)


async def test_call_timeout_sends_notifications_cancelled(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer()
    server.call_handler = never_answer
    async with running(server, call_timeout_s=5.0) as h:
        await h.wait_state(State.STEADY)
        start = trio.current_time()
        outcome = await h.call()
        assert isinstance(outcome, CallFailed) and outcome.code == "timeout"
        assert "within 5 s" in outcome.message
        assert trio.current_time() - start == pytest.approx(5.0)
        await trio.sleep(0.1)
        cancelled = server.notifications("notifications/cancelled")
        assert [n.params["requestId"] for n in cancelled] == [server.calls()[0].id]  # type: ignore[index,call-overload]
        # the server answered ping, so it is healthy and stays connected
        assert h.actor.state is State.STEADY


async def test_progress_extends_the_deadline_up_to_the_cap(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer()

    async def slow_with_progress(session: FakeSession, request: Request) -> dict[str, Any] | None:
        token = request.params["_meta"]["progressToken"]  # type: ignore[index,call-overload]
        for step in range(1, 100):
            await trio.sleep(4)
            await session.notify("notifications/progress", {"progressToken": token, "progress": step})
            if request.params["arguments"].get("steps") == step:  # type: ignore[index,call-overload]
                return {"content": [{"type": "text", "text": f"{step} steps"}]}
        raise AssertionError

    server.call_handler = slow_with_progress
    async with running(server, call_timeout_s=5.0, max_call_s=30.0) as h:
        await h.wait_state(State.STEADY)
        progress_send, progress_receive = trio.open_memory_channel[ProgressReceived](100)
        start = trio.current_time()
        answers = await h.send_call("work", {"steps": 3}, progress_send)
        outcome = await answers.receive()
        assert isinstance(outcome, CallSucceeded), outcome
        assert trio.current_time() - start == pytest.approx(12.0)
        assert [progress_receive.receive_nowait().progress for _ in range(3)] == [1, 2, 3]
        # progress forever: the absolute cap ends it
        start = trio.current_time()
        outcome = await h.call("work", {"steps": 1000})
        assert isinstance(outcome, CallFailed) and outcome.code == "timeout"
        assert trio.current_time() - start == pytest.approx(30.0)


async def test_hung_server_is_restarted_after_a_timeout(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer()
    server.call_handler = never_answer
    server.answer_ping = False
    async with running(server, call_timeout_s=5.0, ping_timeout_s=3.0) as h:
        await h.wait_state(State.STEADY)
        outcome = await h.call()
        assert isinstance(outcome, CallFailed) and outcome.code == "timeout"
        backoff = await h.wait_state(State.BACKOFF)
        assert backoff.reason is not None and "did not answer ping within 3 s" in backoff.reason
        await h.wait_state(State.STEADY, 2)
        assert len(server.connect_times) == 2


async def test_list_changed_relists_while_a_call_is_in_flight(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer()
    release = trio.Event()
    server.call_handler = hang_handler(release)
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        answers = await h.send_call()
        server.tools.append({"name": "new_tool", "description": "Fresh", "inputSchema": {"type": "object"}})
        await server.current.notify("notifications/tools/list_changed")
        listed = await h.wait_for(lambda m: isinstance(m, ServerListed), 2)
        assert isinstance(listed, ServerListed) and listed.generation == 2
        assert [t.name for t in listed.tools] == ["echo", "new_tool"]
        await h.wait_state(State.STEADY, 2)
        assert h.states()[-2:] == [State.LIST, State.STEADY]
        release.set()
        assert isinstance(await answers.receive(), CallSucceeded)


async def test_a_burst_of_list_changed_ends_in_the_newest_list(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer()
    server.list_delay = 0.5
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        for n in range(5):
            server.tools.append({"name": f"t{n}", "inputSchema": {"type": "object"}})
            await server.current.notify("notifications/tools/list_changed")
            await trio.sleep(0.1)
        await trio.sleep(10)
        listed = [m for m in h.published if isinstance(m, ServerListed)]
        assert len(listed[-1].tools) == 6
        assert server.list_calls <= 4  # coalesced, not one listing per notification
        assert h.actor.state is State.STEADY


async def test_init_timeout_fails_the_start_and_answers_parked_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer()
    server.init_delay = 1000
    async with running(server, start=Start.LAZY, init_timeout_s=60.0) as h:
        start = trio.current_time()
        outcome = await h.call()
        assert outcome == CallFailed("unavailable", "mcp server fake is unavailable")
        assert trio.current_time() - start == pytest.approx(60.0)
        backoff = await h.wait_state(State.BACKOFF)
        assert backoff.reason == "mcp server fake did not finish initialize and tools/list within 60000 ms"


async def test_server_exiting_during_initialize_fails_only_itself(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer()
    server.die_during_init = True
    async with running(server) as h:
        backoff = await h.wait_state(State.BACKOFF)
        assert backoff.reason is not None and "closed the connection" in backoff.reason
        server.die_during_init = False
        await h.wait_state(State.STEADY)


async def test_unsupported_protocol_version_fails_the_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer()
    server.protocol_version = "1999-01-01"
    async with running(server) as h:
        backoff = await h.wait_state(State.BACKOFF)
        assert backoff.reason is not None and "'1999-01-01'" in backoff.reason


async def test_garbage_from_the_server_fails_the_connection_not_the_actor(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer()
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        await server.current.stream.send_all(b"this is not json\n")
        backoff = await h.wait_state(State.BACKOFF)
        assert backoff.reason is not None and "broke the protocol" in backoff.reason
        await h.wait_state(State.STEADY, 2)


async def test_arguments_json_cannot_carry_fail_that_call_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Messages are encoded by the write path: the one that cannot be is left out and its
    # caller answered; a call sent in the same write still reaches the server.
    server = FakeServer()
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        bad = await h.send_call("echo", {1: "a key that is not a string"})  # type: ignore[dict-item]
        outcome = await bad.receive()
        assert isinstance(outcome, CallFailed) and outcome.code == "invalid_arguments"
        assert outcome.message.startswith("invalid arguments for echo: message cannot be encoded as JSON")
        reply, answers = trio.open_memory_channel[CallOutcome](1)
        bad_reply, bad_answers = trio.open_memory_channel[CallOutcome](1)
        h.mailbox.send_nowait(CallTool("echo", {"n": 2**70}, bad_reply))  # past 64 bits
        h.mailbox.send_nowait(CallTool("echo", {"text": "fine"}, reply))
        assert isinstance(await bad_answers.receive(), CallFailed)
        assert await answers.receive() == CallSucceeded(
            structure_call_result({"content": [{"type": "text", "text": '{"text":"fine"}'}]})
        )
        assert [c.params["arguments"] for c in server.calls()] == [{"text": "fine"}]  # type: ignore[index, call-overload]
        assert h.states()[-1] is State.STEADY


async def test_cancel_call_tells_the_server(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer()
    server.call_handler = never_answer
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        answers = await h.send_call()
        await trio.sleep(1)
        await h.mailbox.send(CancelCall(h.last_reply))
        outcome = await answers.receive()
        assert outcome == CallFailed("cancelled", "tools/call echo was cancelled")
        await trio.sleep(0.1)
        assert len(server.notifications("notifications/cancelled")) == 1


async def test_stop_goes_through_teardown_and_closes_the_mailbox(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer()
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        await h.mailbox.send(Command(Control.STOP))
        await h.wait_state(State.STOPPED)
        assert h.states()[-2:] == [State.TEARDOWN, State.STOPPED]
        await trio.sleep(1)
        with pytest.raises(trio.BrokenResourceError):
            await h.mailbox.send(Command(Control.STOP))


async def test_a_stop_that_comes_with_the_first_call_ends_the_start(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The call orders an attempt, the stop ends it before it began: the actor stops.
    server = FakeServer()
    async with running(server, start=Start.LAZY) as h:
        reply, answers = trio.open_memory_channel[CallOutcome](1)
        h.mailbox.send_nowait(CallTool("echo", {}, reply))
        h.mailbox.send_nowait(Command(Control.STOP))
        with trio.fail_after(1):
            await h.wait_state(State.STOPPED)
            assert await answers.receive() == CallFailed("unavailable", "mcp server fake is unavailable")
        assert h.states() == [State.RESOLVE, State.TEARDOWN, State.STOPPED]


async def test_a_call_after_a_start_was_disabled_is_refused(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer()
    server.init_delay = 1000
    async with running(server, start=Start.LAZY, init_timeout_s=60.0) as h:
        first = await h.send_call()
        await h.wait_state(State.HANDSHAKE)
        await h.mailbox.send(Command(Control.DISABLE))
        await h.wait_state(State.DISABLED)
        assert await first.receive() == CallFailed("unavailable", "mcp server fake is unavailable")
        with trio.fail_after(1):  # it used to wait, parked, until the next start
            assert await h.call() == CallFailed("unavailable", "mcp server fake is unavailable")


async def test_disable_then_enable_then_restart(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer()
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        await h.mailbox.send(Command(Control.DISABLE))
        await h.wait_state(State.DISABLED)
        assert await h.call() == CallFailed("unavailable", "mcp server fake is unavailable")
        await h.mailbox.send(Command(Control.ENABLE))
        await h.wait_state(State.STEADY, 2)  # eager: enabled means connected again
        await h.mailbox.send(Command(Control.RESTART))
        await h.wait_state(State.STEADY, 3)
        assert len(server.connect_times) == 3


async def test_session_scope_connection_is_never_restarted(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer()
    async with running(server, restart=False) as h:
        await h.wait_state(State.STEADY)
        await server.current.close()
        await h.wait_state(State.STOPPED)
        await trio.sleep(600)
        assert len(server.connect_times) == 1


async def test_server_requests_get_method_not_found(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer()
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        await server.current.send(Request(99, "sampling/createMessage", {}))
        await trio.sleep(0.1)
        errors = [
            m
            for m in server.received
            if not isinstance(m, Request | Response) and getattr(m, "id", None) == 99
        ]
        assert errors and errors[0].error.code == -32601  # type: ignore[union-attr]


async def test_server_requests_go_to_the_hosts_handler(autojump_clock: trio.testing.MockClock) -> None:
    seen: list[tuple[str, str]] = []

    async def handler(server_name: str, method: str, params: Any) -> dict[str, Any] | None:
        seen.append((server_name, method))
        if method == "elicitation/create":
            return {"action": "accept", "content": {"name": "x"}}
        if method == "boom":
            raise RuntimeError("host bug")
        return None

    server = FakeServer()
    async with running(server, server_requests=handler) as h:
        await h.wait_state(State.STEADY)
        init = next(m for m in server.received if isinstance(m, Request) and m.method == "initialize")
        assert init.params["capabilities"] == {"elicitation": {}}  # type: ignore[index,call-overload]
        for rid, method in ((7, "elicitation/create"), (8, "roots/list"), (9, "boom")):
            await server.current.send(Request(rid, method, {}))
        await trio.sleep(0.1)
        answers = {getattr(m, "id", None): m for m in server.received if not isinstance(m, Request)}
        assert answers[7] == Response(7, {"action": "accept", "content": {"name": "x"}})
        assert answers[8].error.code == -32601  # type: ignore[union-attr]
        assert answers[9].error.code == -32603  # type: ignore[union-attr]
        # each request runs in its own task (an elicitation may wait on a human), so any order
        assert sorted(seen) == [("fake", "boom"), ("fake", "elicitation/create"), ("fake", "roots/list")]
        assert h.actor.state is State.STEADY  # a host bug fails the request, not the connection


def test_the_unavailable_text_is_made_in_one_place() -> None:
    """``mcp server <name> is unavailable`` is a contract hosts match on: one function
    makes it (``actors.connection.messages.unavailable_text``), every refusal uses it."""
    from tests.support.paths import REPO

    makers = [
        str(path.relative_to(REPO))
        for root in ("actors", "supervisor")
        for path in sorted((REPO / root).rglob("*.py"))
        for line in path.read_text().splitlines()
        if 'is unavailable"' in line
    ]
    assert makers == ["actors/connection/messages.py"], makers
