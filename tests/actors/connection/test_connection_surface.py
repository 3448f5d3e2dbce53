"""The connection layer of the MCP surface, over a scripted fake server on MockClock:
listing every declared kind, re-reading only the kind that changed, requests of the
surface through the in-flight table, resource subscriptions, server log messages and
``logging/setLevel``."""

from __future__ import annotations

import logging
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from actors.connection.messages import (
    Answered,
    CallFailed,
    CallOutcome,
    CallTool,
    ResourceUpdated,
    Retune,
    ServerListed,
    Subscribe,
    Unsubscribe,
)
from actors.connection.states import State
from actors.protocol.listen import listen_filter
from actors.protocol.messages import ErrorObject, Request, ServerFeatures
from actors.spec import Start
from actors.transports.listen_stream import listen_request
from tests.actors.connection.test_connection_actor import Harness, running
from tests.actors.transports.test_stdio_transport import eventually
from tests.support.fakes import MODERN_DISCOVER, FakeServer

RESOURCE = {"uri": "file:///notes.txt", "name": "notes", "mimeType": "text/plain"}
TEMPLATE = {"uriTemplate": "file:///{path}", "name": "any file"}
PROMPT = {"name": "greet", "arguments": [{"name": "who", "required": True}]}


def surface_server(**capabilities: Any) -> FakeServer:
    """A server that declares resources (with subscribe), prompts and logging."""
    server = FakeServer()
    server.capabilities = {
        "tools": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "prompts": {"listChanged": True},
        "logging": {},
        **capabilities,
    }
    pages: dict[str | None, dict[str, Any]] = {
        None: {"resources": [RESOURCE], "nextCursor": "2"},
        "2": {"resources": [{"uri": "mem://b"}]},
    }

    def resources(request: Request) -> dict[str, Any]:
        cursor = request.params.get("cursor") if isinstance(request.params, dict) else None
        return pages[cursor]

    server.answers = {
        "resources/list": resources,
        "resources/templates/list": lambda request: {"resourceTemplates": [TEMPLATE]},
        "prompts/list": lambda request: {"prompts": [PROMPT]},
        "logging/setLevel": lambda request: {},
        "resources/subscribe": lambda request: {},
        "resources/unsubscribe": lambda request: {},
        "resources/read": lambda request: {"contents": [{"uri": "file:///notes.txt", "text": "hi"}]},
    }
    return server


def listings(h: Harness) -> list[ServerListed]:
    return [m for m in h.published if isinstance(m, ServerListed)]


def sent(server: FakeServer, method: str) -> list[Request]:
    return [m for m in server.received if isinstance(m, Request) and m.method == method]


async def settled(h: Harness, server: FakeServer) -> None:
    """Steady, and the background logging/setLevel has been sent (well within a second)."""
    await h.wait_state(State.STEADY)
    with trio.fail_after(1):
        await eventually(lambda: bool(sent(server, "logging/setLevel")))


async def ask(h: Harness, method: str, params: dict[str, Any], label: str = "x") -> CallOutcome:
    reply, answers = trio.open_memory_channel[CallOutcome](1)
    await h.mailbox.send(CallTool(label, params, reply, method=method))
    return await answers.receive()


# ------------------------------------------------------------------------ listing


