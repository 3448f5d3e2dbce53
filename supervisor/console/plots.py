"""A server's latency plot and state timeline as inline SVG, drawn on the server.

Pure functions of the API's own data (``GET /v1/servers/{name}/latency`` buckets, the
transitions of ``GET /v1/servers/{name}``) and the time, so the coordinates are tested
directly. No ``style`` attribute and no ``<style>`` element (the console's CSP allows
style sheets from ``'self'`` only): colours are SVG presentation attributes (``fill``,
``stroke``). Latency is on a log scale, one decade a grid line, because a histogram's
p50 and p99 are often orders of magnitude apart; an empty bucket is a gap in the line,
and every point also gets a dot so that a lone bucket between gaps shows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

import attrs

from supervisor.console.ages import age_text, clock_text

WIDTH = 560
LATENCY_HEIGHT = 180
TIMELINE_HEIGHT = 80
SERIES = (("p50", "p50_ms", "#0969da"), ("p99", "p99_ms", "#bf8700"))
"""Each latency line: its name (and class), the bucket's field, its colour."""
STATE_COLOURS = {
    "steady": "#2da44e", "backoff": "#cf222e", "idle": "#d0d7de", "resolve": "#54aeff",
    "authenticate": "#8250df", "handshake": "#0969da", "list": "#218bff", "teardown": "#9a6700",
    "disabled": "#6e7781", "stopped": "#24292f",
}  # fmt: skip
OTHER_COLOUR = "#afb8c1"
MIN_BAND = 1.0
"""A state that lasted a few milliseconds still gets a pixel."""


@attrs.frozen
class Frame:
    """The plot area inside the picture."""

    left: float
    top: float
    width: float
    height: float

    @property
    def right(self) -> float:
        return self.left + self.width

    @property
    def bottom(self) -> float:
        return self.top + self.height


LATENCY_FRAME = Frame(48, 24, WIDTH - 48 - 12, LATENCY_HEIGHT - 24 - 36)
TIMELINE_FRAME = Frame(8, 6, WIDTH - 16, 26)


@attrs.frozen
class Point:
    x: float
    y: float
    ms: float


@attrs.frozen
class Scale:
    """A log scale of milliseconds, whole decades from ``low`` to ``high``."""

    low: float
    high: float

    def y(self, ms: float, frame: Frame) -> float:
        span = math.log10(self.high) - math.log10(self.low)
        share = (math.log10(max(ms, self.low)) - math.log10(self.low)) / span
        return _round(frame.bottom - share * frame.height)

    def decades(self) -> list[float]:
        return [10.0**k for k in range(round(math.log10(self.low)), round(math.log10(self.high)) + 1)]


@attrs.frozen
class Band:
    """One state's stretch of the timeline."""

    state: str
    x: float
    width: float
    start: float
    end: float


def _round(value: float) -> float:
    return round(value, 1)


