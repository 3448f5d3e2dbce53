"""What a call's audit row costs on the call path: the journal's append against a
one-row transaction on PostgreSQL (issue 34: why the journal stays).

    python benchmarks/bench_store_commit.py [--rounds 7] [--calls 2000] [--store-url URL] [--json FILE]

Per call, the journal does one ``write()`` of the row's line (``journal.encode``) to an
``O_APPEND`` file, with no fsync (``supervisor/store/journal.py``). The alternatives:

* ``journal``: exactly that (the line in the page cache: survives kill -9, not a power loss);
* ``journal+fsync``: that and ``fsync`` (what a journal durable against power loss costs);
* ``postgresql``: ``Store.add_audit([row])`` on PostgreSQL, one transaction per call, as a
  supervisor committing each row before answering would (``synchronous_commit = on``);
* ``postgresql async commit``: the same with ``synchronous_commit = off`` (the server
  answers before its WAL is on disk: a crash of PostgreSQL loses the last commits).

Without ``--store-url`` a throwaway cluster is started (benchmarks/_postgres.py: fsync
on). The contenders run interleaved, round by round (benchmarks/interleave.py); each
round times ``--calls`` rows one after another and reports p50 and p99 in µs. Printed:
the median of the rounds with min-max, and the 1-minute load average at start and end.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import interleave
from _common import quantiles
from _postgres import postgres_url

from supervisor.store import AuditRow
from supervisor.store.journal import encode
from supervisor.store.postgres import open_postgres

ROW = AuditRow(at=0.0, tenant="default", session="s-0123456789abcdef", tool="bench_echo", server="bench",
               decision="allow", outcome="ok", duration_ms=0, args_sha256="0" * 64, args_bytes=13,
               result_bytes=42)  # fmt: skip


_RECORDS = itertools.count()  # unique record ids: the store skips ids it holds


def _timed(once: Callable[[int], object], calls: int) -> dict[str, float]:
    samples = []
    for n in itertools.islice(_RECORDS, calls):
        begin = time.perf_counter()
        once(n)
        samples.append((time.perf_counter() - begin) * 1e6)
    q = quantiles(samples)
    return {"p50_us": q["p50"], "p99_us": q["p99"]}


def _row(n: int) -> AuditRow:
    return attrs.evolve(ROW, record=f"bench.{n}", at=time.time())


@contextmanager
def _contenders(url: str, folder: Path, calls: int) -> Iterator[dict[str, interleave.Measure]]:
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
    fd = os.open(folder / "journal.jsonl", flags, 0o600)
    store = open_postgres(url)
    try:

        def journal(n: int) -> None:
            os.write(fd, encode(_row(n)))

        def journal_fsync(n: int) -> None:
            os.write(fd, encode(_row(n)))
            os.fsync(fd)

        def commit(synchronous: str) -> Callable[[int], None]:
            def once(n: int) -> None:
                store.add_audit([_row(n)])

            def measure(index: int) -> dict[str, float]:
                store._connection.execute(f"SET synchronous_commit = {synchronous}")
                return _timed(once, calls)

            return measure

        yield {
            "journal": lambda index: _timed(journal, calls),
            "journal+fsync": lambda index: _timed(journal_fsync, calls),
            "postgresql": commit("on"),
            "postgresql async commit": commit("off"),
        }
    finally:
        store.close()
        os.close(fd)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--store-url", help="a PostgreSQL to use (default: a throwaway cluster, fsync on)")
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()
    with (
        postgres_url(args.store_url) as url,
        tempfile.TemporaryDirectory(prefix="bench-commit-") as folder,
        _contenders(url, Path(folder), args.calls) as contenders,
    ):
        result = interleave.run("store_commit", contenders, args.rounds)
    marker = result["interleaved"]
    print(f"{args.calls} rows one after another per round, {args.rounds} rounds, interleaved; "
          f"load average {marker['load_start']:.2f} at start, {marker['load_end']:.2f} at end")  # fmt: skip
    print("| per call | p50 µs (min-max) | p99 µs (min-max) |\n|---|---|---|")
    for name, measured in result["contenders"].items():
        cells = [measured["metrics"][key] for key in ("p50_us", "p99_us")]
        shown = " | ".join(f"{c['median']:.1f} ({c['min']:.1f}-{c['max']:.1f})" for c in cells)
        print(f"| {name} | {shown} |")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
