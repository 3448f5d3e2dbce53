"""Trust prompts in process, on virtual time: the wait for the client's answer does not
use the call's timeout and is bounded by ``approval_timeout_s``; ``trust.operator_only``
and the gateway's shared new-era state keep asks with the approver; the form masks
secrets and is bounded; the config setting is checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import trio
import trio.testing

from actors.connection.client_side import ClientSide
from actors.log_events import learn_secrets
from actors.spec import ServerSpec, Start
from supervisor import Approval, ApprovalRequest
from supervisor.sessions.trust_prompts import MAX_ARGUMENTS_BYTES, can_elicit_forms, form
from supervisor.settings.model import Config, ToolSearchSettings, TrustRule, TrustSettings
from tests.sessions.test_turn_policy import running
from tests.settings.test_config_loader import fail, load
from tests.support.fakes import FakeServer, FakeSession, echo_handler

# Every test takes ``thread_safe_clock`` (conftest): virtual time that waits for the store's thread.

TOOLS = [{"name": "note", "description": "Keep a note", "inputSchema": {"type": "object"}}]
ASKED = TrustRule("mcp:fake:note", "*", "ask")


def config(call_timeout_s: float = 1.0, operator_only: tuple[str, ...] = ()) -> Config:
    spec = ServerSpec(name="fake", command=("fake",), start=Start.EAGER, call_timeout_s=call_timeout_s)
    trust = TrustSettings(rules=(ASKED,), approval_timeout_s=120.0, operator_only=operator_only)
    return Config(servers=(spec,), tool_search=ToolSearchSettings(enabled=False), trust=trust)


def taking(seconds: float) -> Any:
    """A backend call handler that answers after ``seconds``."""

    async def slow(session: FakeSession, request: Any) -> dict[str, Any] | None:
        await trio.sleep(seconds)
        return await echo_handler(session, request)

    return slow


class User:
    """A session's elicitation handler: waits ``after`` seconds, then chooses."""

    def __init__(self, choice: str = "allow_once", after: float = 0.0) -> None:
        self.choice, self.after = choice, after
        self.asked: list[Any] = []

    async def __call__(self, server: str, params: Any) -> dict[str, Any]:
        self.asked.append((server, params))
        await trio.sleep(self.after)
        return {"action": "accept", "content": {"decision": self.choice}}


async def test_the_wait_for_the_client_does_not_use_up_the_calls_timeout(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    server = FakeServer(TOOLS)
    server.call_handler = taking(0.5)  # within the call's 1 s
    slow_user = User(after=30)  # far beyond it
    async with (
        running(server, config(call_timeout_s=1.0), tmp_path) as sup,
        sup.session(elicitation=slow_user) as session,
    ):
        turn = await session.begin_turn()
        began = trio.current_time()
        answered = await turn.call("fake_note", {"text": "after a long think"})
        assert answered.ok, answered.error
        assert trio.current_time() - began == 30.5  # the prompt's 30 s, then the call's 0.5 s
        assert len(slow_user.asked) == 1 and slow_user.asked[0][0] == ""  # the supervisor asks
        server.call_handler = taking(2)  # the call's own timeout still applies after approval
        timed_out = await turn.call("fake_note", {"text": "too slow"})
        assert timed_out.error is not None and timed_out.error.code == "timeout"


async def test_a_client_that_never_answers_is_denied_after_approval_timeout_s(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    server = FakeServer(TOOLS)
    asked = trio.Event()

    async def silent(server_name: str, params: Any) -> dict[str, Any]:
        asked.set()
        await trio.sleep_forever()
        raise AssertionError

    async with running(server, config(), tmp_path) as sup, sup.session(elicitation=silent) as session:
        turn = await session.begin_turn()
        began = trio.current_time()
        result = await turn.call("fake_note", {"text": "x"})
        assert asked.is_set() and trio.current_time() - began == 120.0
        assert result.error is not None and result.error.code == "denied"
        assert "within 120 s" in result.error.message
    assert server.calls() == []


async def test_operator_only_permissions_and_the_shared_new_era_state_ask_the_approver(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    server = FakeServer(TOOLS)
    approvals: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Approval:
        approvals.append(request)
        return Approval("allow")

    user = User()
    cfg = config(operator_only=("mcp:fake:*",))
    async with running(server, cfg, tmp_path, approver) as sup, sup.session(elicitation=user) as session:
        assert (await (await session.begin_turn()).call("fake_note", {"text": "x"})).ok
        assert len(approvals) == 1 and user.asked == []
    async with (
        running(server, config(), tmp_path / "2", approver) as sup,
        sup.session(elicitation=user) as session,
    ):
        assert (await (await session.begin_turn()).call("fake_note", {"text": "y"})).ok
        assert len(approvals) == 1 and len(user.asked) == 1  # the client, not the approver
        session.prompts_client = False  # as the gateway's per-tenant state of new-era clients
        assert (await (await session.begin_turn()).call("fake_note", {"text": "z"})).ok
        assert len(approvals) == 2 and len(user.asked) == 1


def test_the_form_masks_secrets_bounds_the_arguments_and_has_no_default() -> None:
    arguments = {"text": "uses s3cr3t-value", "api_token": "tok-123456", "blob": "x" * 10_000}
    request = ApprovalRequest("apr-1", "fake_note", "fake", "mcp:fake:note", arguments, "a reason", "s", "t")
    learn_secrets(["s3cr3t-value"])  # as Supervisor.open does with the config's
    params = form(request)
    shown = params["_meta"]["mcp-supervisor/approval"]["arguments"]
    assert "s3cr3t-value" not in params["message"] and "tok-123456" not in params["message"]
    assert shown.startswith('{"text":"uses ***","api_token":"***"') and shown in params["message"]
    assert len(shown.encode()) <= MAX_ARGUMENTS_BYTES
    choice = params["requestedSchema"]["properties"]["decision"]
    assert "default" not in choice and params["requestedSchema"]["required"] == ["decision"]
    assert choice["enum"] == [item["const"] for item in choice["oneOf"]]
    assert orjson.loads(orjson.dumps(params)) == params  # plain JSON


def test_only_a_client_that_answers_and_declared_form_elicitation_is_asked() -> None:
    async def handler(server: str, method: str, params: Any) -> None:
        return None

    def side(capabilities: dict[str, Any], answers: bool = True) -> ClientSide:
        return ClientSide("s", handler if answers else None, capabilities)

    assert can_elicit_forms(side({"elicitation": {}}))  # the form mode's old spelling
    assert can_elicit_forms(side({"elicitation": {"form": {}, "url": {}}}))
    assert not can_elicit_forms(side({"elicitation": {"url": {}}}))
    assert not can_elicit_forms(side({"sampling": {}}))
    assert not can_elicit_forms(side({"elicitation": {}}, answers=False))


def test_operator_only_is_read_and_checked(tmp_path: Path) -> None:
    loaded = load(tmp_path, {"trust": {"operator_only": ["mcp:payments:*", "*"]}})
    assert loaded.trust.operator_only == ("mcp:payments:*", "*")
    assert load(tmp_path, {}).trust.operator_only == ()
    error = fail(tmp_path, {"trust": {"operator_only": ["payments"]}})
    assert error.json_path == "$.trust.operator_only[0]"
    assert error.problem == 'expected "mcp:<server>:<tool>" (globs allowed), got "payments"'
    error = fail(tmp_path, {"trust": {"operator_only": "mcp:*"}})
    assert error.json_path == "$.trust.operator_only" and "a list of permission globs" in error.problem
