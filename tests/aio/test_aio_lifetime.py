"""``supervisor.aio``'s lifetime: leaving the block reaps every server whatever ended it
(an error, a cancellation, ``asyncio.timeout``, Ctrl-C under ``asyncio.run``); the clear
errors of a thread with no asyncio loop or with a Trio run already; what is used after
the block; and a Trio side that ends on its own.

The conftest's leak check fails any test here that leaves a server process behind."""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from actors.connection.states import State
from actors.spec import Scope, Start
from supervisor import service
from supervisor.aio import StateError, Supervisor, SupervisorClosed
from supervisor.aio.guest import Holding, guest_run
from supervisor.settings.model import Config
from tests.end_to_end.test_chaos import server_pids
from tests.support.aio_host import host, mini, servers_until
from tests.support.paths import REPO


def _eager(tmp_path: Path, count: int = 2) -> tuple[Config, str]:
    """``count`` eager servers whose command lines carry a marker (``server_pids`` finds them)."""
    marker = str(tmp_path / "marker")
    specs = tuple(mini(f"s{n}", "--methods-log", f"{marker}-{n}", start=Start.EAGER) for n in range(count))
    return Config(servers=specs), marker


async def _all_steady(sup: Supervisor) -> None:
    await servers_until(sup, lambda servers: all(v.state is State.STEADY for v in servers.values()))


def test_an_error_in_the_block_comes_out_unchanged_once_every_server_is_reaped(tmp_path: Path) -> None:
    config, marker = _eager(tmp_path)

    async def main() -> None:
        async with Supervisor.open(config, state_dir=tmp_path) as sup:
            await _all_steady(sup)
            assert len(server_pids(marker)) == 2
            raise ValueError("the host's own bug")

    with pytest.raises(ValueError, match="the host's own bug"):
        host(main)
    assert server_pids(marker) == []


def test_a_cancelled_host_and_an_asyncio_timeout_reap_every_server_first(tmp_path: Path) -> None:
    config, marker = _eager(tmp_path)

    async def supervised(state_dir: Path, steady: Callable[[], object]) -> None:
        async with Supervisor.open(config, state_dir=state_dir) as sup:
            await _all_steady(sup)
            steady()
            await asyncio.sleep(30)

    async def main() -> None:
        inside = asyncio.Event()
        task = asyncio.create_task(supervised(tmp_path / "one", inside.set))
        await inside.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert server_pids(marker) == []
        loop = asyncio.get_running_loop()
        with pytest.raises(TimeoutError):  # asyncio.timeout sees its own cancellation come back
            async with asyncio.timeout(None) as deadline:
                await supervised(tmp_path / "two", lambda: deadline.reschedule(loop.time()))
        assert deadline.expired() and server_pids(marker) == []
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]

    host(main)


CTRL_C_HOST = r"""
import asyncio, os, sys
from actors.connection.states import State
from actors.spec import ServerSpec, Start
from supervisor.aio import Supervisor
from supervisor.settings.model import Config

def children():
    found = []
    for entry in os.listdir("/proc"):
        try:
            fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getpid():
            found.append(entry)
    return found

async def main(state_dir, mini):
    specs = tuple(
        ServerSpec(name=f"s{n}", command=(sys.executable, mini), start=Start.EAGER, shutdown_grace_s=0.5)
        for n in range(2)
    )
    async with Supervisor.open(Config(servers=specs), state_dir=state_dir) as sup:
        while not all(view.state is State.STEADY for view in sup.servers().values()):
            await asyncio.sleep(0.01)
        print("ready", *children(), flush=True)
        await asyncio.Event().wait()

runner, state_dir, mini = sys.argv[1:]
try:
    if runner == "asyncio.run":  # its SIGINT handler cancels the main task
        asyncio.run(main(state_dir, mini))
    else:  # Python's default SIGINT handler: Trio's guest run takes Ctrl-C
        asyncio.new_event_loop().run_until_complete(main(state_dir, mini))
except KeyboardInterrupt:
    print("interrupted; children left:", *children(), flush=True)
    raise
"""


@pytest.mark.parametrize("runner", ["asyncio.run", "run_until_complete"])
def test_ctrl_c_reaps_every_server_and_raises_keyboard_interrupt(runner: str, tmp_path: Path) -> None:
    mini_server = mini("x").command[1]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-c", CTRL_C_HOST, runner, str(tmp_path), mini_server],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    watchdog = threading.Timer(30, child.kill)  # a read below never hangs the test
    watchdog.start()
    try:
        assert child.stdout is not None
        ready = child.stdout.readline().split()
        # Its children: the two servers and the audit folder (supervisor/store/folding.py).
        assert ready[:1] == ["ready"] and len(ready) == 4, (ready, child.stderr and child.stderr.read())
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=20)
    finally:
        watchdog.cancel()
        child.kill()
        child.wait()
    assert out.strip() == "interrupted; children left:", (out, err)
    assert child.returncode == -signal.SIGINT, err  # the KeyboardInterrupt, not handled
    assert err.rstrip().endswith("KeyboardInterrupt"), err
    for pid in ready[1:]:
        assert not Path(f"/proc/{pid}").exists()


