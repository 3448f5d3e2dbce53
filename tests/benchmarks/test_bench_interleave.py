# ruff: noqa: RUF001, RUF003  (the tables print en dashes and multiplication signs)
"""The benchmarks' interleaving runner (``benchmarks/interleave.py``) and the reports'
refusal to compare contenders it did not measure together. Pure: the contenders are
fakes that record when they were called; no process starts, no benchmark runs."""

from __future__ import annotations

import itertools
import sys
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from tests.support.paths import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import _report
import bridge_table
import fronts_table
import interleave


class Fakes:
    """Contenders answering preset numbers per round, logging every call in order."""

    def __init__(self, answers: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, int]] = []

    def contenders(self) -> dict[str, interleave.Measure]:
        return {name: self._measure(name) for name in self.answers}

    def _measure(self, name: str) -> interleave.Measure:
        def measure(index: int) -> Mapping[str, Any]:
            self.calls.append((name, index))
            return self.answers[name][index]

        return measure


def quiet(line: str) -> None:
    """The runner's progress lines, kept out of the test output."""


def loads(*values: float) -> Iterator[float]:
    yield from values


def run(answers: Mapping[str, Sequence[Mapping[str, Any]]], section: str = "calls", **options: Any) -> Any:
    return interleave.run(
        section, Fakes(answers).contenders(), len(next(iter(answers.values()))), progress=quiet, **options
    )


def calls_row(p50: float, tput: float) -> dict[str, Any]:
    return {
        "seq_us": {"p50": p50, "p99": 2 * p50},
        "tput_calls_s": tput,
        "seq_cpu_us_per_call": p50,
        "tput_cpu_us_per_call": p50 / 2,
        "client": "fake",
    }


def test_the_round_log_is_the_order_the_contenders_ran_in() -> None:
    fakes = Fakes({name: [{"x": 1.0}] * 5 for name in ("a", "b", "c")})
    order = interleave.run("s", fakes.contenders(), 5, progress=quiet)["interleaved"]["order"]
    assert fakes.calls == [(name, index) for index, names in enumerate(order) for name in names]
    assert all(sorted(names) == ["a", "b", "c"] for names in order)


@pytest.mark.parametrize(("count", "cycle"), [(2, 2), (3, 6), (4, 4), (5, 10)])
def test_over_a_cycle_each_runs_first_and_after_each_other_equally_often(count: int, cycle: int) -> None:
    names = "abcde"[:count]
    fakes = Fakes({name: [{"x": 1.0}] * cycle for name in names})
    order = interleave.run("s", fakes.contenders(), max(cycle, 5), progress=quiet)["interleaved"]["order"][
        :cycle
    ]
    firsts = Counter(row[0] for row in order)
    neighbours = Counter(pair for row in order for pair in itertools.pairwise(row))
    assert set(firsts) == set(names) and len(set(firsts.values())) == 1
    assert len(neighbours) == count * (count - 1) and len(set(neighbours.values())) == 1


def test_without_rotation_every_round_runs_in_the_given_order() -> None:
    fakes = Fakes({name: [{"x": 1.0}] * 5 for name in ("a", "b")})
    result = interleave.run("s", fakes.contenders(), 5, rotate=False, progress=quiet)
    assert result["interleaved"]["order"] == [["a", "b"]] * 5
    assert [name for name, _ in fakes.calls] == ["a", "b"] * 5


def test_a_comparison_of_fewer_than_five_rounds_is_refused_before_anything_runs() -> None:
    fakes = Fakes({"a": [{"x": 1.0}] * 4, "b": [{"x": 1.0}] * 4})
    with pytest.raises(ValueError, match="at least 5"):
        interleave.run("calls", fakes.contenders(), 4, progress=quiet)
    assert fakes.calls == []
    alone = Fakes({"a": [{"x": 1.0}]})  # one contender compares with nothing
    assert interleave.run("s", alone.contenders(), 1, progress=quiet)["interleaved"]["rounds"] == 1


