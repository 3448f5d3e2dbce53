"""kill -9 a supervisor under load: every call whose caller got its answer has its row.

The child is a real supervisor process (``Supervisor.open`` with a real mini_server.py)
that makes calls from 32 tasks at once and prints each answered call to stdout the
moment ``turn.call`` returns it; four more calls sleep in the server, in flight, all
along. The test kills the child with SIGKILL at a random point, three rounds in one
state directory (each start folds the journal the previous round left), then opens the
state directory once more and reads the audit table: each answered call has its ``ok``
row, each sleeping call an ``interrupted`` row, and no call both.
"""

from __future__ import annotations

import os
import random
import signal
from collections import Counter
from pathlib import Path

import trio

from supervisor import Supervisor
from supervisor.settings.model import Config
from supervisor.store import AuditRow, Store, hash_arguments
from tests.support.killed import child_to_kill
from tests.support.paths import SERVERS

MINI = SERVERS / "mini_server.py"
SLEEPERS = 4
WORKERS = 32

CHILD = """
import itertools, sys, trio
from actors.spec import ServerSpec, Start
from supervisor import Supervisor
from supervisor.settings.model import Config

state_dir, mini, round_ = sys.argv[1], sys.argv[2], sys.argv[3]
SLEEPERS, WORKERS = int(sys.argv[4]), int(sys.argv[5])

async def main():
    spec = ServerSpec(name="mini", command=(sys.executable, mini), trusted=True, start=Start.EAGER)
    async with Supervisor.open(Config(servers=(spec,)), state_dir=state_dir) as sup:
        async with sup.session() as session, trio.open_nursery() as nursery:
            turn = await session.begin_turn()
            for k in range(SLEEPERS):
                nursery.start_soon(turn.call, "mini_sleep", {"seconds": 600 + k})
            while (await sup.connection_status("mini")).in_flight < SLEEPERS:
                await trio.sleep(0.01)
            print("in flight", flush=True)
            numbers = itertools.count()

            async def worker():
                while True:
                    text = f"{round_}-{next(numbers)}"
                    envelope = await turn.call("mini_echo", {"text": text})
                    assert envelope.ok, envelope
                    sys.stdout.write(f"answered {text}\\n")
                    sys.stdout.flush()

            for _ in range(WORKERS):
                nursery.start_soon(worker)

trio.run(main)
"""


def _kill_under_load(state_dir: Path, round_: int, kill_after: int) -> list[str]:
    """Run the child until it answered ``kill_after`` calls, SIGKILL it; every answered
    call's text, including those still in the pipe when it died."""
    answered: list[str] = []
    with child_to_kill(CHILD, state_dir, MINI, round_, SLEEPERS, WORKERS) as child:
        assert child.stdout is not None and child.stderr is not None
        first = child.stdout.readline()
        assert first == b"in flight\n", (first, child.poll() is not None and child.stderr.read())
        while len(answered) < kill_after:
            line = child.stdout.readline()
            assert line.startswith(b"answered "), (line, child.poll())
            answered.append(line.split()[1].decode())
        os.kill(child.pid, signal.SIGKILL)
        # What was in the pipe was answered too.
        answered += [line.split()[1].decode() for line in child.stdout.read().splitlines() if line.strip()]
    return answered


def _rows(state_dir: Path) -> list[AuditRow]:
    async def recover() -> None:
        async with Supervisor.open(Config(servers=()), state_dir=state_dir):
            pass  # opening folds the journals of dead instances

    trio.run(recover)
    with Store.open(state_dir / "supervisor.db") as store:
        return store.audit_rows(limit=10**7)


def test_every_answered_call_has_its_row_after_kill_9_and_calls_in_flight_are_interrupted(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "state"
    randomness = random.Random(10)
    answered: set[str] = set()
    for round_ in range(3):
        answered |= set(_kill_under_load(state_dir, round_, randomness.randint(200, 800)))
    rows = _rows(state_dir)

    def digest(arguments: dict[str, object]) -> str:
        return hash_arguments(arguments)[0]

    ok = {row.args_sha256 for row in rows if row.outcome == "ok"}
    interrupted = [row for row in rows if row.outcome == "interrupted"]
    missing = sorted(text for text in answered if digest({"text": text}) not in ok)
    assert not missing, f"{len(missing)} of {len(answered)} answered calls have no row: {missing[:10]}"
    sleepers = Counter(row.args_sha256 for row in interrupted if row.tool == "mini_sleep")
    assert sleepers == Counter(digest({"seconds": 600 + k}) for k in range(SLEEPERS) for _ in range(3))
    assert all(row.decision == "allow" and row.duration_ms == 0 for row in interrupted)
    interrupted_echoes = {row.args_sha256 for row in interrupted if row.tool == "mini_echo"}
    assert not interrupted_echoes & ok, "a call is both answered and interrupted"
    assert len({row.record for row in rows}) == len(rows), "a journal line was folded twice"
    assert not list((state_dir / "journal").iterdir()), "every journal was folded and deleted"
