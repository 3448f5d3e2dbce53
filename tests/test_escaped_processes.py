"""A server that daemonizes a grandchild (its own session, SIGTERM ignored, our pipes
kept open) and then exits must not hide its death, and must leave no process behind.
Real processes, real clock."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import trio

from actors.connection.spec import ServerSpec
from actors.connection.states import State
from supervisor import Supervisor
from supervisor.settings.model import Config

MINI = str(Path(__file__).parent / "servers" / "mini_server.py")
BOUND_S = 5.0  # a bound for the test; the event itself must come well under 1 s


def mini_spec(name: str, *flags: str) -> ServerSpec:
    return ServerSpec(
        name,
        command=(sys.executable, MINI, *flags),
        trusted=True,
        shutdown_grace_s=0.5,
        call_timeout_s=30.0,
        reconnect_schedule_s=(30.0,),
    )


def escaped_pid(last_error: str | None) -> int:
    found = re.search(r"escaped child pid=(\d+)", last_error or "")
    assert found is not None, last_error
    return int(found[1])


@contextlib.contextmanager
def killed_at_the_end(pids: list[int]) -> Iterator[None]:
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


async def test_the_servers_exit_answers_the_call_in_flight_at_once(tmp_path: Path) -> None:
    escaped: list[int] = []
    with killed_at_the_end(escaped):
        config = Config(servers=(mini_spec("esc", "--escape"),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup:
            async with sup.session() as session:
                turn = await session.begin_turn()
                began = trio.current_time()
                with trio.fail_after(BOUND_S):  # the call timeout is 30 s
                    result = await turn.call("esc_echo", {"text": "hi"})
                    took = trio.current_time() - began
                    await sup.router.cell.wait_until(lambda c: c.servers["esc"].state is State.BACKOFF)
            escaped.append(escaped_pid(sup.servers()["esc"].last_error))
            assert result.error is not None and result.error.code == "unavailable"
            assert result.error.message == "MCP server stopped responding during tools/call echo"
            assert took < 1.0
