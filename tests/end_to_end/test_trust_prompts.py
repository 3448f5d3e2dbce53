"""Trust prompts through MCP elicitation, with the official SDK client as the user's
client: on ``/mcp`` of the real admin server and on the real ``mcp-supervisor stdio``
command, both in front of mini_server.py, whose ``echo`` a trust rule asks about.

Allow once asks again; allow for the session lasts for that session only; allow
always outlives it; deny, decline, cancel, and an answer that makes no choice (what a
client filling in defaults sends: the form has none) are denials that never reach the
backend. A client without elicitation gets what it got before: the operator's
approvals on HTTP, a denial at once on stdio."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx2
import trio
from mcp import ClientSession
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, ElicitRequestParams, ElicitResult

from supervisor.settings.model import AdminSettings, Config, TrustRule, TrustSettings
from tests.gateway.test_stdio_front import CLI, MINI
from tests.support.admin import ALICE, TOKENS, admin_running, mini_spec, wait_for

ASKED_RULE = TrustRule("mcp:mini:echo", "*", "ask")
REASON = "trust rule [0] permission='mcp:mini:echo' pattern='*' matched 'mcp:mini:echo': ask"


class User:
    """An elicitation callback that answers from a script and keeps what it was asked."""

    def __init__(self, *answers: ElicitResult) -> None:
        self.answers = list(answers)
        self.asked: list[ElicitRequestParams] = []

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params)
        return self.answers.pop(0)


def choose(choice: str) -> ElicitResult:
    return ElicitResult(action="accept", content={"decision": choice})


def config(tmp_path: Path, approval_timeout_s: float = 30) -> Config:
    spec = mini_spec("mini", "--calls-log", str(tmp_path / "calls.log"))
    return Config(
        servers=(spec,),
        admin=AdminSettings(tokens=TOKENS),
        trust=TrustSettings(rules=(ASKED_RULE,), approval_timeout_s=approval_timeout_s),
    )


def backend_calls(tmp_path: Path) -> list[str]:
    """The texts the backend's echo was called with."""
    log = tmp_path / "calls.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [json.loads(line)["arguments"].get("text") for line in lines]


def http_client(url: str, user: User | None) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}, timeout=10)
    transport = streamable_http_client(f"{url}/mcp", http_client=http)
    return Client(transport, mode="legacy", elicitation_callback=user)