def _num(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def latency_scale(buckets: Sequence[Mapping[str, Any]]) -> Scale:
    """Whole decades around every p50 and p99 (1 to 10 ms when there is none)."""
    values = [float(b[key]) for b in buckets for _, key, _ in SERIES if b.get(key) is not None]
    values = [v for v in values if v > 0]
    if not values:
        return Scale(1.0, 10.0)
    low = 10.0 ** math.floor(math.log10(min(values)))
    high = 10.0 ** math.ceil(math.log10(max(values)))
    return Scale(low, high if high > low else low * 10)


def latency_runs(
    buckets: Sequence[Mapping[str, Any]], key: str, scale: Scale, frame: Frame = LATENCY_FRAME
) -> list[list[Point]]:
    """The points of one percentile, split into runs at every empty bucket (a gap).
    Bucket ``i`` of ``n`` sits at the middle of its tenth of the width (oldest left)."""
    runs: list[list[Point]] = []
    run: list[Point] = []
    step = frame.width / max(1, len(buckets))
    for index, bucket in enumerate(buckets):
        value = bucket.get(key)
        if value is None:
            if run:
                runs.append(run)
            run = []
            continue
        ms = float(value)
        run.append(Point(_round(frame.left + (index + 0.5) * step), scale.y(ms, frame), ms))
    if run:
        runs.append(run)
    return runs


def _svg(kind: str, height: int, label: str, body: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot {kind}" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" role="img" aria-label="{escape(label)}">'
        f"<title>{escape(label)}</title>{body}</svg>"
    )


def _text(x: float, y: float, text: str, anchor: str = "middle", cls: str = "label") -> str:
    return (
        f'<text class="{cls}" x="{_num(x)}" y="{_num(y)}" text-anchor="{anchor}" '
        f'font-size="10" fill="#57606a">{escape(text)}</text>'
    )


def latency_plot(buckets: Sequence[Mapping[str, Any]], bucket_s: float = 10) -> str:
    """p50 and p99 over the ring (``buckets`` oldest first), axes in ms and time ago."""
    frame, scale = LATENCY_FRAME, latency_scale(buckets)
    span = len(buckets) * bucket_s
    parts = [
        f'<rect x="{_num(frame.left)}" y="{_num(frame.top)}" width="{_num(frame.width)}" '
        f'height="{_num(frame.height)}" fill="#ffffff" stroke="#d0d7de"/>'
    ]
    for decade in scale.decades():
        y = scale.y(decade, frame)
        parts.append(
            f'<line x1="{_num(frame.left)}" y1="{_num(y)}" x2="{_num(frame.right)}" y2="{_num(y)}" '
            'stroke="#eaeef2"/>'
        )
        parts.append(_text(frame.left - 4, y + 3, f"{decade:g}", "end"))
    parts.append(_text(frame.left - 4, frame.top - 10, "ms", "end", "axis"))
    for ago in range(0, int(span) + 1, 300) if span else ():
        x = frame.right - frame.width * ago / span
        parts.append(_text(x, frame.bottom + 13, "now" if ago == 0 else f"{ago // 60} min"))
    parts.append(_text(frame.left + frame.width / 2, frame.bottom + 28, "time ago", cls="axis"))
    drawn = False
    for name, key, colour in SERIES:
        for run in latency_runs(buckets, key, scale, frame):
            drawn = True
            if len(run) > 1:
                points = " ".join(f"{_num(p.x)},{_num(p.y)}" for p in run)
                parts.append(
                    f'<polyline class="{name}" points="{points}" fill="none" stroke="{colour}" '
                    'stroke-width="1.5"/>'
                )
            parts.extend(
                f'<circle class="{name}" cx="{_num(p.x)}" cy="{_num(p.y)}" r="2" fill="{colour}">'
                f"<title>{name} {p.ms:g} ms</title></circle>"
                for p in run
            )
    if not drawn:
        minutes = f"{span / 60:g} minutes" if span else "ring"
        parts.append(
            _text(
                frame.left + frame.width / 2, frame.top + frame.height / 2, f"no calls in the last {minutes}"
            )
        )
    for offset, (name, _, colour) in enumerate(SERIES):
        x = frame.right - 90 + offset * 45
        parts.append(
            f'<line x1="{_num(x)}" y1="{_num(frame.top - 13)}" x2="{_num(x + 14)}" '
            f'y2="{_num(frame.top - 13)}" '
            f'stroke="{colour}" stroke-width="2"/>'
        )
        parts.append(_text(x + 18, frame.top - 10, name, "start"))
    return _svg(
        "latency", LATENCY_HEIGHT, "call latency, p50 and p99 (ms), over the last 15 minutes", "".join(parts)
    )


def timeline_bands(
    transitions: Sequence[Mapping[str, Any]], now: float, frame: Frame = TIMELINE_FRAME
) -> list[Band]:
    """A band per transition, from its time to the next one's (the last to ``now``),
    across the frame from the first transition to ``now``."""
    ordered = sorted(transitions, key=lambda t: float(t["at"]))
    if not ordered:
        return []
    start = float(ordered[0]["at"])
    end = max(now, float(ordered[-1]["at"]))
    span = end - start if end > start else 1.0
    bands = []
    for index, transition in enumerate(ordered):
        began = float(transition["at"])
        ended = float(ordered[index + 1]["at"]) if index + 1 < len(ordered) else end
        x = _round(frame.left + frame.width * (began - start) / span)
        width = _round(max(MIN_BAND, frame.width * (ended - began) / span))
        bands.append(Band(str(transition.get("state")), x, width, began, ended))
    return bands


def state_timeline(transitions: Sequence[Mapping[str, Any]], now: float) -> str:
    """The states over time as coloured bands, labelled in time ago, with a legend of
    the states it shows."""
    frame = TIMELINE_FRAME
    bands = timeline_bands(transitions, now, frame)
    label = "the server's states over time"
    if not bands:
        return _svg("timeline", TIMELINE_HEIGHT, label, _text(WIDTH / 2, 24, "no state changes recorded yet"))
    parts = [
        f'<rect class="band" data-state="{escape(b.state)}" x="{_num(b.x)}" y="{_num(frame.top)}" '
        f'width="{_num(b.width)}" height="{_num(frame.height)}" '
        f'fill="{STATE_COLOURS.get(b.state, OTHER_COLOUR)}"><title>{escape(b.state)} from '
        f"{escape(clock_text(b.start))} for {escape(age_text(b.end - b.start) or '0 s')}</title></rect>"
        for b in bands
    ]
    below = frame.bottom + 12
    parts.append(_text(frame.left, below, f"{age_text(now - bands[0].start) or '0 s'} ago", "start"))
    parts.append(_text(frame.right, below, "now", "end"))
    parts.append(_text(frame.left + frame.width / 2, below, "time ago", cls="axis"))
    x = frame.left
    for state in dict.fromkeys(b.state for b in bands):
        parts.append(
            f'<rect class="swatch" x="{_num(x)}" y="{_num(below + 10)}" width="10" height="10" '
            f'fill="{STATE_COLOURS.get(state, OTHER_COLOUR)}"/>'
        )
        parts.append(_text(x + 14, below + 19, state, "start", "legend"))
        x += 14 + 6.5 * len(state) + 12
    return _svg("timeline", TIMELINE_HEIGHT, label, "".join(parts))
