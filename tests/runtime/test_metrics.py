"""``/metrics`` as a scraper reads it: the whole exposition through prometheus-client's
parser, after real calls to two servers that end in different outcomes; and the
histogram's edges (a duration on a bound, past the last one, a name that needs escaping)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

import trio
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from supervisor.runtime.metrics import CALL_DURATION_BUCKETS_S, Metrics, sample_value
from tests.support.admin import admin_running, config_of, mini_spec, wait_for
from tests.support.paths import REPO

HISTOGRAM = "mcp_supervisor_call_duration_seconds"
CALLS = "mcp_supervisor_calls"  # the parser names a counter without its _total
QUOTED = 'say "hi"'  # a server name is config input: quotes and spaces are allowed


def _parse(text: str) -> dict[str, list[Sample]]:
    """Every family's samples, by family name; the parser refuses what is not the format."""
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def _series(samples: Iterable[Sample]) -> dict[tuple[str, str], dict[str, list[Sample]]]:
    """The histogram's samples by (server, outcome), then by sample name."""
    out: dict[tuple[str, str], dict[str, list[Sample]]] = {}
    for sample in samples:
        key = (sample.labels["server"], sample.labels["outcome"])
        out.setdefault(key, {}).setdefault(sample.name, []).append(sample)
    return out


def _readme_families() -> set[str]:
    """The families the README's "Metrics" table lists."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Metrics\n") :]
    section = section[: section.index("\n#")]
    return set(re.findall(r"^\| `(mcp_supervisor_\w+)` \|", section, re.MULTILINE))


def _check_histogram(series: dict[str, list[Sample]]) -> tuple[float, float]:
    """One series is a well-formed histogram: its ``le`` bounds are ours and end in
    +Inf, its counts never fall, +Inf equals ``_count``. (Its count, its sum.)"""
    buckets = series[f"{HISTOGRAM}_bucket"]
    bounds = [float(sample.labels["le"]) for sample in buckets]
    assert bounds == [*map(float, CALL_DURATION_BUCKETS_S), math.inf]
    counts = [sample.value for sample in buckets]
    assert counts == sorted(counts), counts
    (count,) = series[f"{HISTOGRAM}_count"]
    (total,) = series[f"{HISTOGRAM}_sum"]
    assert counts[-1] == count.value
    assert all(set(s.labels) - {"le"} == {"server", "outcome"} for group in series.values() for s in group)
    return count.value, total.value


async def test_the_exposition_parses_with_a_histogram_per_server_and_outcome(tmp_path: Path) -> None:
    config = config_of(mini_spec("alpha"), mini_spec(QUOTED, call_timeout_s=0.3))
    async with admin_running(config, tmp_path) as api:
        http = api.http()
        for name in ("alpha", QUOTED):
            await wait_for(http, f"/v1/servers/{quote(name)}", lambda d: d["state"] == "steady")
        sid = await http.session()
        tid = (await http.turn(sid))["turn_id"]
        calls = [
            ("alpha_echo", {"text": "a"}, "ok"),
            ("alpha_echo", {"text": "b"}, "ok"),
            ("alpha_fail", {}, "tool_error"),
            ("say__hi__sleep", {"seconds": 0.05}, "ok"),
            ("say__hi__sleep", {"seconds": 5}, "timeout"),  # the server's call_timeout_s: 0.3 s
            ("nobody_echo", {}, "unknown_tool"),  # names no server
        ]
        with trio.fail_after(20):
            for tool, arguments, outcome in calls:
                envelope = (await http.call(sid, tid, tool, arguments)).json()
                assert (envelope.get("error") or {}).get("code", "ok") == outcome, envelope
            text = (await http.request("GET", "/metrics")).body.decode()

    assert set(re.findall(r"^# TYPE (\S+) ", text, re.MULTILINE)) == _readme_families()
    families = _parse(text)
    assert HISTOGRAM in families and f"{HISTOGRAM}_bucket" not in families
    assert not any(name.startswith("mcp_supervisor_call_duration_ms") for name in families)
    totals = {(s.labels["server"], s.labels["outcome"]): s.value for s in families[CALLS]}
    assert all(set(s.labels) == {"server", "outcome"} for s in families[CALLS])
    assert totals == {
        ("alpha", "ok"): 2,
        ("alpha", "tool_error"): 1,
        (QUOTED, "ok"): 1,
        (QUOTED, "timeout"): 1,
        ("", "unknown_tool"): 1,
    }
    series = _series(families[HISTOGRAM])
    assert set(series) == set(totals)
    seen = {key: _check_histogram(one) for key, one in series.items()}
    assert {key: count for key, (count, _) in seen.items()} == totals  # _count == calls_total
    # Seconds, not milliseconds: a 50 ms sleep sums to about 0.05, a 0.3 s timeout to about 0.3.
    assert 0.05 <= seen[QUOTED, "ok"][1] < 2
    assert 0.3 <= seen[QUOTED, "timeout"][1] < 3
    assert 0 < seen["alpha", "ok"][1] < 1
    assert seen["", "unknown_tool"][1] == 0  # refused before any server had it


def test_a_duration_on_a_bound_counts_in_that_bucket_and_a_long_one_only_in_inf() -> None:
    metrics = Metrics()
    metrics.observe_call("a", "ok", 0.001)  # le is "less than or equal"
    metrics.observe_call("a", "ok", 0.0)
    metrics.observe_call("a", "ok", 301.5)  # past the last bound, 300 s
    samples = _series(_parse(metrics.render({}, 1, 0))[HISTOGRAM])["a", "ok"]
    by_le = {s.labels["le"]: s.value for s in samples[f"{HISTOGRAM}_bucket"]}
    assert by_le["0.0001"] == 1 and by_le["0.0005"] == 1 and by_le["0.001"] == 2
    assert by_le["300.0"] == 2 and by_le["+Inf"] == 3
    assert _check_histogram(samples) == (3, 301.501)


def test_label_values_are_escaped() -> None:
    metrics = Metrics()
    odd = 'back\\slash "quoted"\nnewline'
    metrics.observe_call(odd, "ok", 0.5)
    families = _parse(metrics.render({}, 1, 0))
    assert [s.labels["server"] for s in families[CALLS]] == [odd]
    assert {s.labels["server"] for s in families[HISTOGRAM]} == {odd}


def test_sample_values_are_exact() -> None:
    assert sample_value(1_234_567) == "1234567"  # not 1.23457e+06
    assert sample_value(0.000123456789) == "0.000123456789"
    assert (sample_value(math.inf), sample_value(math.nan)) == ("+Inf", "NaN")
