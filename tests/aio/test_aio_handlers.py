"""What an asyncio host hands ``supervisor.aio``, run on its own loop: the approver, a
session's sampling, elicitation and roots handlers, the supervisor-level
``server_requests``; and the rest of a turn's surface (resources, prompts, completions,
subscriptions). The conformance fixture (tests/servers/everything_server.py, handshake
era, where a server asks mid-call) and our mini server are the peers."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from actors.spec import ServerSpec
from supervisor.aio import Approval, ApprovalRequest, Supervisor
from supervisor.settings.model import Config, ToolSearchSettings, TrustRule, TrustSettings
from tests.support.aio_host import EVERYTHING, host, mini

WHO = contextvars.ContextVar("who", default="nobody")
NO_SEARCH = ToolSearchSettings(enabled=False)


def everything(**options: Any) -> ServerSpec:
    return ServerSpec(
        name="every",
        command=(sys.executable, EVERYTHING),
        protocol="2025-11-25",
        trusted=True,
        shutdown_grace_s=0.5,
        **options,
    )


class Seen:
    """What the host's callbacks saw: where they ran, and in which context."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.places: set[tuple[int, asyncio.AbstractEventLoop, str]] = set()

    def saw(self, name: str, server: str, params: Any) -> None:
        self.calls.append((name, server, params))
        task = asyncio.current_task()
        assert task is not None  # a task of its own on the host's loop
        self.places.add((threading.get_ident(), asyncio.get_running_loop(), WHO.get()))


def test_the_handlers_are_asyncio_coroutines_on_the_hosts_loop_in_its_context(tmp_path: Path) -> None:
    seen = Seen()

    async def sample(server: str, params: Any) -> dict[str, Any]:
        seen.saw("sampling", server, params)
        await asyncio.sleep(0)
        return {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}

    async def elicit(server: str, params: Any) -> dict[str, Any]:
        seen.saw("elicitation", server, params)
        return {"action": "accept", "content": {"name": "Ada"}}

    async def roots(server: str, params: Any) -> list[str]:
        seen.saw("roots", server, params)
        return ["file:///home/ada/one", "file:///home/ada/two"]

    async def unclaimed(server: str, method: str, params: Any) -> dict[str, Any]:
        seen.saw(f"supervisor-level {method}", server, params)
        return {"role": "assistant", "content": {"type": "text", "text": "Lyon"}, "model": "m"}

    config = Config(servers=(everything(),), tool_search=NO_SEARCH)

    async def main() -> None:
        WHO.set("the opener")
        async with Supervisor.open(
            config, state_dir=tmp_path, server_requests=unclaimed, client_capabilities={"sampling": {}}
        ) as sup:
            WHO.set("the session's opener")
            async with sup.session(sampling=sample, elicitation=elicit, roots=roots) as session:
                WHO.set("the caller")
                turn = await session.begin_turn()
                said = await turn.call("every_test_input_required_result_sampling", {})
                assert said.ok and said.text == "Model said: Paris", said
                named = await turn.call("every_test_input_required_result_elicitation", {})
                assert named.ok and named.text == "Hello, Ada!", named
                listed = await turn.call("every_test_input_required_result_list_roots", {})
                assert listed.ok and listed.text == "Client exposed 2 root(s).", listed
            async with sup.session() as bare:  # handles nothing: the supervisor-level handler does
                unhandled = await (await bare.begin_turn()).call("every_test_input_required_result_sampling")
                assert unhandled.ok and unhandled.text == "Model said: Lyon", unhandled
        assert [(name, server) for name, server, _ in seen.calls] == [
            ("sampling", "every"),
            ("elicitation", "every"),
            ("roots", "every"),
            ("supervisor-level sampling/createMessage", "every"),
        ]
        assert seen.calls[0][2]["messages"][0]["content"]["text"] == "What is the capital of France?"
        loop, thread = asyncio.get_running_loop(), threading.get_ident()
        assert seen.places == {(thread, loop, "the session's opener"), (thread, loop, "the opener")}

    host(main)


