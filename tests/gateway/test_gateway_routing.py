"""Server requests go to the client whose call caused them, and to no other
(fastmcp#3169, supergateway's broadcasts): two official SDK clients (handshake mode)
on ``/mcp``, three real SDK backends, every call at once asking its client either an
elicitation or a sampling question tagged with who called which backend. Each client
must get exactly its own questions, counted, and each call its own client's answer."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp.client.client import Client
from mcp.types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    TextContent,
)

from actors.spec import Scope, ServerSpec, Start
from tests.gateway.test_gateway_sdk_http import SDK_SERVER, sdk_client
from tests.support.admin import ALICE, BOB, TOKENS, admin_running, config_of

BACKENDS = ("one", "two", "three")
ROUNDS = 2
"""Calls per client, backend and kind at once: 2 clients x 3 backends x 2 kinds x 2 = 24."""


def backend(name: str, scope: Scope) -> ServerSpec:
    return ServerSpec(
        name=name,
        scope=scope,
        command=(sys.executable, SDK_SERVER),
        start=Start.EAGER,
        trusted=True,
        protocol="2025-11-25",  # the handshake era: its server requests are requests of its own
        shutdown_grace_s=0.5,
    )


class Asked:
    """What one client was asked, by kind and question."""

    def __init__(self, who: str) -> None:
        self.who = who
        self.questions: Counter[tuple[str, str]] = Counter()

    async def elicit(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        self.questions["elicit", params.message] += 1
        return ElicitResult(action="accept", content={"answer": f"{self.who} elicited"})

    async def sample(self, context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        content = params.messages[0].content
        assert isinstance(content, TextContent)
        self.questions["sample", content.text] += 1
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=f"{self.who} sampled"), model="test"
        )


def plan(who: str, rounds: int) -> list[tuple[str, str]]:
    """(tool, question) of every call ``who`` makes: each backend, each kind, ``rounds`` times."""
    return [
        (f"{name}_{'ask' if kind == 'elicit' else 'sample'}", f"{who}/{name}/{kind}/{n}")
        for name in BACKENDS
        for n in range(rounds)
        for kind in ("elicit", "sample")
    ]


def own_answer(who: str, question: str) -> str:
    if question.split("/")[2] == "elicit":
        return f"answered: {who} elicited"
    return f"sampled: {who} sampled"


@pytest.mark.parametrize("scope", [Scope.SESSION, Scope.SHARED])
async def test_two_clients_three_backends_elicitation_and_sampling_zero_misroutes(
    tmp_path: Path, scope: Scope
) -> None:
    """All calls at once. With ``scope: session`` backends each connection is one
    client's, so every question is answered, by its own client. A shared stdio backend
    carries nothing on the wire that ties a request to a call: while both clients'
    calls are in flight there, a request could be either's and goes to neither (the
    call fails saying so); never to the other. One at a time, every one is answered."""
    config = config_of(*(backend(name, scope) for name in BACKENDS), tokens=TOKENS)
    async with admin_running(config, tmp_path) as api:
        asked = {"alice": Asked("alice"), "bob": Asked("bob")}
        answers: dict[tuple[str, str], str] = {}

        async def call(who: str, client: Client, tool: str, question: str) -> None:
            argument = {"question": question} if tool.endswith("_ask") else {"prompt": question}
            result = await client.call_tool(tool, argument)
            answers[who, question] = result.content[0].text  # type: ignore[union-attr]

        with trio.fail_after(60):
            async with (
                sdk_client(
                    api.url, ALICE, elicitation=asked["alice"].elicit, sampling=asked["alice"].sample
                ) as a,
                sdk_client(api.url, BOB, elicitation=asked["bob"].elicit, sampling=asked["bob"].sample) as b,
            ):
                clients = {"alice": a, "bob": b}
                async with trio.open_nursery() as nursery:  # 24 calls in flight at once
                    for who, client in clients.items():
                        for tool, question in plan(who, ROUNDS):
                            nursery.start_soon(call, who, client, tool, question)
                for who, client in clients.items():  # then one at a time
                    for tool, question in plan(f"{who}-alone", 1):
                        await call(who, client, tool, question)

        for who in ("alice", "bob"):
            questions = asked[who].questions
            assert all(
                question.startswith(f"{who}/") or question.startswith(f"{who}-alone/")
                for _, question in questions
            )
            assert set(questions.values()) == {1}  # no question twice
            alone = [question for tool, question in plan(f"{who}-alone", 1)]
            assert [answers[who, q] for q in alone] == [own_answer(who, q) for q in alone], scope
            at_once = [question for _, question in plan(who, ROUNDS)]
            for question in at_once:
                text = answers[who, question]
                if scope is Scope.SESSION:
                    assert text == own_answer(who, question), (question, text)
                else:  # answered by its own client, or by none
                    assert text == own_answer(who, question) or "no handler is attached" in text, (
                        question,
                        text,
                    )
            answered = [q for q in at_once + alone if answers[who, q] == own_answer(who, q)]
            assert sorted(question for _, question in questions) == sorted(
                answered
            )  # counted: asked = answered
        assert len(answers) == 2 * len(BACKENDS) * 2 * (ROUNDS + 1)
