"""The call path's fast lanes, end to end: calls made together leave in one write, a
lone call is written at once by the actor's main task (no writer wake-up), and answered
reply channels are reused (never one a late answer or cancellation could still reach)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from actors.protocol.messages import Message, Request
from actors.protocol.ndjson import encode_lines
from actors.spec import ServerSpec
from actors.transports.base import Abilities
from actors.transports.stdio import StdioTransport
from supervisor import Supervisor
from supervisor.settings.model import Config
from tests.support.paths import SERVERS

MINI = str(SERVERS / "mini_server.py")


@pytest.fixture
def python() -> str:
    return sys.executable


def _config(python: str) -> Config:
    spec = ServerSpec(name="mini", command=(python, MINI), trusted=True, shutdown_grace_s=0.5)
    return Config(servers=(spec,))


def _calls(messages: Sequence[Message]) -> int:
    return sum(isinstance(m, Request) and m.method == "tools/call" for m in messages)


async def test_calls_made_together_leave_in_one_write(
    tmp_path: Path, python: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[int] = []
    real_send = StdioTransport.send

    async def counting_send(self: StdioTransport, messages: Sequence[Message]) -> None:
        writes.append(_calls(messages))
        await real_send(self, messages)

    monkeypatch.setattr(StdioTransport, "send", counting_send)
    real_send_nowait = StdioTransport.send_nowait

    def counting_send_nowait(self: StdioTransport, messages: Sequence[Message]) -> bool:
        done = real_send_nowait(self, messages)
        assert done, "the pipe took all of it (a test machine's pipe holds 64 KB)"
        writes.append(_calls(messages))
        return done

    monkeypatch.setattr(StdioTransport, "send_nowait", counting_send_nowait)
    async with Supervisor.open(_config(python), state_dir=tmp_path) as sup, sup.session() as session:
        turn = await session.begin_turn()
        writes.clear()
        results: list[Any] = []

        async def call(n: int) -> None:
            results.append(await turn.call("mini_echo", {"text": str(n)}))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for n in range(64):
                    nursery.start_soon(call, n)
    assert len(results) == 64 and all(r.ok for r in results), results
    assert sorted(int(r.text) for r in results) == list(range(64))
    calls_per_write = [n for n in writes if n]
    assert sum(calls_per_write) == 64
    # The first call, alone in flight, goes out at once; the other 63 in one write.
    assert calls_per_write in ([64], [1, 63]), calls_per_write


async def test_answered_reply_channels_are_reused_cancelled_ones_not(tmp_path: Path, python: str) -> None:
    async with Supervisor.open(_config(python), state_dir=tmp_path) as sup, sup.session() as session:
        turn = await session.begin_turn()
        with trio.fail_after(10):
            assert (await turn.call("mini_echo", {"text": "a"})).ok
        assert len(session.replies) == 1
        kept = session.replies[0]
        with trio.fail_after(10):
            assert (await turn.call("mini_echo", {"text": "b"})).text == "b"
        assert session.replies == [kept]
        with trio.move_on_after(0.2):
            await turn.call("mini_sleep", {"seconds": 5})  # its caller is cancelled
        assert session.replies == []  # the cancelled call took the kept channel along
        with trio.fail_after(10):
            assert (await turn.call("mini_echo", {"text": "c"})).text == "c"
            assert (await turn.call("mini_echo", {"text": "d"})).text == "d"
        assert len(session.replies) == 1 and session.replies != [kept]


async def test_a_lone_call_is_written_at_once_not_by_the_writer(
    tmp_path: Path, python: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    how: list[str] = []
    real_send, real_send_nowait = StdioTransport.send, StdioTransport.send_nowait

    async def send(self: StdioTransport, messages: Sequence[Message]) -> None:
        how.extend("writer" for _ in range(_calls(messages)))
        await real_send(self, messages)

    def send_nowait(self: StdioTransport, messages: Sequence[Message]) -> bool:
        done = real_send_nowait(self, messages)
        assert done, "the pipe took all of it"
        how.extend("at once" for _ in range(_calls(messages)))
        return done

    monkeypatch.setattr(StdioTransport, "send", send)
    monkeypatch.setattr(StdioTransport, "send_nowait", send_nowait)
    async with Supervisor.open(_config(python), state_dir=tmp_path) as sup, sup.session() as session:
        turn = await session.begin_turn()
        await trio.testing.wait_all_tasks_blocked()
        with trio.fail_after(10):
            for n in range(5):
                assert (await turn.call("mini_echo", {"text": str(n)})).text == str(n)
    assert how == ["at once"] * 5


class _SlowPipe:
    """A transport whose pipe takes only ``room`` bytes without waiting, keeping the
    rest for the next send as the stdio transport does."""

    abilities = Abilities(writes_at_once=True)

    def __init__(self, room: int) -> None:
        self.room = room
        self.wire = bytearray()
        self.unsent = bytearray()

    def send_nowait(self, messages: Sequence[Message]) -> bool:
        data = encode_lines(messages)
        if self.unsent:
            self.unsent += data
            return False
        self.wire += data[: self.room]
        self.unsent += data[self.room :]
        return not self.unsent

    async def send(self, messages: Sequence[Message]) -> None:
        await trio.lowlevel.checkpoint()
        self.wire += self.unsent + encode_lines(messages)
        self.unsent.clear()


async def test_what_the_pipe_did_not_take_is_written_next_in_order() -> None:
    from actors.connection.writing import WritePath
    from actors.protocol.session import ClientSession

    pipe = _SlowPipe(room=10)
    session = ClientSession()
    errors: list[Exception] = []
    async with trio.open_nursery() as nursery:
        writes = WritePath(pipe, session, nursery, errors.append, errors.append)  # type: ignore[arg-type]
        assert writes.send_now is not None
        session.send_notification("first")
        assert not writes.write_now()  # 10 bytes went, the rest waits for the writer
        assert len(pipe.wire) == 10 and writes.flush
        session.send_notification("second")
        assert not writes.write_now()  # never ahead of the rest
        assert session.wants_to_send  # "second" waits in the session's queue
        writes.kick()
        writes.kick()  # a second kick while the writer is on its way starts no second one
        assert writes.writer_running
        await trio.testing.wait_all_tasks_blocked()
        assert [json.loads(line)["method"] for line in bytes(pipe.wire).splitlines()] == ["first", "second"]
        assert not writes.flush and not pipe.unsent
        assert not writes.writer_running  # nothing left: the writer is gone until the next kick
        pipe.room = 1 << 20
        session.send_notification("third")
        assert writes.write_now()  # all of it, no writer needed
        assert bytes(pipe.wire).endswith(b"\n") and b"third" in bytes(pipe.wire)
        nursery.cancel_scope.cancel()
    assert not errors


class _Undeclared(_SlowPipe):
    """Has a send_nowait, but does not declare the ability."""

    abilities = Abilities()

    def send_nowait(self, messages: Sequence[Message]) -> bool:
        raise AssertionError("an undeclared ability was used")


async def test_only_a_declared_ability_is_used() -> None:
    from actors.connection.writing import WritePath
    from actors.protocol.session import ClientSession

    pipe = _Undeclared(room=1 << 20)
    session = ClientSession()
    errors: list[Exception] = []
    async with trio.open_nursery() as nursery:
        writes = WritePath(pipe, session, nursery, errors.append, errors.append)  # type: ignore[arg-type]
        assert writes.send_now is None
        session.send_notification("only")
        assert not writes.write_now()  # left to the writer
        writes.kick()
        await trio.testing.wait_all_tasks_blocked()
        assert b'"method":"only"' in bytes(pipe.wire)
        nursery.cancel_scope.cancel()
    assert not errors