def test_the_approver_decides_on_the_hosts_loop_and_a_timeout_cancels_it(tmp_path: Path) -> None:
    ask = TrustSettings(rules=(TrustRule("mcp:mini:echo", action="ask"),), approval_timeout_s=0.3)
    config = Config(servers=(mini("mini"),), trust=ask)
    asked: list[ApprovalRequest] = []
    answers = iter(["allow", Approval("deny"), "wait"])
    cancelled = asyncio.Event()

    async def approver(request: ApprovalRequest) -> Approval | str:
        asked.append(request)
        answer = next(answers)
        if answer == "wait":
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise
        return answer

    async def main() -> None:
        async with Supervisor.open(config, approver, state_dir=tmp_path) as sup, sup.session() as session:
            turn = await session.begin_turn()
            allowed = await turn.call("mini_echo", {"text": "yes"})
            assert allowed.ok and allowed.text == "yes"
            denied = await turn.call("mini_echo", {"text": "no"})
            assert denied.error is not None and denied.error.code == "denied"
            assert denied.error.message == "call to mini_echo denied by the approver"
            timed_out = await turn.call("mini_echo", {"text": "late"})
            assert timed_out.error is not None and timed_out.error.message == (
                "no answer to the approval request for mini_echo within 0.3 s; denied"
            )
            assert cancelled.is_set()  # the asyncio approver was cancelled, and waited for
        assert [(r.tool, r.permission, r.arguments) for r in asked] == [
            ("mini_echo", "mcp:mini:echo", {"text": "yes"}),
            ("mini_echo", "mcp:mini:echo", {"text": "no"}),
            ("mini_echo", "mcp:mini:echo", {"text": "late"}),
        ]

    host(main)


def test_a_handler_that_is_not_a_coroutine_function_is_refused_saying_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = Config(servers=(everything(),), tool_search=NO_SEARCH)

    def sample(server: str, params: Any) -> dict[str, Any]:  # no async def
        return {"role": "assistant", "content": {"type": "text", "text": "sync"}, "model": "m"}

    async def main() -> None:
        async with Supervisor.open(config, state_dir=tmp_path) as sup:
            with pytest.raises(TypeError, match="the elicitation handler: expected an async callable"):
                sup.session(elicitation="not a function")  # type: ignore[arg-type]
            async with sup.session(sampling=sample) as session:  # type: ignore[arg-type]
                said = await (await session.begin_turn()).call("every_test_input_required_result_sampling")
                assert not said.ok

    with caplog.at_level(logging.WARNING):
        host(main)
    failed = [r for r in caplog.records if r.getMessage().startswith("server request handler failed")]
    assert failed and str(failed[0].exc_info[1]) == (  # type: ignore[index]
        "the sampling handler returned dict, not an awaitable: pass an async def function"
    )


def test_resources_prompts_completions_and_subscriptions_from_asyncio(tmp_path: Path) -> None:
    config = Config(servers=(everything(),), tool_search=NO_SEARCH)

    async def main() -> None:
        async with Supervisor.open(config, state_dir=tmp_path) as sup:
            async with sup.session() as session:
                turn = await session.begin_turn()
                assert "test://static-text" in [r.uri for r in turn.resources()]
                assert "test://static-text" in [item["uri"] for item in turn.resource_listing()]
                assert [t.uri_template for t in turn.resource_templates()] == ["test://template/{id}/data"]
                assert turn.template_listing()[0]["server"] == "every"
                prompt = "every_test_prompt_with_arguments"
                assert prompt in [p.id for p in turn.prompts()]
                assert prompt in [item["id"] for item in turn.prompt_listing()]
                read = await turn.read_resource("test://static-text", request_id="read-1")
                assert read.ok and read.text, read
                got = await turn.get_prompt(prompt, {"arg1": "a", "arg2": "b"}, request_id="get-1")
                assert got.ok and "a" in got.text, got
                completed = await turn.complete(
                    {"type": "ref/prompt", "name": prompt}, {"name": "arg1", "value": "x"}
                )
                assert completed.ok and completed.structured is not None, completed
                assert completed.structured["completion"]["values"] == []
                watched = "test://watched-resource"
                assert (await session.subscribe(watched)).ok
                assert (await turn.call("every_test_update_watched_resource")).ok
                update = await anext(aiter(session.resource_updates))
                assert (update.uri, update.server, update.server_uri) == (watched, "every", watched)
                assert (await session.unsubscribe(watched)).ok
            assert [update async for update in session.resource_updates] == []  # ended with it

    host(main)
