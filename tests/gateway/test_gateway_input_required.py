"""Input-required rounds of the gateway's new-era front (``stateless.py``,
``parked.py``): a backend (``@modelcontextprotocol/server-everything`` over stdio)
asks for elicitation or sampling during a new-era client's call; the client's request
is answered ``input_required`` while the backend call stays parked, and its retry
resumes that very call. Forged, replayed, foreign and expired states are refused."""

from __future__ import annotations

from typing import Any

import trio

from supervisor.gateway.results import INVALID_PARAMS
from supervisor.gateway.stateless import StatelessGateway
from tests.actors.transports.test_stdio_transport import eventually
from tests.end_to_end.test_everything_surface import FORM_TOOL, SAMPLING_TOOL, Everything, everything
from tests.gateway.test_gateway_core import Recorder
from tests.gateway.test_gateway_stateless import request

__all__ = ["everything"]  # the fixture

ELICIT = {"elicitation": {}}
ANSWER = {"action": "accept", "content": {"name": "name-from-the-new-era"}}


async def started(everything: Everything) -> StatelessGateway:
    await everything.ready()
    return StatelessGateway.of(everything.sup)


async def call(gw: StatelessGateway, tool: str, caps: Any, tenant: str = "t", **extra: Any) -> dict[str, Any]:
    params = {"name": tool, "arguments": extra.pop("arguments", {}), **extra}
    with trio.fail_after(20):
        answer = await gw.receive(request(7, "tools/call", params, caps), Recorder(), tenant)
    assert answer is not None and answer["id"] == 7
    return answer


async def test_an_elicitation_is_an_input_required_round_that_resumes_the_same_call(
    everything: Everything,
) -> None:
    gw = await started(everything)
    async with trio.open_nursery() as nursery:
        await nursery.start(gw.run)
        first = (await call(gw, FORM_TOOL, ELICIT))["result"]
        assert first["resultType"] == "input_required"
        ((key, asked),) = first["inputRequests"].items()
        assert key == "elicitation-1" and asked["method"] == "elicitation/create"
        assert "requestedSchema" in asked["params"]
        state = first["requestState"]
        assert isinstance(state, str) and len(gw.tenants.get("t").parked) == 1  # type: ignore[union-attr]

        tampered = await call(gw, FORM_TOOL, ELICIT, inputResponses={key: ANSWER}, requestState=state + "x")
        assert tampered["error"]["code"] == INVALID_PARAMS and "requestState" in tampered["error"]["message"]
        foreign = await call(gw, FORM_TOOL, ELICIT, "u", inputResponses={key: ANSWER}, requestState=state)
        assert foreign["error"]["code"] == INVALID_PARAMS and "another tenant" in foreign["error"]["message"]
        other = await call(gw, SAMPLING_TOOL, ELICIT, inputResponses={key: ANSWER}, requestState=state)
        assert other["error"]["code"] == INVALID_PARAMS and "not to this request" in other["error"]["message"]

        final = await call(
            gw, FORM_TOOL, ELICIT, inputResponses={key: ANSWER, "extra": {}}, requestState=state
        )
        assert final["result"]["resultType"] == "complete" and final["result"]["isError"] is False
        assert "name-from-the-new-era" in str(final["result"]["content"])
        replayed = await call(gw, FORM_TOOL, ELICIT, inputResponses={key: ANSWER}, requestState=state)
        assert replayed["error"]["code"] == INVALID_PARAMS and "over" in replayed["error"]["message"]
        assert [who for who, _, _ in everything.asked] == ["supervisor"]  # nobody else was asked
        nursery.cancel_scope.cancel()


async def test_a_request_missing_its_answer_is_asked_again_and_one_without_the_capability_is_refused(
    everything: Everything,
) -> None:
    gw = await started(everything)
    async with trio.open_nursery() as nursery:
        await nursery.start(gw.run)
        first = (await call(gw, SAMPLING_TOOL, {"sampling": {}}, arguments={"prompt": "hi"}))["result"]
        ((key, asked),) = first["inputRequests"].items()
        assert key == "sampling-1" and asked["method"] == "sampling/createMessage"
        wrong = await call(
            gw,
            SAMPLING_TOOL,
            {"sampling": {}},
            arguments={"prompt": "hi"},
            inputResponses={"wrong_key": {"x": 1}, key: 12345},
            requestState=first["requestState"],
        )
        again = wrong["result"]
        assert again["resultType"] == "input_required" and list(again["inputRequests"]) == [key]
        assert again["requestState"] != first["requestState"]
        sampled = {"role": "assistant", "content": {"type": "text", "text": "sampled anew"}, "model": "m"}
        done = await call(
            gw,
            SAMPLING_TOOL,
            {"sampling": {}},
            arguments={"prompt": "hi"},
            inputResponses={key: sampled},
            requestState=again["requestState"],
        )
        assert "sampled anew" in str(done["result"]["content"])

        refused = await call(gw, SAMPLING_TOOL, ELICIT, arguments={"prompt": "hi"})
        assert refused["error"]["code"] == -32021
        assert refused["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}
        tenant = gw.tenants.get("t")
        with trio.fail_after(5):  # the refused call is cancelled
            await eventually(lambda: tenant is None or not tenant.parked)
        nursery.cancel_scope.cancel()


async def test_a_parked_call_nobody_resumes_is_cancelled_after_the_bound(everything: Everything) -> None:
    gw = await started(everything)
    gw.park_s = 0.3
    async with trio.open_nursery() as nursery:
        await nursery.start(gw.run)
        first = (await call(gw, FORM_TOOL, ELICIT))["result"]
        state = gw.tenants.get("t")
        assert state is not None and len(state.parked) == 1
        with trio.fail_after(5):
            await eventually(lambda: not state.parked)
        late = await call(
            gw,
            FORM_TOOL,
            ELICIT,
            inputResponses={"elicitation-1": ANSWER},
            requestState=first["requestState"],
        )
        assert late["error"]["code"] == INVALID_PARAMS
        assert "expired" in late["error"]["message"] or "over" in late["error"]["message"]
        nursery.cancel_scope.cancel()


async def test_a_request_that_could_be_either_of_two_parked_calls_goes_to_neither(
    everything: Everything,
) -> None:
    """A backend over stdio cannot say which call a request is for: with two calls of one
    tenant in flight it could be either's, so neither client is asked (the untied rule);
    each parked call keeps its own rounds."""
    gw = await started(everything)
    async with trio.open_nursery() as nursery:
        await nursery.start(gw.run)
        first = (await call(gw, FORM_TOOL, ELICIT))["result"]
        assert first["resultType"] == "input_required"
        caps = {"sampling": {}, **ELICIT}
        second = (await call(gw, SAMPLING_TOOL, caps, arguments={"prompt": "hi"}))["result"]
        assert second["resultType"] == "complete" and second["isError"] is True, second
        asked = [(who, method) for who, method, _ in everything.asked if method != "roots/list"]
        assert asked == [("supervisor", "sampling/createMessage")]  # roots/list: the server's start
        final = await call(
            gw,
            FORM_TOOL,
            ELICIT,
            inputResponses={"elicitation-1": ANSWER},
            requestState=first["requestState"],
        )
        assert "name-from-the-new-era" in str(final["result"]["content"]), final
        nursery.cancel_scope.cancel()
