"""kill -9 a process in the middle of writing the store; the file must come back intact.

The child writes forever, each transaction holding one batch of ``ROWS`` audit rows
(tagged with the batch number in ``session``) AND the server's tool list stamped with
the same number. After SIGKILL at various moments, the reopened store must pass
``PRAGMA integrity_check``, hold only whole batches, numbered 0..n without a gap, and a
tool list from exactly the last whole batch: a torn transaction would show up as a short
batch, or as a tool list from a batch whose rows are missing (or the other way round).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import time
from collections import Counter
from pathlib import Path

import pytest

from supervisor.store import AuditRow, Store
from tests.support.killed import child_to_kill
from tests.support.paths import REPO

ROWS = 200
TOOLS = 100
ROOT = REPO

# Rows are padded so a batch spans many pages (a kill lands mid-write more often) and the
# WAL passes its auto-checkpoint size within the run (so kills also land in checkpoints).
WRITER = """
import sys, time
from pathlib import Path
from supervisor.store import AuditRow, Store

rows, tools = int(sys.argv[2]), int(sys.argv[3])
store = Store.open(Path(sys.argv[1]))
batch = 0
while True:
    now = time.time()
    audit = [
        AuditRow(now, "tenant", f"batch-{batch}", f"tool-{i}-" + "x" * 200, "srv", "allow", "ok",
                 i, "ab" * 32, i, batch)
        for i in range(rows)
    ]
    listing = [{"name": f"t{i}", "batch": batch, "description": "d" * 300} for i in range(tools)]
    with store.transaction():
        store.add_audit(audit)
        store.save_tool_list("srv", listing, float(batch))
    if batch == 0:
        print("committed", flush=True)
    batch += 1
"""


def _kill_writer(db: Path, after_s: float) -> None:
    """Start the writer, wait for its first commit, SIGKILL it ``after_s`` later, reap it."""
    with child_to_kill(WRITER, db, ROWS, TOOLS) as child:
        assert child.stdout is not None
        line = child.stdout.readline()  # blocks until the first commit (or the child dies)
        if line != b"committed\n":
            child.kill()
            _, err = child.communicate(timeout=5)
            pytest.fail(f"writer did not start: {line!r} {err.decode(errors='replace')[-2000:]}")
        time.sleep(after_s)
        assert child.poll() is None, "the writer must still be writing when it is killed"
        os.kill(child.pid, signal.SIGKILL)


@pytest.mark.parametrize("after_s", [0.0, 0.05, 0.15])
def test_kill_9_mid_write_leaves_only_whole_transactions(tmp_path: Path, after_s: float) -> None:
    db = tmp_path / "state" / "supervisor.db"
    _kill_writer(db, after_s)
    assert Path(f"{db}-wal").stat().st_size > 0  # recovery from a live WAL is what is tested

    with contextlib.closing(sqlite3.connect(db)) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]

    with Store.open(db) as store:
        rows = store.audit_rows(limit=10**7)
        per_batch = Counter(int(r.session.removeprefix("batch-")) for r in rows)
        assert per_batch, "the first commit was reported, so it must be there"
        short = {batch: n for batch, n in per_batch.items() if n != ROWS}
        assert not short, f"torn transactions (batch: rows): {short}"
        last = max(per_batch)
        assert sorted(per_batch) == list(range(last + 1)), "a committed batch vanished"
        assert all(r.result_bytes == int(r.session.removeprefix("batch-")) for r in rows)

        tools, listed_at = store.tool_lists()["srv"]
        assert listed_at == float(last), "the tool list and the audit rows were not committed together"
        assert len(tools) == TOOLS and {t["batch"] for t in tools} == {last}

        # The store still takes writes, and keeps them.
        extra = AuditRow(time.time(), "tenant", "after-crash", "t", "srv", "deny", "denied", 0, "", 0, 0)
        store.add_audit([extra])
    with Store.open(db) as store:
        assert store.audit_rows(session="after-crash") == [extra]
        with contextlib.closing(sqlite3.connect(db)) as raw:
            assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