def text(result: CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


async def echo(client: Client | ClientSession, said: str) -> CallToolResult:
    return await client.call_tool("mini_echo", {"text": said})


async def test_allow_once_asks_at_every_call_with_a_form_that_names_it_all(tmp_path: Path) -> None:
    user = User(choose("allow_once"), choose("allow_once"))
    async with admin_running(config(tmp_path), tmp_path / "state") as api:
        with trio.fail_after(20):
            async with http_client(api.url, user) as client:
                first, second = await echo(client, "one"), await echo(client, "two")
    assert (text(first), text(second)) == ("one", "two") and not first.is_error
    assert len(user.asked) == 2  # once is once
    assert backend_calls(tmp_path) == ["one", "two"]
    params = user.asked[0]
    assert params.mode == "form"
    for fact in ("mini_echo", "MCP server mini", "permission: mcp:mini:echo", REASON, '{"text":"one"}'):
        assert fact in params.message, (fact, params.message)
    schema = params.requested_schema
    assert schema["required"] == ["decision"]
    choice = schema["properties"]["decision"]
    assert "default" not in choice  # SEP-1034: a client that fills in defaults cannot approve
    choices = [item["const"] for item in choice["oneOf"]]
    assert choices == ["allow_once", "allow_session", "allow_always", "deny"]
    assert params.meta is not None and params.meta["mcp-supervisor/approval"]["permission"] == "mcp:mini:echo"


async def test_allow_for_the_session_lasts_for_that_session_only(tmp_path: Path) -> None:
    first_user, second_user = User(choose("allow_session")), User(choose("allow_once"))
    async with admin_running(config(tmp_path), tmp_path / "state") as api:
        with trio.fail_after(20):
            async with http_client(api.url, first_user) as client:
                assert text(await echo(client, "a")) == "a"
                assert text(await echo(client, "b")) == "b"
            async with http_client(api.url, second_user) as client:
                assert text(await echo(client, "c")) == "c"
    assert len(first_user.asked) == 1  # the second call of the session was not asked
    assert len(second_user.asked) == 1  # a new session is
    assert backend_calls(tmp_path) == ["a", "b", "c"]


async def test_allow_always_outlives_the_session(tmp_path: Path) -> None:
    first_user, second_user = User(choose("allow_always")), User()
    async with admin_running(config(tmp_path), tmp_path / "state") as api:
        with trio.fail_after(20):
            async with http_client(api.url, first_user) as client:
                assert text(await echo(client, "a")) == "a"
            async with http_client(api.url, second_user) as client:
                assert text(await echo(client, "b")) == "b"
        await api.sup.store.flush()
        remembered = await api.sup.store.read(lambda s: s.approvals())
    assert len(first_user.asked) == 1 and second_user.asked == []
    assert [action for _fingerprint, action in remembered.values()] == ["allow"]


async def test_deny_decline_cancel_and_answers_without_a_choice_are_denials(tmp_path: Path) -> None:
    answers: Sequence[tuple[ElicitResult, str]] = [
        (choose("deny"), "call to mini_echo denied by the user"),
        (ElicitResult(action="decline"), "the user declined the approval prompt for mini_echo; denied"),
        (ElicitResult(action="cancel"), "the user dismissed the approval prompt for mini_echo; denied"),
        (ElicitResult(action="accept", content={}), "made no choice"),  # a client's defaults: none
        (ElicitResult(action="accept"), "made no choice"),
        (ElicitResult(action="accept", content={"decision": "yes"}), "made no choice"),
    ]
    user = User(*(answer for answer, _ in answers))
    async with admin_running(config(tmp_path), tmp_path / "state") as api:
        with trio.fail_after(20):
            async with http_client(api.url, user) as client:
                results = [await echo(client, f"try {n}") for n in range(len(answers))]
    for result, (_, why) in zip(results, answers, strict=True):
        assert result.is_error and why in text(result), text(result)
        assert result.meta == {"mcp-supervisor/error": {"code": "denied"}}
    assert len(user.asked) == len(answers)
    assert backend_calls(tmp_path) == []  # nothing denied reached the backend


async def test_without_elicitation_the_operator_approves_on_http_as_before(tmp_path: Path) -> None:
    async with admin_running(config(tmp_path), tmp_path / "state") as api:
        operator = api.http(ALICE)
        with trio.fail_after(20):
            async with http_client(api.url, None) as client, trio.open_nursery() as nursery:
                results: list[CallToolResult] = []

                async def call() -> None:
                    results.append(await echo(client, "waited"))

                nursery.start_soon(call)
                pending = await wait_for(operator, "/v1/approvals", lambda listed: listed["approvals"])
                (item,) = pending["approvals"]
                assert item["permission"] == "mcp:mini:echo"
                answer = {"decision": "allow", "remember": "once"}
                answered = await operator.request("POST", f"/v1/approvals/{item['id']}", json=answer)
                assert answered.status == 204
    assert text(results[0]) == "waited" and backend_calls(tmp_path) == ["waited"]


def stdio_params(tmp_path: Path) -> StdioServerParameters:
    servers = {
        "mini": {"command": sys.executable, "args": [MINI, "--calls-log", str(tmp_path / "calls.log")]}
    }
    file = tmp_path / "config.json"
    rules = [{"permission": "mcp:mini:echo", "action": "ask"}]
    file.write_text(json.dumps({"servers": servers, "trust": {"rules": rules}}))
    command = ["stdio", "--config", str(file), "--state-dir", str(tmp_path / "state")]
    return StdioServerParameters(command=str(CLI), args=command)


async def test_the_stdio_front_asks_a_client_that_elicits(tmp_path: Path) -> None:
    user = User(choose("allow_session"), ElicitResult(action="decline"))
    with trio.fail_after(30):
        async with (
            stdio_client(stdio_params(tmp_path)) as (read, write),
            ClientSession(read, write, elicitation_callback=user) as client,
        ):
            await client.initialize()
            assert text(await echo(client, "a")) == "a"
            assert text(await echo(client, "b")) == "b"  # for the session: not asked
            assert len(user.asked) == 1 and "permission: mcp:mini:echo" in user.asked[0].message
    assert backend_calls(tmp_path) == ["a", "b"]


async def test_the_stdio_front_denies_at_once_a_client_that_does_not_elicit(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with (
            stdio_client(stdio_params(tmp_path)) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            began = trio.current_time()
            result = await echo(client, "a")
            assert trio.current_time() - began < 5  # at once, not after approval_timeout_s (120 s)
    assert result.is_error and "no operator to ask" in text(result)
    assert backend_calls(tmp_path) == []