def test_each_metric_is_the_median_of_the_rounds_with_min_and_max() -> None:
    answers: dict[str, list[dict[str, Any]]] = {
        "a": [{"t": {"p50": v}, "ok": True, "tool": "x"} for v in (5.0, 1.0, 4.0, 2.0, 3.0)],
        "b": [{"t": {"p50": v}} for v in (10.0, 30.0, 20.0, 40.0)] + [{"error": "exit 1: boom"}],
    }
    result = run(answers)
    a, b = result["contenders"]["a"], result["contenders"]["b"]
    assert a["metrics"]["t.p50"] == {"median": 3.0, "min": 1.0, "max": 5.0, "n": 5}
    assert a["notes"] == {"ok": True, "tool": "x"}  # not numbers: kept, not averaged
    assert b["metrics"]["t.p50"] == {"median": 25.0, "min": 10.0, "max": 40.0, "n": 4}
    assert b["errors"] == ["exit 1: boom"] and len(b["rounds"]) == 5


def test_a_contender_that_raises_fails_its_round_not_the_run() -> None:
    def broken(index: int) -> Mapping[str, Any]:
        raise RuntimeError(f"round {index}")

    result = interleave.run("s", {"ok": lambda i: {"x": float(i)}, "broken": broken}, 5, progress=quiet)
    assert result["contenders"]["broken"]["errors"][0] == "RuntimeError: round 0"
    assert result["contenders"]["ok"]["metrics"]["x"]["median"] == 2.0


def test_the_load_average_is_read_before_the_first_round_and_after_the_last() -> None:
    events: list[str] = []
    values = loads(0.5, 2.25)

    def load() -> float:
        events.append("load")
        return next(values)

    def measure(index: int) -> Mapping[str, Any]:
        events.append(f"round {index}")
        return {"x": 1.0}

    marker = interleave.run("s", {"a": measure, "b": measure}, 5, progress=quiet, load=load)["interleaved"]
    assert (marker["load_start"], marker["load_end"]) == (0.5, 2.25)
    assert events[0] == events[-1] == "load" and events.count("load") == 2


def test_a_ratio_is_of_medians_within_one_run() -> None:
    result = run({"ours": [{"v": v} for v in (2.0, 4.0, 6.0, 8.0, 10.0)], "peer": [{"v": 3.0}] * 5})
    assert interleave.ratio("calls", result, "ours", "peer", "v") == 2.0
    assert interleave.ratio("calls", result, "ours", "peer", "not measured") is None


def test_results_without_a_round_log_are_not_compared() -> None:
    one_after_the_other = {
        "ours": [calls_row(100, 900)],
        "floor": [calls_row(50, 1800)],
    }  # an older run's shape
    with pytest.raises(interleave.NotInterleaved, match=r"section 'calls'.*no round log"):
        interleave.ratio("calls", one_after_the_other, "ours", "floor", "seq_us.p50")


def test_contenders_from_two_runs_are_not_compared() -> None:
    first = run({"ours": [{"v": 1.0}] * 5, "peer": [{"v": 2.0}] * 5})
    second = run({"ours": [{"v": 3.0}] * 5, "peer": [{"v": 4.0}] * 5})
    merged = {
        **first,
        "contenders": {"ours": first["contenders"]["ours"], "peer": second["contenders"]["peer"]},
    }
    with pytest.raises(interleave.NotInterleaved, match="peer comes from another run"):
        interleave.ratio("gateway", merged, "ours", "peer", "v")


def test_a_log_short_of_rounds_or_of_a_contender_is_not_compared() -> None:
    result = run({"ours": [{"v": 1.0}] * 5, "peer": [{"v": 2.0}] * 5})
    short = {
        **result,
        "interleaved": {**result["interleaved"], "rounds": 3, "order": result["interleaved"]["order"][:3]},
    }
    with pytest.raises(interleave.NotInterleaved, match="3 rounds logged"):
        interleave.ratio("bridge", short, "ours", "peer", "v")
    order = [["ours"], *result["interleaved"]["order"][1:]]
    gap = {**result, "interleaved": {**result["interleaved"], "order": order}}
    with pytest.raises(interleave.NotInterleaved, match="peer is missing from some rounds"):
        interleave.ratio("bridge", gap, "ours", "peer", "v")


