"""What the adapters' tests share (no tests of its own).

Each test runs one framework's own agent loop in-process, on ``supervisor.aio``, with
that framework's scripted model (no language model, no network) following a ``Plan``
(``tests/frameworks/scripted.py``: the calls it makes, one a step, and what the answers
it got were), against a real stdio server, ``tests/servers/mini_server.py`` named
``mini``. ``every_outcome`` is the script all three adapters run: a success, the
model's own mistake, a call the approver allows, one it denies and one over a rate
limit, and the server down and back, each answer read by the model and the run going on. The audit rows are
read from the state directory once the supervisor has closed.

The tests are sync functions that run their host under ``asyncio.run``
(``tests/support/aio_host.py``): pytest-trio claims every ``async def`` test.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from actors.connection.messages import Control
from actors.connection.states import State
from actors.spec import Start
from supervisor.aio import Approval, ApprovalRequest, Session, Supervisor
from supervisor.settings.model import Config, RateLimit, ToolSearchSettings, TrustRule, TrustSettings
from supervisor.store import Store
from tests.frameworks.scripted import Call, Plan, Script
from tests.frameworks.support import readme_recipe
from tests.support.aio_host import host, mini, state_of

T = TypeVar("T")

SERVER = "mini"
ADD, ECHO = f"{SERVER}_add", f"{SERVER}_echo"
UNAVAILABLE = f"unavailable: mcp server {SERVER} is unavailable"
"""How a call made while the server is down begins, as the model reads it."""
FIVE = Call(ADD, {"a": 2, "b": 3})


def config(*, tool_search: bool = False, surface: bool = False) -> Config:
    """``mini`` (eager, trusted; ``surface``: with its resource and prompt), search on or
    off, ``echo`` asked about and limited to two calls (then one every 1,000 s)."""
    return Config(
        servers=(mini(SERVER, *(["--surface"] if surface else []), start=Start.EAGER),),
        tool_search=ToolSearchSettings(enabled=tool_search),
        trust=TrustSettings(rules=(TrustRule(f"mcp:{SERVER}:echo", "*", "ask"),), approval_timeout_s=10),
        limits=(RateLimit(per_s=0.001, burst=2, tool="echo"),),
    )


def in_session(
    state_dir: Path,
    run: Callable[[Supervisor, Session], Awaitable[T]],
    *,
    tool_search: bool = False,
    surface: bool = False,
    approver: Approver | None = None,
) -> T:
    """``run(sup, session)`` under ``asyncio.run``: a ``supervisor.aio`` supervisor of
    ``config()`` with ``mini`` serving (so the first step's turn shows it available), and
    one session; returns once the supervisor has closed (its audit rows are on disk)."""

    async def main() -> T:
        settings = config(tool_search=tool_search, surface=surface)
        async with Supervisor.open(settings, approver, state_dir=state_dir) as sup:
            await state_of(sup, SERVER, State.STEADY)
            async with sup.session() as session:
                return await run(sup, session)

    return host(main)


class Approver:
    """The host's approver (an asyncio coroutine function, run on the host's loop):
    allows the first call it is asked about and denies the next; keeps what it was asked."""

    def __init__(self) -> None:
        self._decisions = ["allow", "deny"]
        self.asked: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> Approval:
        self.asked.append(request)
        return Approval(self._decisions.pop(0), remember="once")


def every_outcome(sup: Supervisor) -> Script:
    """A success; arguments the schema refuses; ``echo`` allowed, then denied, by the
    approver, then over its rate limit; the server disabled, so the call meets it down in
    a turn that began with it serving; enabled again (and serving) before the next call,
    which is still refused, as its turn began while the server was down (docs/turns.md);
    then a success again."""

    async def script() -> AsyncGenerator[Call, str]:
        yield FIVE
        yield Call(ADD, {"a": "two"})
        yield Call(ECHO, {"text": "allowed"})
        yield Call(ECHO, {"text": "denied"})
        yield Call(ECHO, {"text": "limited"})
        await sup.command(SERVER, Control.DISABLE)
        await state_of(sup, SERVER, State.DISABLED)
        yield FIVE
        await sup.command(SERVER, Control.ENABLE)
        await state_of(sup, SERVER, State.STEADY)
        yield FIVE
        yield FIVE

    return script


def assert_every_outcome(plan: Plan, approver: Approver, state_dir: Path) -> None:
    """What ``every_outcome`` must leave: each answer as the model read it, the approver
    asked twice, and one audit row per call with the outcome the model saw."""
    answers = [text for _, text in plan.answers]
    five, invalid, allowed, denied, limited, down, refused, later = answers
    assert (five, allowed, later) == ("5", "allowed", "5"), answers
    assert invalid.startswith(f"invalid_arguments: invalid arguments for {ADD}: $"), invalid
    assert denied == f"denied: call to {ECHO} denied by the approver", denied
    assert limited.startswith("rate_limited: ") and limited.endswith(" ms)"), limited
    assert down.startswith(UNAVAILABLE), down
    assert refused.startswith(f"{UNAVAILABLE} in this turn (disabled when it began)"), refused
    assert [(request.tool, request.arguments) for request in approver.asked] == [
        (ECHO, {"text": "allowed"}),
        (ECHO, {"text": "denied"}),
    ]
    assert audit_outcomes(state_dir, ADD) == ["ok", "invalid_arguments", "unavailable", "unavailable", "ok"]
    assert audit_outcomes(state_dir, ECHO) == ["ok", "denied", "rate_limited"]


def found_then_called() -> Script:
    """With ``tool_search`` on: a search on the first step, a call of its find on the next."""

    async def script() -> AsyncGenerator[Call, str]:
        found = yield Call("tool_search", {"query": "add two numbers"})
        assert f'"id":"{ADD}"' in found, found
        yield FIVE

    return script


def assert_found_then_called(plan: Plan, offered: Sequence[Sequence[str]], state_dir: Path) -> None:
    """The find was offered on the step after the search, not before, and called there."""
    assert plan.answers[-1] == (ADD, "5"), plan.answers
    assert offered[0] == ["tool_search"] and ADD in offered[1], offered
    assert audit_outcomes(state_dir, "tool_search") == ["ok"]
    assert audit_outcomes(state_dir, ADD) == ["ok"]


def audit_outcomes(state_dir: Path, tool: str) -> list[str]:
    """The outcomes of ``tool``'s audit rows, oldest first (after the supervisor closed)."""
    with Store.open(state_dir / "supervisor.db") as store:
        rows = store.audit_rows(limit=1000)
    return [row.outcome for row in reversed(rows) if row.tool == tool]


async def run_readme(containing: str, **names: Any) -> dict[str, Any]:
    """Run the README's python block (of the frameworks' section) that holds ``containing``
    as written, top-level ``await`` included, with ``names`` defined; its namespace."""
    code = compile(readme_recipe(containing), "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace = dict(names)
    ran = eval(code, namespace)
    if inspect.iscoroutine(ran):
        await ran
    return namespace