async def test_under_trio_there_is_no_asyncio_loop_and_the_error_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError) as raised:
        async with Supervisor.open(Config(), state_dir=tmp_path):
            pass
    assert str(raised.value) == (
        "supervisor.aio needs a running asyncio event loop in this thread and finds none: open it "
        "inside a coroutine that asyncio runs (asyncio.run(main())); a Trio program uses "
        "supervisor.Supervisor.open instead"
    )


def test_a_second_guest_run_in_one_thread_is_refused_saying_why_and_the_first_runs_on(
    tmp_path: Path,
) -> None:
    config = Config(servers=(mini("mini"),))

    async def main() -> None:
        async with Supervisor.open(config, state_dir=tmp_path / "one") as sup:
            with pytest.raises(RuntimeError) as raised:
                async with Supervisor.open(config, state_dir=tmp_path / "two"):
                    pass
            assert str(raised.value).startswith(
                "supervisor.aio runs Trio as a guest of this thread's asyncio loop, but a Trio run is "
                "active in this thread already (one Trio run per thread: another supervisor.aio "
                "supervisor is open here"
            )
            assert "open your sessions on the supervisor that is open" in str(raised.value)
            async with sup.session() as session:
                echoed = await (await session.begin_turn()).call("mini_echo", {"text": "still"})
                assert echoed.ok and echoed.text == "still"

    host(main)


def test_what_outlives_the_block_says_the_supervisor_is_closed(tmp_path: Path) -> None:
    config = Config(servers=(mini("mini"),))

    async def main() -> None:
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            turn = await session.begin_turn()
        with pytest.raises(SupervisorClosed, match=r"the supervisor is closed \(its async with block"):
            await turn.call("mini_echo", {"text": "late"})
        with pytest.raises(SupervisorClosed):
            await session.begin_turn()
        with pytest.raises(SupervisorClosed):
            await sup.cancel_request("r-1")

    host(main)


def test_a_request_awaited_on_another_loop_is_refused_saying_where_to_await_it(tmp_path: Path) -> None:
    config = Config(servers=(mini("mini"),))

    async def main() -> None:
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            turn = await session.begin_turn()
            elsewhere = asyncio.to_thread(asyncio.run, turn.call("mini_echo", {"text": "x"}))
            with pytest.raises(RuntimeError, match="runs on the asyncio event loop that opened it"):
                await elsewhere
            assert (await turn.call("mini_echo", {"text": "here"})).ok

    host(main)


def test_sessions_still_open_end_before_the_supervisor_with_their_private_servers(tmp_path: Path) -> None:
    marker = str(tmp_path / "private")
    config = Config(servers=(mini("own", "--methods-log", marker, scope=Scope.SESSION),))

    async def main() -> None:
        async with Supervisor.open(config, state_dir=tmp_path) as sup:
            session = await sup.session().__aenter__()  # a host that never leaves it
            assert (await (await session.begin_turn()).call("own_echo", {"text": "x"})).ok
            assert len(server_pids(marker)) == 1
        assert server_pids(marker) == []

    host(main)


def test_an_unusable_state_directory_raises_state_error_as_the_trio_api_does(tmp_path: Path) -> None:
    in_the_way = tmp_path / "file"
    in_the_way.write_text("")

    async def main() -> None:
        async with Supervisor.open(Config(), state_dir=in_the_way):
            pass

    with pytest.raises(StateError, match="not a directory"):
        host(main)


def test_a_trio_side_that_ends_on_its_own_cancels_the_block_which_raises_why() -> None:
    @asynccontextmanager
    async def failing() -> AsyncIterator[str]:
        async def bug() -> None:
            await trio.sleep(0.05)
            raise KeyError("a bug of ours")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(bug)
            yield "held"

    async def main() -> None:
        async with guest_run() as guest:
            with pytest.raises(ExceptionGroup) as raised:
                async with Holding(guest, failing) as value:
                    assert value == "held"
                    await asyncio.sleep(10)
            assert raised.group_contains(KeyError, match="a bug of ours")
            assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]

    host(main)


def test_open_takes_every_option_of_the_trio_open_by_the_same_name_and_default() -> None:
    def parameters(open_: object) -> list[tuple[str, object, object]]:
        found = inspect.signature(open_).parameters.values()  # type: ignore[arg-type]
        return [(p.name, p.kind, p.default) for p in found]

    assert parameters(Supervisor.open) == parameters(service.Supervisor.open)
