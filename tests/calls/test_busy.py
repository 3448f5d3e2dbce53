"""``concurrency: N``: a call beyond N in flight to one server instance is answered
``busy`` at once (never queued), against real subprocess servers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from actors.connection.calls import BUSY_RETRY_AFTER_MS
from actors.router.envelope import Envelope
from actors.spec import Scope, ServerSpec
from supervisor import Supervisor, load_config
from supervisor.gateway.results import ERROR_META, tool_result
from supervisor.sessions.session import Session
from supervisor.settings.loader import ConfigError
from supervisor.settings.model import Config
from tests.actors.transports.test_stdio_transport import eventually
from tests.support.paths import SERVERS

MINI = str(SERVERS / "mini_server.py")
SLOW = 30.0  # the sleeping calls' length: every busy answer must come long before


@pytest.fixture
def python() -> str:
    import sys

    return sys.executable


def spec(name: str, python: str, **options: object) -> ServerSpec:
    command = (python, MINI, "--calls-log", str(calls_log(name)))
    return ServerSpec(name=name, command=command, trusted=True, shutdown_grace_s=0.5, **options)  # type: ignore[arg-type]


def calls_log(name: str) -> Path:
    """Where the server ``name`` records each call as it arrives (per test: cwd is its tmp dir)."""
    return Path.cwd() / f"{name}-calls.jsonl"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


async def sleepers(session: Session, tool: str, count: int, nursery: trio.Nursery) -> list[Envelope]:
    """Start ``count`` long calls of ``tool`` and return once the server has them all."""
    turn = await session.begin_turn()
    answers: list[Envelope] = []

    async def one() -> None:
        answers.append(await turn.call(tool, {"seconds": SLOW}))

    for _ in range(count):
        nursery.start_soon(one)
    server, _, name = tool.partition("_")
    log = calls_log(server)

    def arrived() -> int:
        lines = log.read_text().splitlines() if log.exists() else []
        return sum(1 for line in lines if json.loads(line)["name"] == name)

    with trio.fail_after(10):  # the server has them all (well under SLOW)
        await eventually(lambda: arrived() >= count)
    return answers


def assert_busy(envelope: Envelope, server: str, in_flight: int, limit: int) -> None:
    assert envelope.error is not None, envelope
    assert envelope.as_dict()["error"] == {
        "code": "busy",
        "message": f"mcp server {server} is busy: {in_flight} calls in flight, its concurrency "
        f"limit is {limit}; retry in {BUSY_RETRY_AFTER_MS} ms",
        "retry_after_ms": BUSY_RETRY_AFTER_MS,
    }


async def test_a_call_beyond_the_limit_is_busy_at_once_and_other_servers_go_on(
    tmp_path: Path, python: str
) -> None:
    config = Config(servers=(spec("slow", python, concurrency=2), spec("free", python)))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        async with trio.open_nursery() as nursery:
            await sleepers(session, "slow_sleep", 2, nursery)
            turn = await session.begin_turn()
            with trio.fail_after(2):  # at once, against 30 s calls
                third = await turn.call("slow_sleep", {"seconds": 0})
                other = await turn.call("free_echo", {"text": "still here"})
                # the unbounded server takes more than two at a time
                async with trio.open_nursery() as inner:
                    for _ in range(3):
                        inner.start_soon(turn.call, "free_sleep", {"seconds": 0.1})
            assert_busy(third, "slow", 2, 2)
            assert other.ok and other.text == "still here"
            # the gateway's result carries the code and the hint
            meta = tool_result(third)["_meta"][ERROR_META]
            assert meta == {"code": "busy", "retry_after_ms": BUSY_RETRY_AFTER_MS}
            nursery.cancel_scope.cancel()
        # the slots free up when the calls end: the next call goes through
        with trio.fail_after(5):
            again = await (await session.begin_turn()).call("slow_echo", {"text": "ok"})
        assert again.ok, again


async def test_a_shared_server_counts_across_sessions(tmp_path: Path, python: str) -> None:
    config = Config(servers=(spec("slow", python, concurrency=1),))
    async with (
        Supervisor.open(config, state_dir=tmp_path) as sup,
        sup.session() as one,
        sup.session() as two,
        trio.open_nursery() as nursery,
    ):
        await sleepers(one, "slow_sleep", 1, nursery)
        with trio.fail_after(2):
            refused = await (await two.begin_turn()).call("slow_echo", {"text": "x"})
        assert_busy(refused, "slow", 1, 1)
        nursery.cancel_scope.cancel()


async def test_a_session_scope_server_counts_per_session(tmp_path: Path, python: str) -> None:
    config = Config(servers=(spec("priv", python, concurrency=1, scope=Scope.SESSION),))
    async with (
        Supervisor.open(config, state_dir=tmp_path) as sup,
        sup.session() as one,
        sup.session() as two,
        trio.open_nursery() as nursery,
    ):
        await sleepers(one, "priv_sleep", 1, nursery)
        with trio.fail_after(5):
            own = await (await one.begin_turn()).call("priv_echo", {"text": "x"})
            theirs = await (await two.begin_turn()).call("priv_echo", {"text": "y"})
        assert_busy(own, "priv", 1, 1)
        assert theirs.ok and theirs.text == "y"
        nursery.cancel_scope.cancel()


def test_config_reads_concurrency_and_refuses_a_bad_one(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"servers": {"a": {"command": "x", "concurrency": 3}, "b": {"command": "y"}}}))
    specs = {s.name: s for s in load_config(path).servers}
    assert specs["a"].concurrency == 3 and specs["b"].concurrency is None
    path.write_text(json.dumps({"servers": {"a": {"command": "x", "concurrency": 0}}}))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"config error: {path}: $.servers.a.concurrency: ")
