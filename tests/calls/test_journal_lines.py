"""The journal lines a turn's calls write, byte for byte.

Pinned because the call path builds its lines without going through ``AuditRow`` (one
row object less per line, issue 37): every line a real call leaves must be exactly
what ``encode`` makes of the row it parses to (the same keys, in the same order, the
optional ones only when set), for each way a call ends.
"""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from supervisor import Approval, ApprovalRequest
from supervisor.store.journal import encode, journal_dir
from supervisor.store.replay import parse_line
from tests.support.inprocess import running


def journal_lines(state_dir: Path) -> list[bytes]:
    paths = sorted(journal_dir(state_dir).iterdir(), key=lambda p: int(p.name.split(".")[-2]))
    return [line for path in paths for line in path.read_bytes().splitlines(keepends=True)]


async def test_every_line_a_call_leaves_is_its_rows_encoding(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async def approver(request: ApprovalRequest) -> Approval:
        return Approval("allow")

    async with running(tmp_path, approver) as run:
        assert (await run.turn.call("fake_echo", {"n": 1})).ok  # allowed: a start line, then its row
        assert (await run.turn.call("fake_note", {"text": "x"})).ok  # asked, then allowed
        denied = await run.turn.call("fake_wipe", {})  # refused by a rule: one row, no start line
        assert denied.error is not None and denied.error.code == "denied"
        unknown = await run.turn.call("fake_nothing", {})
        assert unknown.error is not None and unknown.error.code == "unknown_tool"

        async def never(session: object, request: object) -> None:
            await trio.sleep_forever()

        run.server.call_handler = never
        with trio.move_on_after(5):  # the caller gives up: a row that says cancelled
            await run.turn.call("fake_echo", {"n": 2})
        lines = journal_lines(tmp_path)
    outcomes = []
    for line in lines:
        row = parse_line(line)
        assert row is not None, line
        assert encode(row) == line, "a line the call path wrote is not its row's encoding"
        outcomes.append((row.tool, row.decision, row.outcome))
    assert outcomes == [
        ("fake_echo", "allow", "interrupted"),
        ("fake_echo", "allow", "ok"),
        ("fake_note", "ask", "interrupted"),
        ("fake_note", "ask", "ok"),
        ("fake_wipe", "deny", "denied"),
        ("fake_nothing", "none", "unknown_tool"),
        ("fake_echo", "allow", "interrupted"),
        ("fake_echo", "allow", "cancelled"),
    ]
