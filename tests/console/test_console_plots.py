"""The server page's SVG, as pure functions: where the latency points land (log scale,
one bucket a 90th of the width), empty buckets as gaps, a lone point, an empty ring;
the state timeline's bands from the transitions; nothing a CSP of ``style-src 'self'``
would refuse, and every text escaped."""

from __future__ import annotations

import re
from typing import Any

from supervisor.console.ages import age_text
from supervisor.console.plots import (
    LATENCY_FRAME,
    STATE_COLOURS,
    TIMELINE_FRAME,
    Band,
    Point,
    Scale,
    latency_plot,
    latency_runs,
    latency_scale,
    state_timeline,
    timeline_bands,
)

EMPTY: dict[str, Any] = {"count": 0, "p50_ms": None, "p99_ms": None}


def ring(**filled: tuple[float, float]) -> list[dict[str, Any]]:
    """90 buckets, empty but those named ``b<index>=(p50, p99)``."""
    buckets = [{"start": 1000.0 + 10 * i, **EMPTY} for i in range(90)]
    for key, (p50, p99) in filled.items():
        buckets[int(key[1:])].update(count=1, p50_ms=p50, p99_ms=p99)
    return buckets


def no_inline_style(svg: str) -> None:
    assert " style=" not in svg and "<style" not in svg and "<script" not in svg


def test_the_frame_is_where_the_coordinates_below_assume() -> None:
    assert (LATENCY_FRAME.left, LATENCY_FRAME.top, LATENCY_FRAME.width, LATENCY_FRAME.height) == (
        48,
        24,
        500,
        120,
    )
    assert (TIMELINE_FRAME.left, TIMELINE_FRAME.width) == (8, 544)


def test_points_land_on_a_log_scale_one_bucket_a_ninetieth_of_the_width() -> None:
    buckets = ring(b0=(1, 100), b1=(10, 100), b89=(10, 1000))
    scale = latency_scale(buckets)
    assert scale == Scale(1, 1000)
    # 500 px / 90 buckets: bucket i at 48 + (i + 0.5) * 5.56; 1 ms at the bottom (144),
    # 1000 ms at the top (24), one decade every 40 px.
    assert latency_runs(buckets, "p50_ms", scale) == [
        [Point(50.8, 144.0, 1.0), Point(56.3, 104.0, 10.0)],
        [Point(545.2, 104.0, 10.0)],
    ]
    assert latency_runs(buckets, "p99_ms", scale) == [
        [Point(50.8, 64.0, 100.0), Point(56.3, 64.0, 100.0)],
        [Point(545.2, 24.0, 1000.0)],
    ]
    svg = latency_plot(buckets)
    no_inline_style(svg)
    assert '<polyline class="p50" points="50.8,144 56.3,104"' in svg
    assert '<polyline class="p99" points="50.8,64 56.3,64"' in svg
    assert svg.count('<circle class="p50"') == 3 and svg.count('<circle class="p99"') == 3
    # The axes: a grid line and a label a decade, in ms; time ago every 5 minutes.
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    for label in (
        "1",
        "10",
        "100",
        "1000",
        "ms",
        "15 min",
        "10 min",
        "5 min",
        "now",
        "time ago",
        "p50",
        "p99",
    ):
        assert label in labels, (label, labels)


def test_an_empty_bucket_is_a_gap_in_the_line() -> None:
    buckets = ring(b10=(2, 5), b11=(2, 5), b12=(2, 5), b14=(5, 5), b15=(5, 5))
    runs = latency_runs(buckets, "p50_ms", latency_scale(buckets))
    assert [[p.ms for p in run] for run in runs] == [[2, 2, 2], [5, 5]]
    assert runs[0][-1].x < runs[1][0].x
    svg = latency_plot(buckets)
    assert svg.count('<polyline class="p50"') == 2  # two pieces, not one line across the gap


def test_a_lone_point_is_a_dot_without_a_line() -> None:
    buckets = ring(b45=(5, 5))
    scale = latency_scale(buckets)
    assert scale == Scale(1, 10)
    assert latency_runs(buckets, "p50_ms", scale) == [[Point(300.8, 60.1, 5.0)]]  # log10(5) * 120 px up
    svg = latency_plot(buckets)
    assert "<polyline" not in svg
    assert '<circle class="p50" cx="300.8" cy="60.1"' in svg and "no calls" not in svg


def test_an_empty_ring_says_so() -> None:
    svg = latency_plot(ring())
    no_inline_style(svg)
    assert "no calls in the last 15 minutes" in svg
    assert "<circle" not in svg and "<polyline" not in svg
    assert latency_scale(ring()) == Scale(1, 10)
    assert "no calls" in latency_plot([])  # no buckets at all (a ring not yet read)


def test_one_decade_of_values_gets_a_decade_of_room() -> None:
    assert latency_scale(ring(b0=(10, 10))) == Scale(10, 100)
    assert latency_scale(ring(b0=(0.5, 20_000))) == Scale(0.1, 100_000)


TRANSITIONS = [
    {"at": 1000.0, "state": "resolve", "previous": "idle", "reason": None, "phase": "starting"},
    {"at": 1010.0, "state": "steady", "previous": "list", "reason": None, "phase": None},
    {"at": 1050.0, "state": "backoff", "previous": "steady", "reason": "closed", "phase": "reconnecting"},
]


def test_a_band_per_state_from_its_transition_to_the_next_and_the_last_to_now() -> None:
    # 68 s over 544 px: 8 px a second, from x = 8.
    assert timeline_bands(TRANSITIONS, now=1068.0) == [
        Band("resolve", 8.0, 80.0, 1000.0, 1010.0),
        Band("steady", 88.0, 320.0, 1010.0, 1050.0),
        Band("backoff", 408.0, 144.0, 1050.0, 1068.0),
    ]
    svg = state_timeline(TRANSITIONS, now=1068.0)
    no_inline_style(svg)
    for state in ("resolve", "steady", "backoff"):
        assert f'<rect class="band" data-state="{state}"' in svg
        assert '<rect class="swatch" x="' in svg and f">{state}</text>" in svg  # the legend
    assert f'fill="{STATE_COLOURS["backoff"]}"' in svg
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert f"{age_text(68)} ago" in labels and "now" in labels and "time ago" in labels


def test_a_state_of_a_few_milliseconds_still_shows_and_order_is_by_time() -> None:
    blink = [TRANSITIONS[1], {"at": 1000.0, "state": "handshake"}, {"at": 1000.001, "state": "list"}]
    bands = timeline_bands(blink, now=1068.0)
    assert [b.state for b in bands] == ["handshake", "list", "steady"]
    assert bands[0].width == 1.0  # a pixel at least
    assert bands[-1].x + bands[-1].width == TIMELINE_FRAME.right


def test_no_transitions_and_a_transition_at_this_very_moment() -> None:
    assert timeline_bands([], now=5.0) == []
    assert "no state changes recorded yet" in state_timeline([], now=5.0)
    (only,) = timeline_bands([{"at": 5.0, "state": "steady"}], now=5.0)
    assert (only.x, only.width) == (8.0, 1.0)


def test_text_in_the_svg_is_escaped() -> None:
    evil = '<script>alert(1)</script>"'
    svg = state_timeline([{"at": 1.0, "state": evil}], now=2.0)
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert 'data-state="&lt;script&gt;alert(1)&lt;/script&gt;&quot;"' in svg
