"""The connection layer of the surface against a real peer: ``@modelcontextprotocol/
server-everything`` (npm, installed by .ci/setup) over stdio, through a ConnectionActor:
listing every kind, reading, getting a prompt, completing, subscribing, and the
server's log messages at the level we set."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.connection.actor import ConnectionActor
from actors.connection.messages import (
    Answered,
    CallOutcome,
    CallSucceeded,
    CallTool,
    ConnectionMessage,
    Published,
    ResourceUpdated,
    ServerListed,
    Subscribe,
    Unsubscribe,
)
from actors.spec import ServerSpec, Start
from actors.transports.stdio import StdioConnector
from tests.actors.transports.test_stdio_transport import eventually
from tests.end_to_end.test_real_peers import EVERYTHING


async def ask(mailbox: trio.MemorySendChannel[ConnectionMessage], method: str, params: Any) -> CallOutcome:
    reply, answers = trio.open_memory_channel[CallOutcome](1)
    await mailbox.send(CallTool(method, params, reply, method=method))
    with trio.fail_after(10):
        return await answers.receive()


def simulated(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The server's simulated log messages ("Error-level message" …) in our log."""
    return [
        r
        for r in caplog.records
        if r.name == "actors.server" and "message" in r.fields["data"]  # type: ignore[attr-defined]
    ]


async def test_server_everything_surface_through_a_connection_actor(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if not EVERYTHING.exists():
        reason = "npm is not on PATH" if shutil.which("npm") is None else ".ci/setup could not install it"
        pytest.skip(f"@modelcontextprotocol/server-everything is not installed: {reason}")
    caplog.set_level(logging.DEBUG, logger="actors.server")
    spec = ServerSpec(
        name="everything", command=(str(EVERYTHING), "stdio"), start=Start.EAGER, log_level="debug"
    )
    send, receive = trio.open_memory_channel[ConnectionMessage](64)
    publish, published = trio.open_memory_channel[Published](1000)
    actor = ConnectionActor(spec, StdioConnector(tmp_path), receive, publish)
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        with trio.fail_after(20):
            while not isinstance(listed := await published.receive(), ServerListed):
                pass
        assert listed.features.resources and listed.features.subscribe and listed.features.prompts
        assert listed.features.completions and listed.features.logging
        assert any(r.uri.startswith("demo://resource/static/document/") for r in listed.resources)
        assert "demo://resource/dynamic/text/{resourceId}" in {t.uri_template for t in listed.templates}
        prompts = {p.name: p for p in listed.prompts}
        assert prompts["args-prompt"].required == ("city",)

        read = await ask(send, "resources/read", {"uri": "demo://resource/dynamic/text/1"})
        assert isinstance(read, Answered), read
        assert read.result["contents"][0]["uri"] == "demo://resource/dynamic/text/1"

        prompt = await ask(send, "prompts/get", {"name": "args-prompt", "arguments": {"city": "Paris"}})
        assert isinstance(prompt, Answered), prompt
        assert "Paris" in prompt.result["messages"][0]["content"]["text"]

        completion = await ask(
            send,
            "completion/complete",
            {
                "ref": {"type": "ref/prompt", "name": "completable-prompt"},
                "argument": {"name": "department", "value": "E"},
            },
        )
        assert isinstance(completion, Answered), completion
        assert "Engineering" in completion.result["completion"]["values"]

        # Subscribe, then have the server send an update (it sends one at once).
        uri = "demo://resource/dynamic/text/1"
        reply, answers = trio.open_memory_channel[CallOutcome](1)
        updates, updated = trio.open_memory_channel[ResourceUpdated](10)
        await send.send(Subscribe(uri, "session-1", updates, reply))
        with trio.fail_after(10):
            assert isinstance(await answers.receive(), Answered)
        reply2, answers2 = trio.open_memory_channel[CallOutcome](1)
        await send.send(CallTool("toggle-subscriber-updates", {}, reply2))
        with trio.fail_after(10):
            assert isinstance(await answers2.receive(), CallSucceeded)
            assert await updated.receive() == ResourceUpdated("everything", uri)

        # The server's log messages, at the level we set (debug: all of them).
        reply3, answers3 = trio.open_memory_channel[CallOutcome](1)
        await send.send(CallTool("toggle-simulated-logging", {}, reply3))
        with trio.fail_after(10):
            assert isinstance(await answers3.receive(), CallSucceeded)
            await eventually(lambda: bool(simulated(caplog)))
        record = simulated(caplog)[0]
        assert record.fields["server"] == "everything"  # type: ignore[attr-defined]
        assert record.levelno >= logging.DEBUG

        reply4, answers4 = trio.open_memory_channel[CallOutcome](1)
        await send.send(Unsubscribe(uri, "session-1", reply4))
        with trio.fail_after(10):
            assert isinstance(await answers4.receive(), Answered)
        nursery.cancel_scope.cancel()
