"""Multi round-trip calls (SEP-2322): a per-request-era server answers a call "input
required", the host's handler answers, the call is retried. The connection actor over
a scripted server (``tests/support/fakes.py``) on Trio's MockClock (autojump)."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from actors.connection.client_side import INPUT_KEY, ServerRequestHandler
from actors.connection.messages import CallFailed, CallSucceeded, CancelCall
from actors.connection.states import State
from actors.protocol.messages import Request
from tests.actors.connection.test_connection_actor import running
from tests.support.fakes import MODERN_DISCOVER, CallHandler, FakeServer, FakeSession

ACCEPT = {"action": "accept", "content": {"confirmed": True}}


def confirm(message: str, state: str | None) -> dict[str, Any]:
    result: dict[str, Any] = {
        "resultType": "input_required",
        "inputRequests": {
            "confirm": {"method": "elicitation/create", "params": {"message": message, "requestedSchema": {}}}
        },
    }
    if state is not None:
        result["requestState"] = state
    return result


def done(text: str) -> dict[str, Any]:
    return {"resultType": "complete", "content": [{"type": "text", "text": text}]}


async def confirm_once(session: FakeSession, request: Request) -> dict[str, Any] | None:
    """Every tool asks for confirmation once, with the tool's name in its state, and
    answers with what the retry carried."""
    params = request.params
    assert isinstance(params, dict)
    if "inputResponses" not in params:
        return confirm(f"confirm {params['name']}", f"state-of-{params['name']}")
    return done(f"{params['name']}:{params.get('requestState')}:{params['inputResponses']['confirm']}")


def modern_server(call_handler: CallHandler = confirm_once) -> FakeServer:
    """A server of the per-request era."""
    server = FakeServer()
    server.discover = MODERN_DISCOVER
    server.call_handler = call_handler
    return server


def stuck(waiting: trio.Event, stopped: trio.Event) -> ServerRequestHandler:
    """A host handler that never answers; it sets ``waiting`` when asked and
    ``stopped`` when it is stopped."""

    async def handler(server_name: str, method: str, params: Any) -> dict[str, Any]:
        waiting.set()
        try:
            await trio.sleep_forever()
        finally:
            stopped.set()
        raise AssertionError

    return handler


def text(outcome: object) -> str:
    assert isinstance(outcome, CallSucceeded), outcome
    return outcome.result.content[0]["text"]  # type: ignore[no-any-return]


async def test_the_call_is_retried_with_the_answers_and_the_echoed_state(
    autojump_clock: trio.testing.MockClock,
) -> None:
    asked: list[tuple[str, str, Any]] = []

    async def host(server_name: str, method: str, params: Any) -> dict[str, Any]:
        asked.append((server_name, method, params))
        return ACCEPT

    server = modern_server()
    async with running(server, server_requests=host) as h:
        await h.wait_state(State.STEADY)
        start = trio.current_time()
        outcome = await h.call("deploy", {"env": "prod"})
        assert trio.current_time() - start < 1
        assert text(outcome) == f"deploy:state-of-deploy:{ACCEPT}"
        assert asked == [("fake", "elicitation/create", {"message": "confirm deploy", "requestedSchema": {}})]
        first, retry = server.calls()
        assert first.id != retry.id
        assert isinstance(retry.params, dict)
        assert retry.params["arguments"] == {"env": "prod"}
        assert retry.params["inputResponses"] == {"confirm": ACCEPT}
        assert retry.params["requestState"] == "state-of-deploy"
        assert retry.params["_meta"]["progressToken"] == retry.id  # the era's _meta too
        assert len(h.actor._inflight) == 0


async def test_the_handler_sees_the_servers_own_key_of_each_input(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The MCP gateway relays a backend's input requests to its own new-era clients
    under the backend's keys (``INPUT_KEY``), and sees none outside a round."""
    keys: list[str | None] = []

    async def host(server_name: str, method: str, params: Any) -> dict[str, Any]:
        keys.append(INPUT_KEY.get())
        return ACCEPT

    async with running(modern_server(), server_requests=host) as h:
        assert text(await h.call("deploy")).startswith("deploy:")
    assert keys == ["confirm"] and INPUT_KEY.get() is None


