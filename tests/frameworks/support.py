"""What the framework tests share (no tests of its own).

Each framework test runs the framework's own MCP client, in its own agent loop where it
has one, against one backend, ``tests/servers/mini_server.py --whoami`` named ``mini``
(its ``whoami`` tool answers the backend's pid), and SIGKILLs that backend between two of
the agent's tool calls: through the gateway (``gateway``: ``serve``'s stack, ``/mcp`` with a
token) and, as the anchor, connected to the backend directly (``DIRECT``).

The frameworks' clients run on asyncio (the FastMCP client starts asyncio tasks), our
tests under Trio with ``serve`` in the test's own loop. ``in_asyncio`` runs a
framework's coroutine under ``asyncio.run`` in a thread of its own; the ``Portal`` it
hands in lets that coroutine await something on the Trio side (the kill, the wait for
the reconnect) without blocking either loop.

``stdio_front`` is the other way in, ``mcp-supervisor stdio`` as a subprocess the
framework launches itself; its log (stderr, to a file) says when the backend is back,
and its state directory keeps the audit rows for ``audit_outcomes`` once it exited.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import attrs
import trio

from actors.connection.states import State
from supervisor.settings.model import ToolSearchSettings, TrustRule
from supervisor.store import Store
from tests.support.admin import ALICE, MINI, TOKENS, Running, admin_running, config_of, mini_spec, until
from tests.support.paths import REPO

T = TypeVar("T")
BACKEND = "mini"
DIRECT = (sys.executable, MINI, "--whoami")
"""The backend's command line, for a framework connected to it with nobody in between."""
UNAVAILABLE = f"mcp server {BACKEND} is unavailable"
"""What a call gets from the gateway while the backend is down."""
MCP_SUPERVISOR = str(REPO / ".venv" / "bin" / "mcp-supervisor")
RECOVERY_BOUND_S = 15.0
"""The backend is back after the first reconnect delay (about 1 s); a busy machine may take longer."""


class Portal:
    """The Trio side, for code running under ``in_asyncio``."""

    def __init__(self, token: trio.lowlevel.TrioToken) -> None:
        self._token = token

    async def run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Await ``fn(*args)`` in the test's Trio loop, leaving the asyncio loop running."""
        return await asyncio.to_thread(trio.from_thread.run, fn, *args, trio_token=self._token)


async def in_asyncio(main: Callable[[Portal], Coroutine[Any, Any, T]], timeout_s: float = 60) -> T:
    """``main(portal)`` under ``asyncio.run`` in a thread of its own, bounded by ``timeout_s``."""
    portal = Portal(trio.lowlevel.current_trio_token())

    def run() -> T:
        return asyncio.run(asyncio.wait_for(main(portal), timeout_s))

    return await trio.to_thread.run_sync(run)


@attrs.define
class Gateway:
    """``serve`` with the backend behind ``/mcp``; see the module docstring."""

    api: Running
    token: str = ALICE
    recovered_in_s: float = 0.0
    """How long the last ``kill`` … ``steady`` took: what the anchor is given too."""
    _killed_at: float = 0.0

    @property
    def url(self) -> str:
        return f"{self.api.url}/mcp"

    async def kill(self, pid: int) -> None:
        """SIGKILL the backend ``pid``; return once the supervisor saw it go."""
        os.kill(pid, signal.SIGKILL)
        self._killed_at = time.monotonic()
        with trio.fail_after(5):
            await self.api.sup.router.cell.wait_until(lambda c: c.servers[BACKEND].state is not State.STEADY)

    async def steady(self) -> None:
        """Return once the backend is serving again (bounded)."""
        with trio.fail_after(RECOVERY_BOUND_S):
            await self.api.sup.router.cell.wait_until(lambda c: c.servers[BACKEND].state is State.STEADY)
        self.recovered_in_s = time.monotonic() - self._killed_at

    async def outcomes(self, tool: str) -> list[str]:
        """The outcomes of ``tool``'s audit rows, oldest first."""
        await self.api.sup.store.flush()
        rows = await self.api.sup.store.read(lambda s: s.audit_rows(limit=1000))
        return [row.outcome for row in reversed(rows) if row.tool == tool]