async def test_every_declared_kind_is_listed_whole_with_its_features(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = surface_server()
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        [listed] = listings(h)
        assert [t.name for t in listed.tools] == ["echo"]
        assert [(r.uri, r.name) for r in listed.resources] == [
            ("file:///notes.txt", "notes"),
            ("mem://b", "mem://b"),
        ]
        assert listed.resources[0].raw == RESOURCE
        assert [t.uri_template for t in listed.templates] == ["file:///{path}"]
        assert [(p.name, p.required) for p in listed.prompts] == [("greet", ("who",))]
        assert listed.features == ServerFeatures(
            resources=True, subscribe=True, templates=True, prompts=True, logging=True
        )
        assert listed.problems == ()


async def test_undeclared_kinds_are_not_asked_for(autojump_clock: trio.testing.MockClock) -> None:
    server = surface_server()
    server.capabilities = {"tools": {}}
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        [listed] = listings(h)
        assert (listed.resources, listed.templates, listed.prompts) == ((), (), ())
        assert server.methods() == ["server/discover", "initialize", "tools/list"]


async def test_a_refused_optional_list_is_a_problem_and_the_kind_is_empty(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = surface_server()
    server.answers["prompts/list"] = lambda request: ErrorObject(-32601, "no prompts here")
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        [listed] = listings(h)
        assert listed.prompts == ()
        assert len(listed.resources) == 2
        assert listed.problems == ("mcp server fake refused prompts/list: no prompts here",)


async def test_a_malformed_optional_page_fails_the_connection(autojump_clock: trio.testing.MockClock) -> None:
    server = surface_server()
    server.answers["resources/list"] = lambda request: {"resources": "all of them"}
    async with running(server) as h:
        failed = await h.wait_state(State.BACKOFF)
        assert failed.reason is not None and "resources/list result has no resources array" in failed.reason


async def test_a_list_change_of_one_kind_rereads_only_that_kind(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = surface_server()
    async with running(server) as h:
        await settled(h, server)
        before = len(server.received)
        server.answers["prompts/list"] = lambda request: {"prompts": [PROMPT, {"name": "bye"}]}
        start = trio.current_time()
        await server.current.notify("notifications/prompts/list_changed")
        await h.wait_for(lambda m: isinstance(m, ServerListed) and m.generation == 2)
        assert trio.current_time() - start < 1
        assert [m.method for m in server.received[before:] if isinstance(m, Request)] == ["prompts/list"]
        first, second = listings(h)
        assert [p.name for p in second.prompts] == ["greet", "bye"]
        assert (second.tools, second.resources, second.templates) == (
            first.tools,
            first.resources,
            first.templates,
        )
        await server.current.notify("notifications/resources/list_changed")
        await h.wait_for(lambda m: isinstance(m, ServerListed) and m.generation == 3)
        assert [m.method for m in server.received[before:] if isinstance(m, Request)][1:] == [
            "resources/list",
            "resources/list",
            "resources/templates/list",
        ]


# ---------------------------------------------------------------------- requests


async def test_a_request_of_the_surface_is_sent_with_its_params_and_answered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = surface_server()
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        outcome = await ask(h, "resources/read", {"uri": "file:///notes.txt"}, "file:///notes.txt")
        assert outcome == Answered({"contents": [{"uri": "file:///notes.txt", "text": "hi"}]})
        [read] = sent(server, "resources/read")
        assert isinstance(read.params, dict) and read.params["uri"] == "file:///notes.txt"
        server.answers["prompts/get"] = lambda request: ErrorObject(-32602, "no such prompt")
        failed = await ask(h, "prompts/get", {"name": "nope"}, "nope")
        assert isinstance(failed, CallFailed) and failed.code == "server_error"
        assert "prompts/get nope" in failed.message and "no such prompt" in failed.message


async def test_a_surface_request_times_out_like_a_call(autojump_clock: trio.testing.MockClock) -> None:
    server = surface_server()
    server.answers["completion/complete"] = lambda request: None  # never answered
    async with running(server, call_timeout_s=30) as h:
        await h.wait_state(State.STEADY)
        start = trio.current_time()
        outcome = await ask(h, "completion/complete", {"ref": {}, "argument": {}}, "completion")
        assert isinstance(outcome, CallFailed) and outcome.code == "timeout"
        assert "completion/complete completion" in outcome.message
        assert 30 <= trio.current_time() - start < 31


async def test_input_required_rounds_work_for_prompts_get(autojump_clock: trio.testing.MockClock) -> None:
    asked: list[str] = []

    async def host(server_name: str, method: str, params: Any) -> dict[str, Any]:
        asked.append(method)
        return {"action": "accept", "content": {"who": "Ada"}}

    def prompt(request: Request) -> dict[str, Any]:
        assert isinstance(request.params, dict)
        if "inputResponses" not in request.params:
            ask_who = {"method": "elicitation/create", "params": {"message": "who?", "requestedSchema": {}}}
            return {"resultType": "input_required", "inputRequests": {"who": ask_who}, "requestState": "s1"}
        who = request.params["inputResponses"]["who"]["content"]["who"]
        return {"messages": [{"role": "user", "content": {"type": "text", "text": f"hello {who}"}}]}

    server = surface_server()
    server.discover = {**MODERN_DISCOVER, "capabilities": {"tools": {}, "prompts": {}}}
    server.answers["prompts/get"] = prompt
    async with running(server, server_requests=host) as h:
        await h.wait_state(State.STEADY)
        outcome = await ask(h, "prompts/get", {"name": "greet", "arguments": {"x": "1"}}, "greet")
        assert isinstance(outcome, Answered)
        assert outcome.result["messages"][0]["content"]["text"] == "hello Ada"
        assert asked == ["elicitation/create"]
        _, retry = sent(server, "prompts/get")
        assert isinstance(retry.params, dict)
        assert retry.params["name"] == "greet" and retry.params["arguments"] == {"x": "1"}
        assert retry.params["requestState"] == "s1"


# ----------------------------------------------------------------- subscriptions


async def subscribe(
    h: Harness, uri: str, who: str, size: int = 10
) -> tuple[CallOutcome, trio.MemoryReceiveChannel[ResourceUpdated]]:
    reply, answers = trio.open_memory_channel[CallOutcome](1)
    updates, received = trio.open_memory_channel[ResourceUpdated](size)
    await h.mailbox.send(Subscribe(uri, who, updates, reply))
    return await answers.receive(), received


async def unsubscribe(h: Harness, uri: str, who: str) -> CallOutcome:
    reply, answers = trio.open_memory_channel[CallOutcome](1)
    await h.mailbox.send(Unsubscribe(uri, who, reply))
    return await answers.receive()


async def test_subscriptions_are_counted_and_updates_reach_each_subscriber(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = surface_server()
    uri = "file:///notes.txt"
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        first, ada = await subscribe(h, uri, "ada")
        second, bob = await subscribe(h, uri, "bob")
        await subscribe(h, uri, "slow", size=0)  # nobody reads it
        assert first == second == Answered({})
        assert len(sent(server, "resources/subscribe")) == 1
        await server.current.notify("notifications/resources/updated", {"uri": uri})
        await server.current.notify("notifications/resources/updated", {"uri": "file:///other"})
        with trio.fail_after(1):
            assert await ada.receive() == ResourceUpdated("fake", uri)
            assert await bob.receive() == ResourceUpdated("fake", uri)
        assert await unsubscribe(h, uri, "ada") == Answered({})
        assert await unsubscribe(h, uri, "slow") == Answered({})
        assert sent(server, "resources/unsubscribe") == []
        assert await unsubscribe(h, uri, "bob") == Answered({})
        [left] = sent(server, "resources/unsubscribe")
        assert left.params == {"uri": uri}
        assert h.actor.state is State.STEADY
        with pytest.raises(trio.WouldBlock):
            ada.receive_nowait()  # the update for another URI went to nobody


async def test_subscriptions_are_sent_again_after_a_reconnect(autojump_clock: trio.testing.MockClock) -> None:
    server = surface_server()
    uri = "file:///notes.txt"
    async with running(server, reconnect_schedule_s=(1.0,)) as h:
        await h.wait_state(State.STEADY)
        outcome, updates = await subscribe(h, uri, "ada")
        assert outcome == Answered({})
        await server.current.close()
        await h.wait_state(State.STEADY, count=2)
        with trio.fail_after(1):
            await eventually(lambda: len(sent(server, "resources/subscribe")) == 2)
        await server.current.notify("notifications/resources/updated", {"uri": uri})
        with trio.fail_after(1):
            assert await updates.receive() == ResourceUpdated("fake", uri)


async def test_subscribing_where_the_server_did_not_declare_it_is_unsupported(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = surface_server(resources={"listChanged": True})
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        outcome, _ = await subscribe(h, "file:///notes.txt", "ada")
        assert isinstance(outcome, CallFailed) and outcome.code == "unsupported"
        assert "resources.subscribe" in outcome.message
        assert sent(server, "resources/subscribe") == []


async def test_a_refused_subscribe_answers_every_waiting_subscriber(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = surface_server()
    server.answers["resources/subscribe"] = lambda request: ErrorObject(-32002, "no such resource")
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        outcome, _ = await subscribe(h, "file:///gone", "ada")
        assert isinstance(outcome, CallFailed) and outcome.code == "server_error"
        assert "no such resource" in outcome.message
        assert h.actor._subscriptions.subscribers("file:///gone") == ()


async def test_a_subscription_before_the_start_waits_for_it(autojump_clock: trio.testing.MockClock) -> None:
    server = surface_server()
    async with running(server, start=Start.LAZY) as h:
        outcome, _ = await subscribe(h, "file:///notes.txt", "ada")
        assert outcome == Answered({})
        assert h.actor.state is State.STEADY
        assert sent(server, "resources/subscribe")[0].params == {"uri": "file:///notes.txt"}


# ---------------------------------------------------------------------- logging


async def test_server_log_messages_land_in_our_log_redacted_and_bounded(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    server = surface_server()
    caplog.set_level(logging.DEBUG, logger="actors.server")
    async with running(server, secrets=("hunter2-secret-value",), log_level="debug") as h:
        await h.wait_state(State.STEADY)
        session = server.current
        await session.notify(
            "notifications/message",
            {"level": "alert", "logger": "db", "data": {"pw": "hunter2-secret-value"}},
        )
        await session.notify("notifications/message", {"level": "notice", "data": "x" * 5000})
        await session.notify("notifications/message", {"level": "debug", "data": "details"})
        with trio.fail_after(1):
            await eventually(lambda: len([r for r in caplog.records if r.name == "actors.server"]) == 3)
    alert, notice, debug = [r for r in caplog.records if r.name == "actors.server"]
    assert (alert.levelno, notice.levelno, debug.levelno) == (logging.CRITICAL, logging.INFO, logging.DEBUG)
    assert alert.fields["server"] == "fake" and alert.fields["logger"] == "db"  # type: ignore[attr-defined]
    assert "hunter2" not in alert.getMessage() and "hunter2" not in str(alert.fields)  # type: ignore[attr-defined]
    assert notice.fields["data"].endswith("… (3000 more characters)")  # type: ignore[attr-defined]


async def test_messages_below_the_log_level_stay_out_of_our_log_whatever_the_server_sends(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    server = surface_server()
    caplog.set_level(logging.DEBUG, logger="actors.server")

    def ours() -> list[str]:
        return [r.fields["data"] for r in caplog.records if r.name == "actors.server"]  # type: ignore[attr-defined]

    async with running(server, log_level="error") as h:
        await settled(h, server)
        session = server.current
        for level in ("debug", "info", "warning", "error"):  # it ignores logging/setLevel
            await session.notify("notifications/message", {"level": level, "data": f"at {level}"})
        await trio.sleep(1)
        assert ours() == ["at error"]
        await h.mailbox.send(Retune(attrs.evolve(h.actor.spec, log_level="info")))  # a reload
        await trio.sleep(1)
        await session.notify("notifications/message", {"level": "info", "data": "wanted now"})
        await trio.sleep(1)
        assert ours() == ["at error", "wanted now"]


async def test_log_level_is_sent_after_listing_and_again_when_it_changes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = surface_server()
    async with running(server) as h:
        await settled(h, server)
        [first] = sent(server, "logging/setLevel")
        assert isinstance(first.params, dict) and first.params["level"] == "warning"
        await h.mailbox.send(Retune(attrs.evolve(h.actor.spec, log_level="debug")))
        with trio.fail_after(1):
            await eventually(lambda: len(sent(server, "logging/setLevel")) == 2)
        assert sent(server, "logging/setLevel")[1].params == {"level": "debug"}
        await h.mailbox.send(Retune(attrs.evolve(h.actor.spec, call_timeout_s=5.0)))
        await trio.sleep(1)
        assert len(sent(server, "logging/setLevel")) == 2  # unchanged level: not sent again


async def test_a_refused_set_level_is_logged_not_fatal(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    server = surface_server()
    server.answers["logging/setLevel"] = lambda request: ErrorObject(-32601, "no logging today")
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        with trio.fail_after(1):
            await eventually(
                lambda: any("logging/setLevel refused" in r.getMessage() for r in caplog.records)
            )
        assert h.actor.state is State.STEADY


async def test_no_set_level_for_a_server_without_logging(autojump_clock: trio.testing.MockClock) -> None:
    server = surface_server()
    del server.capabilities["logging"]
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        await trio.sleep(1)
        assert sent(server, "logging/setLevel") == []


# ------------------------------------------------------------------ listen stream


def test_the_listen_stream_asks_for_every_kind_discover_offered() -> None:
    assert listen_filter({"capabilities": {"tools": {"listChanged": True}}}) == {"toolsListChanged": True}
    offered = {
        "capabilities": {
            "tools": {"listChanged": True},
            "resources": {"listChanged": True},
            "prompts": {"listChanged": True},
        }
    }
    wanted = {"toolsListChanged": True, "resourcesListChanged": True, "promptsListChanged": True}
    assert listen_filter(offered) == wanted
    assert listen_filter({"capabilities": {"resources": {}, "prompts": {"listChanged": False}}}) == {}
    request = listen_request({"k": 1}, wanted)
    assert isinstance(request.params, dict) and request.params["notifications"] == wanted
