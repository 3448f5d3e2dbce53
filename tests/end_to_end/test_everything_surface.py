"""The MCP surface against a real peer: ``@modelcontextprotocol/server-everything``
(npm, installed by ``.ci/setup``) over stdio, through the embedding API.

One shared fixture (``everything``) runs the supervisor on a config with that server
(trusted, search off, so every turn shows every tool); each test opens the sessions it
needs. Server requests: the supervisor-level handler declares what it routes (sampling,
elicitation form and URL, roots) and answers nothing itself, so every answer a tool
shows came from a session's handler.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from supervisor import Supervisor, load_config
from tests.actors.transports.test_stdio_transport import eventually
from tests.end_to_end.test_real_peers import EVERYTHING

SAMPLING_TOOL = "everything_trigger-sampling-request"
FORM_TOOL = "everything_trigger-elicitation-request"
URL_TOOL = "everything_trigger-url-elicitation"
ROOTS_TOOL = "everything_get-roots-list"
ROUTED = {"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}}


@attrs.define
class Everything:
    sup: Supervisor
    asked: list[tuple[str, str, Any]]
    """Every request a handler got: (who, method, params); the supervisor-level one is
    "supervisor"."""
    untied_roots: trio.Event
    """Set when the server's own ``roots/list`` (after ``initialized``) reached the
    supervisor-level handler."""

    async def ready(self) -> None:
        """Wait (bounded) until the tools registered after ``initialized`` are listed
        and the server's own untied ``roots/list`` went to the supervisor-level handler."""
        with trio.fail_after(20):
            async with self.sup.session() as session:
                await session.begin_turn()  # starts the server
            await self.sup.router.cell.wait_until(
                lambda c: {SAMPLING_TOOL, URL_TOOL, ROOTS_TOOL} <= set(c.tools)
            )
            await self.untied_roots.wait()

    def handlers(self, who: str) -> dict[str, Any]:
        """A session's sampling, elicitation and roots handlers, recording as ``who``."""

        async def sampling(server: str, params: Any) -> dict[str, Any]:
            self.asked.append((who, "sampling/createMessage", params))
            content = {"type": "text", "text": f"sampled by {who}"}
            return {"role": "assistant", "content": content, "model": f"model-{who}", "stopReason": "endTurn"}

        async def elicitation(server: str, params: Any) -> dict[str, Any]:
            self.asked.append((who, "elicitation/create", params))
            if params.get("mode") == "url":
                return {"action": "accept"}
            return {"action": "accept", "content": {"name": f"name-{who}"}}

        async def roots(server: str, params: Any) -> list[dict[str, str]]:
            self.asked.append((who, "roots/list", params))
            return [{"uri": f"file:///work/{who}", "name": f"root of {who}"}]

        return {"sampling": sampling, "elicitation": elicitation, "roots": roots}

    def of(self, who: str) -> list[tuple[str, Any]]:
        return [(method, params) for w, method, params in self.asked if w == who]


@pytest.fixture
async def everything(tmp_path: Path) -> AsyncIterator[Everything]:
    if not EVERYTHING.exists():
        reason = "npm is not on PATH" if shutil.which("npm") is None else ".ci/setup could not install it"
        pytest.skip(f"@modelcontextprotocol/server-everything is not installed: {reason}")
    config = tmp_path / "config.json"
    server = {"command": str(EVERYTHING), "args": ["stdio"], "trusted": True, "log_level": "info"}
    config.write_text(json.dumps({"servers": {"everything": server}, "tool_search": {"enabled": False}}))
    asked: list[tuple[str, str, Any]] = []
    untied_roots = trio.Event()
    async with Supervisor.open(
        load_config(config),
        state_dir=tmp_path / "state",
        server_requests=supervisor_level(asked, untied_roots),
        client_capabilities=ROUTED,
    ) as sup:
        yield Everything(sup, asked, untied_roots)


def supervisor_level(
    asked: list[tuple[str, str, Any]], untied_roots: trio.Event
) -> Callable[[str, str, Any], Awaitable[None]]:
    """A supervisor-level handler that records each request as "supervisor", sets
    ``untied_roots`` at a ``roots/list``, and handles nothing (the server is told no
    handler is attached)."""

    async def handler(server: str, method: str, params: Any) -> None:
        asked.append(("supervisor", method, params))
        if method == "roots/list":
            untied_roots.set()

    return handler