async def test_a_result_without_state_is_retried_without_state(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def handler(session: FakeSession, request: Request) -> dict[str, Any] | None:
        assert isinstance(request.params, dict)
        return confirm("ok?", None) if "inputResponses" not in request.params else done("no-state-ok")

    server = modern_server(handler)

    async def host(server_name: str, method: str, params: Any) -> dict[str, Any]:
        return ACCEPT

    async with running(server, server_requests=host) as h:
        assert text(await h.call("t")) == "no-state-ok"
        retry = server.calls()[1]
        assert isinstance(retry.params, dict) and "requestState" not in retry.params


async def test_parallel_calls_keep_their_own_state_and_answers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    both_asked = trio.Event()
    asked: list[str] = []

    async def host(server_name: str, method: str, params: Any) -> dict[str, Any]:
        asked.append(params["message"])
        if len(asked) == 2:
            both_asked.set()
        await both_asked.wait()  # both exchanges are waiting for the host at once
        return {"action": "accept", "content": {"for": params["message"]}}

    server = modern_server()
    async with running(server, server_requests=host) as h:
        await h.wait_state(State.STEADY)
        a = await h.send_call("alpha")
        b = await h.send_call("beta")
        plain = await h.send_call("gamma")  # a third call, made meanwhile
        outcomes = [await a.receive(), await b.receive(), await plain.receive()]
        want = [
            f"{tool}:state-of-{tool}:{ {'action': 'accept', 'content': {'for': f'confirm {tool}'}} }"
            for tool in ("alpha", "beta", "gamma")
        ]
        assert [text(o) for o in outcomes] == want
        firsts = [c for c in server.calls() if "inputResponses" not in c.params]  # type: ignore[operator]
        assert len(firsts) == 3  # no first request carried another exchange's answers or state
        assert all("requestState" not in c.params for c in firsts)  # type: ignore[operator]


async def test_time_in_the_hosts_handler_does_not_count_against_the_call_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def slow_host(server_name: str, method: str, params: Any) -> dict[str, Any]:
        await trio.sleep(30)  # a person reading the question
        return ACCEPT

    server = modern_server()
    async with running(server, server_requests=slow_host, call_timeout_s=5, max_call_s=100) as h:
        await h.wait_state(State.STEADY)
        start = trio.current_time()
        outcome = await h.call("deploy")
        assert 30 <= trio.current_time() - start < 31
        assert text(outcome).startswith("deploy:state-of-deploy")


async def test_max_call_caps_the_whole_exchange_and_stops_the_handler(
    autojump_clock: trio.testing.MockClock,
) -> None:
    waiting, stopped = trio.Event(), trio.Event()
    server = modern_server()
    async with running(server, server_requests=stuck(waiting, stopped), call_timeout_s=5, max_call_s=20) as h:
        await h.wait_state(State.STEADY)
        start = trio.current_time()
        outcome = await h.call("deploy")
        assert 20 <= trio.current_time() - start < 21
        assert isinstance(outcome, CallFailed) and outcome.code == "timeout"
        assert "did not finish tools/call deploy within 20 s" in outcome.message
        assert "elicitation/create (confirm)" in outcome.message
        assert stopped.is_set()
        await trio.sleep(1)
        assert len(server.calls()) == 1  # no retry
        assert h.actor.state is State.STEADY and len(h.actor._inflight) == 0


async def test_cancelling_during_the_handler_wait_stops_it_and_sends_no_retry(
    autojump_clock: trio.testing.MockClock,
) -> None:
    waiting, stopped = trio.Event(), trio.Event()
    server = modern_server()
    async with running(server, server_requests=stuck(waiting, stopped)) as h:
        await h.wait_state(State.STEADY)
        answers = await h.send_call("deploy")
        with trio.fail_after(60):
            await waiting.wait()
        await h.mailbox.send(CancelCall(h.last_reply))
        outcome = await answers.receive()
        assert isinstance(outcome, CallFailed) and outcome.code == "cancelled"
        await trio.sleep(1)
        assert stopped.is_set()
        assert len(server.calls()) == 1  # no retry
        assert not server.notifications("notifications/cancelled")  # nothing open on the server
        assert len(h.actor._inflight) == 0


async def test_without_a_handler_the_call_fails_saying_what_was_required(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = modern_server()
    async with running(server) as h:
        outcome = await h.call("deploy")
        assert isinstance(outcome, CallFailed) and outcome.code == "server_error"
        assert outcome.message == (
            "mcp server fake needs input to finish tools/call deploy (elicitation/create (confirm)), "
            "and no handler for server requests is attached "
            "(sup.session(sampling=..., elicitation=..., roots=...) or Supervisor.open(server_requests=...))"
        )
        assert len(server.calls()) == 1


async def test_a_method_the_host_does_not_handle_fails_the_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def host(server_name: str, method: str, params: Any) -> None:
        return None

    server = modern_server()
    async with running(server, server_requests=host) as h:
        outcome = await h.call("deploy")
        assert isinstance(outcome, CallFailed) and outcome.code == "server_error"
        assert "needs elicitation/create (confirm) to finish tools/call deploy" in outcome.message
        assert len(server.calls()) == 1


async def test_a_state_only_result_is_retried_after_a_short_wait(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def handler(session: FakeSession, request: Request) -> dict[str, Any] | None:
        assert isinstance(request.params, dict)
        legs = len(server.calls())
        if legs < 3:
            return {"resultType": "input_required", "requestState": f"leg-{legs}"}
        return done(str(request.params.get("requestState")))

    server = modern_server(handler)
    async with running(server) as h:  # no handler needed: nothing to answer
        await h.wait_state(State.STEADY)
        start = trio.current_time()
        assert text(await h.call("slow")) == "leg-2"
        assert 0.15 <= trio.current_time() - start < 1
        assert [c.params.get("inputResponses") for c in server.calls()] == [None] * 3  # type: ignore[union-attr]


async def test_a_handshake_era_server_result_is_never_driven(autojump_clock: trio.testing.MockClock) -> None:
    server = modern_server()
    server.discover = None  # the handshake era: resultType means nothing there
    asked: list[str] = []

    async def host(server_name: str, method: str, params: Any) -> dict[str, Any]:
        asked.append(method)
        return ACCEPT

    async with running(server, server_requests=host) as h:
        await h.call("deploy")
        assert len(server.calls()) == 1 and asked == []


async def test_a_server_that_dies_during_the_handler_wait_answers_the_call_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    waiting, stopped = trio.Event(), trio.Event()
    server = modern_server()
    async with running(server, server_requests=stuck(waiting, stopped), call_timeout_s=30) as h:
        await h.wait_state(State.STEADY)
        answers = await h.send_call("deploy")
        with trio.fail_after(60):
            await waiting.wait()
        start = trio.current_time()
        await server.current.close()
        with trio.fail_after(10):
            outcome = await answers.receive()
        assert trio.current_time() - start < 1
        assert isinstance(outcome, CallFailed) and outcome.code == "unavailable"
        await trio.sleep(0.1)
        assert stopped.is_set()  # the host's handler was stopped with the connection
        assert len(h.actor._inflight) == 0
