"""A scripted model's moves, for frameworks whose model interface is a class to
implement (LangChain's chat models, the Agents SDK's ``Model``): no language model.

A ``Plan`` is an async generator that yields the tool calls the model makes and is
sent the text of each answer the agent got back, so the script reads what reached the
agent before its next move; each framework's test wraps it in that framework's model
class (a ``Scripted`` with a ``plan`` attribute). ``run_readme_agent`` runs a README
recipe's agent with such a model against the gateway; ``kill_and_recover`` is the
script of the kill-and-recover step, which ``recovering_run`` runs through the gateway
and checks.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs

from tests.frameworks.support import (
    BACKEND,
    GATEWAY_URL,
    UNAVAILABLE,
    Gateway,
    Portal,
    gateway,
    in_asyncio,
    run_recipe,
)

FINAL = "done"
"""What a scripted model answers once its plan has no call left."""
WHOAMI, ECHO, ADD = (f"{BACKEND}_{tool}" for tool in ("whoami", "echo", "add"))


@attrs.frozen
class Call:
    """One tool call a scripted model makes."""

    tool: str
    arguments: dict[str, Any] = attrs.field(factory=dict)


Script = Callable[[], AsyncGenerator[Call, str]]


class Plan:
    """A scripted model's moves; ``answers`` keeps (tool, the text the agent got) of each
    call, in order: what reached the agent."""

    def __init__(self, script: Script) -> None:
        self._moves = script()
        self._pending: Call | None = None
        self.calls = 0
        self.answers: list[tuple[str, str]] = []

    async def next(self, answer: str | None) -> Call | None:
        """The next call, given the text of the answer to the last one (None before the
        first); None once the script is done."""
        try:
            if self._pending is None:
                call = await anext(self._moves)
            else:
                assert answer is not None, f"the agent got no answer to {self._pending}"
                self.answers.append((self._pending.tool, answer))
                call = await self._moves.asend(answer)
        except StopAsyncIteration:
            self._pending = None
            return None
        self._pending = call
        self.calls += 1
        return call


def calls(*made: Call) -> Script:
    """A script of fixed calls."""

    async def script() -> AsyncGenerator[Call, str]:
        for call in made:
            yield call

    return script


async def run_readme_agent(
    gw: Gateway, recipe: str, scripted: Any, script: Callable[[Portal], Script], **names: Any
) -> Any:
    """What the README ``recipe``'s ``ask("go")`` returns, run against ``gw``'s ``/mcp``
    with ``scripted`` as its model following ``script(portal)`` (``names``: more of what
    the recipe expects defined)."""

    async def agent(portal: Portal) -> Any:
        scripted.plan = Plan(script(portal))
        defined = run_recipe(recipe, {GATEWAY_URL: gw.url}, token=gw.token, model=scripted, **names)
        return await defined["ask"]("go")

    return await in_asyncio(agent)


def pid_in(answer: str) -> int | None:
    """The pid a ``whoami`` answer names (None for an error's text)."""
    try:
        return int(json.loads(answer)["pid"])
    except (ValueError, KeyError, TypeError):
        return None


def kill_and_recover(
    prefix: str, kill: Callable[[int], Awaitable[None]], back: Callable[[], Awaitable[None]]
) -> Script:
    """``whoami``; ``kill`` the pid it named (SIGKILL, until the process is seen gone);
    ``echo``, made while the server is down; ``back()``; ``whoami`` again. These agents
    list their tools before each model step, so the last call's step listed while the
    server was down: the gateway runs a call whose server came back since in a new turn."""

    async def script() -> AsyncGenerator[Call, str]:
        pid = pid_in((yield Call(f"{prefix}whoami")))
        assert pid is not None
        await kill(pid)
        yield Call(f"{prefix}echo", {"text": "while down"})
        await back()
        yield Call(f"{prefix}whoami")

    return script


async def recovering_run(tmp_path: Path, recipe: str, scripted: Any, **names: Any) -> tuple[Any, float]:
    """``kill_and_recover`` through the gateway, by ``run_readme_agent``, checked by
    ``recovered``: what the run returned, and how long the backend took to come back
    (the anchor is given as long)."""
    async with gateway(tmp_path) as gw:
        result = await run_readme_agent(gw, recipe, scripted, _through(gw), **names)
        await recovered(gw, scripted.plan)
        return result, gw.recovered_in_s


def _through(gw: Gateway) -> Callable[[Portal], Script]:
    """``kill_and_recover`` through the gateway: its kill, its wait for the reconnect."""

    def script(portal: Portal) -> Script:
        async def kill(pid: int) -> None:
            await portal.run(gw.kill, pid)

        async def back() -> None:
            await portal.run(gw.steady)

        return kill_and_recover(f"{BACKEND}_", kill, back)

    return script


async def recovered(gw: Gateway, plan: Plan) -> None:
    """What ``_through(gw)`` must leave: the call made while the backend was down reached
    the agent as an error text the model reads, a later call of the same run reached
    the new backend process, and the audit rows say so."""
    (_, first), down, (_, later) = plan.answers
    assert down == (ECHO, UNAVAILABLE), plan.answers
    assert pid_in(later) not in (None, pid_in(first)), plan.answers
    # Each call left its audit row, with the outcome the agent saw.
    assert await gw.outcomes(WHOAMI) == ["ok", "ok"]
    assert await gw.outcomes(ECHO) == ["unavailable"]


async def kill_directly(pid: int, bound_s: float = 10) -> None:
    """``kill`` with nobody in between (on the asyncio side): SIGKILL, then until the
    process has exited."""
    os.kill(pid, signal.SIGKILL)
    async with asyncio.timeout(bound_s):
        while True:
            if not _alive(pid):
                return
            await asyncio.sleep(0.01)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")
