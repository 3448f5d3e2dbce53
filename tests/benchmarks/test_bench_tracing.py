# ruff: noqa: RUF001  (the tables print en dashes and multiplication signs)
"""The tracing section's setups (``benchmarks/_tracing.py``) and its table: each setup
in a fresh interpreter, as a worker makes it; the table from fake rounds. No call is
measured."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

from tests.support.paths import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import _report
import interleave


def in_a_worker(code: str) -> str:
    """Run ``code`` in a fresh interpreter beside the benchmarks; its stdout."""
    prelude = f"import sys\nsys.path[:0] = [{str(REPO)!r}, {str(REPO / 'benchmarks')!r}]\n"
    done = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_without_the_extra_opentelemetry_cannot_be_imported_and_traces_stay_off() -> None:
    out = in_a_worker(
        """
        from _tracing import Tracing
        tracing = Tracing("none")
        from supervisor.runtime.tracing import enable
        print(enable())
        try:
            import opentelemetry.trace
        except ModuleNotFoundError as exc:
            print(exc.name)
        print(tracing.report(1))
        """
    )
    assert out.splitlines() == [
        "False",
        "opentelemetry",
        "{'mode': 'none', 'opentelemetry_loaded': False, 'traces_on': False}",
    ]


def test_the_batch_setup_counts_the_spans_made_after_start() -> None:
    out = in_a_worker(
        """
        from _tracing import Tracing
        tracing = Tracing("batch")
        from opentelemetry import trace
        tracer = trace.get_tracer("test")
        with tracer.start_as_current_span("before"):
            pass
        tracing.start()
        for _ in range(3):
            with tracer.start_as_current_span("call"), tracer.start_as_current_span("inner"):
                pass
        seen = tracing.report(3)
        tracing.close()
        print(seen["spans_per_call"], seen["spans_exported"], seen["spans_dropped"], seen["traces_on"])
        """
    )
    assert out.split() == ["2.0", "7", "0", "False"]  # the supervisor never opened here


def worker_row(p50: float, tracing: dict[str, Any]) -> dict[str, Any]:
    return {
        "seq_us": {"p50": p50, "p99": 2 * p50},
        "tput_calls_s": 10_000 / p50,
        "seq_cpu_us_per_call": p50,
        "tput_cpu_us_per_call": p50 / 2,
        "tracing": tracing,
    }


def test_the_table_compares_to_the_row_without_the_extra_and_says_what_each_worker_saw() -> None:
    off = {"opentelemetry_loaded": False, "traces_on": False}
    idle = {"opentelemetry_loaded": True, "traces_on": False}
    batch = {"opentelemetry_loaded": True, "traces_on": True, "spans_dropped": 0, "span_names": "a: 1, b: 1"}
    rounds = [100.0, 110.0, 90.0, 105.0, 95.0]
    answers = {
        _report.NO_EXTRA: [worker_row(p, off) for p in rounds],
        "extra without provider": [worker_row(p, idle) for p in rounds],
        "batch + no-op exporter": [worker_row(2 * p, {**batch, "spans_per_call": 2.0}) for p in rounds],
    }

    def measure(name: str) -> interleave.Measure:
        return lambda index: answers[name][index]

    section = interleave.run(
        "tracing", {name: measure(name) for name in answers}, 5, progress=lambda line: None
    )
    lines = _report.tracing_table(section)
    batch_row = next(line for line in lines if line.startswith("| batch + no-op exporter |"))
    assert "| 200 (180–220) |" in batch_row and "| 2.00× | 0.50× |" in batch_row
    assert lines[-3:] == [
        "- no extra: `opentelemetry` imported in 0 of 5 rounds, traces on in 0 of 5 rounds",
        "- extra without provider: `opentelemetry` imported in 5 of 5 rounds, traces on in 0 of 5 rounds",
        "- batch + no-op exporter: `opentelemetry` imported in 5 of 5 rounds, traces on in 5 of 5 rounds; "
        "spans per measured call 2.00 (2.00–2.00) (a: 1, b: 1), dropped by a full queue: 0",
    ]