def test_the_calls_table_prints_medians_ratios_and_the_round_log() -> None:
    values = (90.0, 100.0, 110.0, 120.0, 80.0)
    answers = {
        "floor": [calls_row(v / 2, 2000) for v in values],
        "ours": [calls_row(v, 1000) for v in values],
        "sdk-trio": [calls_row(4 * v, 250) for v in values],
    }
    result = run(answers, load=lambda: 0.75)
    lines = _report.calls_table("calls", result)
    ours = next(line for line in lines if line.startswith("| ours |"))
    assert "| 100 (80–120) |" in ours  # p50: median (min–max)
    assert "| 2.00× | 0.50× | 0.25× | 4.00× |" in ours  # ÷ floor: p50, calls/s; ÷ SDK: p50, calls/s
    assert "5 rounds" in lines[-1] and "0.75 at the start, 0.75 at the end" in lines[-1]


def test_before_and_after_per_metric_with_whether_the_rounds_overlap() -> None:
    answers = {
        "ours-before": [calls_row(v, 1000 + v) for v in (100.0, 110.0, 120.0, 130.0, 140.0)],
        "ours": [calls_row(v, 1000 + v) for v in (60.0, 70.0, 80.0, 90.0, 135.0)],
    }
    lines = _report.calls_table("calls", run(answers), base="ours-before", sdk_columns=False)
    p50 = next(line for line in lines if line.startswith("| seq p50 µs |"))
    assert p50 == "| seq p50 µs | 120 (100–140) | 80 (60–135) | 0.667× | overlap |"
    cpu = next(line for line in lines if line.startswith("| client CPU µs/call, in flight |"))
    assert cpu.endswith("| overlap |")
    answers["ours"] = [calls_row(v, 1000 + v) for v in (60.0, 70.0, 80.0, 90.0, 95.0)]
    lines = _report.calls_table("calls", run(answers), base="ours-before", sdk_columns=False)
    assert next(line for line in lines if line.startswith("| seq p50 µs |")).endswith("| 0.667× | apart |")


def front(p50_ms: float, calls_per_s: float) -> dict[str, Any]:
    return {"sequential_ms": {"p50": p50_ms, "p99": 2 * p50_ms}, "calls_per_s": calls_per_s}


def test_the_gateway_table_compares_fronts_of_one_run_only() -> None:
    gateway = run({"ours": [front(1.0, 900.0)] * 5, "mcp-proxy": [front(2.0, 600.0)] * 5}, "gateway")
    other = run({"ours": [front(1.0, 800.0)] * 5, "mcp-proxy": [front(2.0, 700.0)] * 5}, "gateway")
    proxy = next(
        line for line in fronts_table.table(gateway, name="gateway").splitlines() if "mcp-proxy |" in line
    )
    assert "| 2.00x |" in proxy and "| 0.67x |" in proxy  # p50 and calls/s ÷ ours
    merged = {
        **gateway,
        "contenders": {"ours": other["contenders"]["ours"], "mcp-proxy": gateway["contenders"]["mcp-proxy"]},
    }
    with pytest.raises(interleave.NotInterleaved, match="section 'gateway'"):
        fronts_table.table(merged, name="gateway")


def test_the_bridge_table_refuses_a_section_run_one_contender_after_the_other() -> None:
    trips = {"round_trip_us": {"p50": 300.0}}
    bridge = run({"ours": [trips] * 5, "supergateway": [trips] * 5}, "bridge")
    assert "| 1.00× |" in "\n".join(bridge_table.bridge_table("bridge", bridge))
    del bridge["interleaved"]  # as if each had been measured whole, one after the other
    with pytest.raises(interleave.NotInterleaved, match="section 'bridge'"):
        bridge_table.bridge_table("bridge", bridge)


def test_the_report_of_an_older_json_file_refuses_its_comparisons() -> None:
    env = {"date": "-", "command": "-", "nproc": 2, "cpu": "-", "python": "-", "packages": {}, "git": "-"}
    older = {  # run.py --json before interleave.py: each client's repetitions, no round log
        "env": {**env, "loadavg_start": (0, 0, 0)},
        "calls": {"floor": [calls_row(50, 2000)], "ours": [calls_row(100, 1000)]},
    }
    with pytest.raises(interleave.NotInterleaved, match="section 'calls'"):
        _report.render(older)
