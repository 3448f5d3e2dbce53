"""Item: one bad entry fails only its own server. Specs are built by hand here, past the
config loader, as an embedding host (or a loader bug) could hand them over."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.connection.states import State
from actors.spec import ServerSpec, Start
from actors.transport_errors import SpawnError
from actors.transports.stdio import open_stdio_transport
from supervisor import Supervisor
from supervisor.settings.model import Config
from tests.support.paths import SERVERS

MINI = str(SERVERS / "mini_server.py")
BOUND_S = 10.0  # generous; the states below are reached in well under a second

BAD_ENTRIES: dict[str, tuple[dict[str, Any], str]] = {
    "nul_env": ({"env": {"TOKEN": "abc\0def"}}, "the value of env variable TOKEN contains a NUL byte"),
    "nul_arg": (
        {"command": (sys.executable, MINI, "--x\0y")},
        "argument 2 of the command contains a NUL byte",
    ),
    "eq_key": ({"env": {"A=B": "1"}}, "env variable name 'A=B' contains a NUL byte or '='"),
    "nul_cwd": ({"cwd": "/tmp\0x"}, "the working directory contains a NUL byte"),
    "int_env": ({"env": {"N": 3}}, "env entry 'N' is not a string pair"),
}


def spec(name: str, **options: Any) -> ServerSpec:
    options.setdefault("command", (sys.executable, MINI))
    options.setdefault("shutdown_grace_s", 0.5)
    return ServerSpec(name=name, trusted=True, **options)


@pytest.mark.parametrize("entry", sorted(BAD_ENTRIES))
async def test_what_exec_refuses_is_a_spawn_error_naming_the_entry(entry: str) -> None:
    options, reason = BAD_ENTRIES[entry]
    with pytest.raises(SpawnError) as err:
        async with open_stdio_transport(spec("bad", **options)):
            pytest.fail("must not start")
    assert str(err.value).startswith(f"mcp server bad: {reason}")
    assert "abc" not in str(err.value)  # the value itself may be a secret


async def test_anything_else_the_os_refuses_is_a_spawn_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: object, **kwargs: object) -> None:
        raise ValueError("something the checks did not foresee")

    async def refused_async(*args: object, **kwargs: object) -> None:
        refused()

    monkeypatch.setattr(subprocess, "Popen", refused)  # the spawner thread's way (Linux)
    monkeypatch.setattr(trio.lowlevel, "open_process", refused_async)  # elsewhere
    with pytest.raises(SpawnError, match=r"mcp server bad: could not start .*did not foresee"):
        async with open_stdio_transport(spec("bad")):
            pytest.fail("must not start")


async def test_bad_entries_back_off_and_the_rest_of_the_supervisor_stays_up(tmp_path: Path) -> None:
    fast = (0.05,)  # retried every 50 ms: the old code gave up (and ended serve) within 4 tries
    bad = [
        spec(name, start=Start.EAGER, reconnect_schedule_s=fast, **options)
        for name, (options, _) in BAD_ENTRIES.items()
    ]
    config = Config(servers=(spec("good", start=Start.EAGER), *bad))
    async with Supervisor.open(config, state_dir=tmp_path) as sup:
        with trio.fail_after(BOUND_S):
            await sup.router.cell.wait_until(
                lambda c: (
                    c.servers["good"].state is State.STEADY
                    and all(c.servers[s.name].attempt >= 6 for s in bad)
                )  # retried, again and again
            )
        for name, (_, reason) in BAD_ENTRIES.items():
            view = sup.servers()[name]
            assert view.state in (State.BACKOFF, State.RESOLVE)
            assert view.last_error is not None and reason in view.last_error
        async with sup.session() as session:
            turn = await session.begin_turn()
            result = await turn.call("good_add", {"a": 2, "b": 3})
            assert result.ok and result.text == "5"
