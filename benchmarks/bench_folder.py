"""What the folder process costs per audit row: its CPU, in its own process (issue 37).

    .venv/bin/python benchmarks/bench_folder.py [--rows 20000] [--batch 64] [--rounds 5]

Writes ``--rows`` journal lines as the journal does, ``--batch`` at a time (as calls
arrive between two wake-ups), wakes the folder after each batch and waits for its report,
then reads its CPU time (user + system, ``/proc/<pid>/stat``) and the wall time. The
folder writes to SQLite in a temporary state directory. By hand only.
"""

from __future__ import annotations

import argparse
import os
import select
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import orjson

from supervisor.store import AuditRow, Store
from supervisor.store.folding import folder_command, folder_settings
from supervisor.store.journal import encode, journal_dir

INSTANCE = "1-000000000000"


def _row(n: int) -> AuditRow:
    return AuditRow(1e9 + n, "t", "s", "srv_tool", "srv", "allow", "ok", 1, "ab" * 32, 8, 9, f"i.{n}")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_round(rows: int, batch: int) -> tuple[float, float]:
    """CPU µs and wall µs per row of one folder folding ``rows`` rows."""
    with tempfile.TemporaryDirectory(prefix="bench-folder-") as scratch:
        state = Path(scratch)
        journal_dir(state).mkdir()
        Store.open(state / "supervisor.db").close()
        folder = subprocess.Popen(folder_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert folder.stdin is not None and folder.stdout is not None
        folder.stdin.write(folder_settings(state, INSTANCE, None).encode())
        folder.stdin.flush()
        path = journal_dir(state) / f"{INSTANCE}.1.jsonl"
        cpu_before, began = _cpu_s(folder.pid), time.perf_counter()
        written = 0
        with path.open("ab", buffering=0) as journal:
            for start in range(0, rows, batch):
                lines = b"".join(
                    encode(
                        AuditRow(
                            1e9 + n, "t", "s", "srv_tool", "srv", "allow", "ok", 1, "ab" * 32, 8, 9, f"i.{n}"
                        )
                    )
                    for n in range(start, min(rows, start + batch))
                )
                written += journal.write(lines)
                folder.stdin.write(b"w")
                folder.stdin.flush()
                while True:
                    select.select([folder.stdout], [], [], 10)
                    if orjson.loads(folder.stdout.readline())["offset"] >= written:
                        break
        wall, cpu = time.perf_counter() - began, _cpu_s(folder.pid) - cpu_before
        folder.stdin.close()
        folder.wait(10)
        with Store.open(state / "supervisor.db") as store:
            assert len(store.audit_rows(limit=rows + 1)) == rows
    return cpu / rows * 1e6, wall / rows * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results = [one_round(args.rows, args.batch) for _ in range(args.rounds)]
    cpu, wall = [r[0] for r in results], [r[1] for r in results]
    load = os.getloadavg()[0]
    print(f"load average {load:.2f}; {args.rows} rows, {args.batch} a wake-up, {args.rounds} rounds")
    print(f"folder CPU per row: {statistics.median(cpu):.1f} µs ({min(cpu):.1f}-{max(cpu):.1f})")
    print(f"wall per row:       {statistics.median(wall):.1f} µs ({min(wall):.1f}-{max(wall):.1f})")


if __name__ == "__main__":
    main()