@asynccontextmanager
async def gateway(
    tmp_path: Path, *, tool_search: bool = False, ask: Sequence[str] = ()
) -> AsyncIterator[Gateway]:
    """``serve``'s stack with the backend steady behind ``/mcp``; ``tool_search``: search on
    whatever the tool count; ``ask``: permissions a trust rule asks about."""
    config = config_of(mini_spec(BACKEND, "--whoami"), tokens=TOKENS, approval_timeout_s=10)
    rules = tuple(TrustRule(permission, "*", "ask") for permission in ask)
    search = ToolSearchSettings(enabled=True) if tool_search else ToolSearchSettings()
    config = attrs.evolve(config, tool_search=search, trust=attrs.evolve(config.trust, rules=rules))
    async with admin_running(config, tmp_path) as api:
        with trio.fail_after(RECOVERY_BOUND_S):
            await api.sup.router.cell.wait_until(lambda c: c.servers[BACKEND].state is State.STEADY)
        yield Gateway(api)


@attrs.frozen
class StdioFront:
    """A config for ``mcp-supervisor stdio`` with the backend, and where its log and rows go."""

    config: Path
    log: Path
    state_dir: Path

    def logged(self, state: str) -> int:
        """How many times the front's log says the backend entered ``state``."""
        text = self.log.read_text() if self.log.exists() else ""
        return text.count(f"state server={BACKEND} state={state} ")

    async def until_logged(self, state: str, times: int) -> None:
        """Return once the backend entered ``state`` ``times`` times (bounded)."""
        await until(lambda: self.logged(state) >= times, timeout_s=RECOVERY_BOUND_S)

    def audit_outcomes(self, tool: str) -> list[str]:
        """The outcomes of ``tool``'s audit rows, oldest first (after the front exited)."""
        with Store.open(self.state_dir / "supervisor.db") as store:
            rows = store.audit_rows(limit=1000)
        return [row.outcome for row in reversed(rows) if row.tool == tool]


def launched_here(transport: Any, front: StdioFront) -> None:
    """A recipe's FastMCP stdio transport, set for a test: the front's log to its file, and
    its process ended with the session (FastMCP keeps it alive for the next by default)."""
    transport.keep_alive, transport.log_file = False, front.log


def stdio_front(tmp_path: Path, *, ask: Sequence[str] = ()) -> StdioFront:
    """Write the config of a ``mcp-supervisor stdio`` that serves the backend (eager,
    trusted; ``ask``: permissions a rule asks about)."""
    state_dir = tmp_path / "stdio-state"
    config: Mapping[str, Any] = {
        "servers": {BACKEND: {"command": list(DIRECT), "trusted": True, "start": "eager"}},
        "trust": {"rules": [{"permission": permission, "action": "ask"} for permission in ask]},
        "state_dir": str(state_dir),
    }
    path = tmp_path / "stdio-front.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return StdioFront(path, tmp_path / "stdio-front.log", state_dir)


# --------------------------------------------------------------------- the README's recipes

README_SECTION = "### From pydantic-ai / LangChain / the OpenAI Agents SDK"
GATEWAY_URL = "http://127.0.0.1:8765/mcp"
"""The recipes' ``/mcp`` (``serve``'s default address); a test puts its own in."""


def readme_recipe(containing: str) -> str:
    """The one python block of the README's framework section that holds ``containing``."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index(README_SECTION) :].split("\n### ", 1)[0]
    found = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    blocks = [block for block in found if containing in block]
    assert len(blocks) == 1, f"{len(blocks)} python blocks of {README_SECTION!r} hold {containing!r}"
    return blocks[0]


def run_recipe(code: str, replacements: Mapping[str, str], **names: Any) -> dict[str, Any]:
    """Run a recipe as the README writes it, but for ``replacements`` (each must be in it,
    so the README and its test change together), with ``names`` defined; its namespace."""
    for written, put in replacements.items():
        assert written in code, f"the recipe no longer holds {written!r}:\n{code}"
        code = code.replace(written, put)
    namespace = dict(names)
    exec(compile(code, "README.md", "exec"), namespace)
    return namespace


def front_replacements(front: StdioFront) -> dict[str, str]:
    """What a stdio recipe names, made this test's: the installed command, its config."""
    return {'"mcp-supervisor"': json.dumps(MCP_SUPERVISOR), '"config.json"': json.dumps(str(front.config))}