async def test_each_sessions_handlers_get_only_its_own_requests(everything: Everything) -> None:
    await everything.ready()
    sup = everything.sup
    async with sup.session(**everything.handlers("A")) as a, sup.session(**everything.handlers("B")) as b:
        turns = {"A": await a.begin_turn(), "B": await b.begin_turn()}
        for who, turn in turns.items():
            sampled = await turn.call(SAMPLING_TOOL, {"prompt": f"prompt of {who}"})
            assert sampled.ok and f"sampled by {who}" in sampled.text, sampled
            form = await turn.call(FORM_TOOL, {})
            assert form.ok and f"name-{who}" in form.text, form
            url = await turn.call(URL_TOOL, {"url": f"https://example.com/{who}"})
            assert url.ok and "completed the URL elicitation" in url.text, url
        # The server asked for roots once at start (untied: the supervisor-level handler,
        # which has none); asked again inside A's call, A's roots handler answers.
        listed = await turns["A"].call(ROOTS_TOOL, {})
        assert listed.ok and "file:///work/A" in listed.text and "root of A" in listed.text, listed
    for who in ("A", "B"):
        seen = everything.of(who)
        assert [method for method, _ in seen] == [
            "sampling/createMessage",
            "elicitation/create",
            "elicitation/create",
        ] + (["roots/list"] if who == "A" else [])
        assert f"prompt of {who}" in json.dumps(seen[0][1])
        assert "requestedSchema" in seen[1][1] and seen[1][1].get("mode", "form") == "form"
        assert seen[2][1]["mode"] == "url" and seen[2][1]["url"] == f"https://example.com/{who}"
    assert [method for method, _ in everything.of("supervisor")] == ["roots/list"]


async def test_calls_of_two_sessions_at_once_never_reach_the_other_session(everything: Everything) -> None:
    await everything.ready()
    sup = everything.sup
    async with sup.session(**everything.handlers("A")) as a, sup.session(**everything.handlers("B")) as b:
        turn_a, turn_b = await a.begin_turn(), await b.begin_turn()
        async with trio.open_nursery() as nursery:
            for turn, who in ((turn_a, "A"), (turn_b, "B")):
                for n in range(3):
                    nursery.start_soon(turn.call, SAMPLING_TOOL, {"prompt": f"prompt of {who} #{n}"})
    for who, other in (("A", "B"), ("B", "A")):
        assert all(f"prompt of {other}" not in json.dumps(params) for _, params in everything.of(who))
    # every request went somewhere: to its own session, or (both in flight) to the supervisor level
    assert len(everything.asked) == 1 + 6


async def test_the_whole_surface_through_a_turn(
    everything: Everything, caplog: pytest.LogCaptureFixture
) -> None:
    """Resources, templates, prompts, completion, a subscription and the server's log
    messages, all through the embedding API."""
    caplog.set_level(logging.DEBUG, logger="actors.server")
    await everything.ready()
    async with everything.sup.session(**everything.handlers("A")) as session:
        turn = await session.begin_turn()
        resources = {entry.uri: entry for entry in turn.resources()}
        static = next(uri for uri in resources if uri.startswith("demo://resource/static/document/"))
        assert resources[static].server == "everything"
        templates = {entry.uri_template for entry in turn.resource_templates()}
        assert "demo://resource/dynamic/text/{resourceId}" in templates
        read = await turn.read_resource(static)
        assert read.ok and read.text and read.tool == static, read
        made = await turn.read_resource("demo://resource/dynamic/text/7")  # only a template makes it
        assert made.ok and made.structured["contents"][0]["uri"] == "demo://resource/dynamic/text/7", made

        prompts = {entry.id: entry for entry in turn.prompts()}
        assert {"everything_simple-prompt", "everything_args-prompt", "everything_completable-prompt"} <= set(
            prompts
        )
        assert prompts["everything_args-prompt"].required == ("city",)
        got = await turn.get_prompt("everything_args-prompt", {"city": "Lisbon"})
        assert got.ok and "Lisbon" in got.text, got
        missing = await turn.get_prompt("everything_args-prompt", {})
        assert missing.error is not None and missing.error.code == "invalid_arguments"
        completed = await turn.complete(
            {"type": "ref/prompt", "name": "everything_completable-prompt"},
            {"name": "department", "value": "E"},
        )
        assert completed.ok and completed.text.splitlines() == ["Engineering"], completed

        # A subscription, and the server's log messages at the configured level (info).
        subscribed = await session.subscribe(static)
        assert subscribed.ok, subscribed
        assert (await turn.call("everything_toggle-subscriber-updates", {})).ok
        assert (await turn.call("everything_toggle-simulated-logging", {})).ok
        with trio.fail_after(20):
            update = await session.resource_updates.receive()
            await eventually(lambda: bool(_server_logs(caplog)))
        assert (update.uri, update.server, update.server_uri) == (static, "everything", static)
        assert all(record.levelno >= logging.INFO for record in _server_logs(caplog))
        assert (await session.unsubscribe(static)).ok


def _server_logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "actors.server" and r.fields["server"] == "everything"]  # type: ignore[attr-defined]
