"""Contenders measured round by round (A B C, B C A, C A B, ...), the one runner every
comparing section uses.

A 2-core machine drifts: measured whole, one after the other, a contender takes
whatever the machine was doing at its moment (two quiet runs ten minutes apart put
our gateway at 1.37x and then 0.88x a peer's calls/s). Interleaved, each round puts
every contender at nearly the same moment, the order changing from round to round
so that none always runs first or always after the same other (``round_order``),
and the median of the rounds (with min-max) shows what the drift did.

``run`` returns, per contender and per metric, the median, min and max over the
rounds, with a marker: this run's id, the rounds in the order actually run, and the
1-minute load average at the start and at the end. ``ratio`` (what every report
prints a ratio with) refuses contenders that this marker does not show measured
together: a section without it, fewer than ``MIN_ROUNDS`` rounds, a contender
missing from a round, or contenders put together from two runs (two JSON files).
"""

from __future__ import annotations

import os
import statistics
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

MIN_ROUNDS = 5

# One contender's measurement in one round (its argument: the round's index, from 0).
# Numbers anywhere in what it returns (nested dicts too, as "a.b") are metrics; other
# values are notes; an "error" key marks a round that failed.
Measure = Callable[[int], Mapping[str, Any]]
Section = dict[str, Any]


class NotInterleaved(ValueError):
    """A ratio asked of contenders that were not measured in one interleaved run."""


def round_order(names: Sequence[str], index: int, rotate: bool = True) -> list[str]:
    """Who runs when in round ``index``: with ``rotate``, the rows of a Williams square
    (a Latin square balanced for neighbours), so that over a cycle every contender runs
    first as often as any other, and right after each other one as often: a contender
    that leaves the machine busy for a moment (a server's teardown) slows every other
    alike. Without ``rotate``, ``names`` as given, every round."""
    count = len(names)
    if not rotate or count < 2:
        return list(names)
    first = [0]  # 0, 1, n-1, 2, n-2, ...
    low, high = 1, count - 1
    while len(first) < count:
        first.append(low if len(first) % 2 else high)
        low, high = (low + 1, high) if len(first) % 2 == 0 else (low, high - 1)
    rows = [[(place + shift) % count for place in first] for shift in range(count)]
    if count % 2:  # an odd square balances neighbours only with its mirror
        rows += [row[::-1] for row in rows]
    return [names[place] for place in rows[index % len(rows)]]


def run(
    section: str,
    contenders: Mapping[str, Measure],
    rounds: int,
    *,
    rotate: bool = True,
    progress: Callable[[str], None] | None = None,
    load: Callable[[], float] | None = None,
) -> Section:
    """Measure every contender once per round, ``rounds`` rounds, in ``round_order``."""
    if not contenders:
        raise ValueError(f"section {section!r}: no contenders")
    if len(contenders) > 1 and rounds < MIN_ROUNDS:
        raise ValueError(
            f"section {section!r}: {rounds} rounds; a comparison needs at least {MIN_ROUNDS} "
            "(medians of fewer say little on a shared machine)"
        )
    load = load or (lambda: os.getloadavg()[0])
    say = progress or _to_stderr
    run_id = uuid.uuid4().hex
    names = list(contenders)
    raw: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    order: list[list[str]] = []
    load_start = load()
    for index in range(rounds):
        this_round = round_order(names, index, rotate)
        order.append(this_round)
        for name in this_round:
            result = _measured(contenders[name], index)
            raw[name].append(result)
            failed = f"  ERROR {result['error']}" if "error" in result else ""
            say(f"  .. {section} round {index + 1}/{rounds} {name}{failed}")
    marker = {
        "run": run_id,
        "section": section,
        "rounds": rounds,
        "rotate": rotate,
        "order": order,
        "load_start": load_start,
        "load_end": load(),
    }
    return {
        "interleaved": marker,
        "contenders": {name: {"run": run_id, **aggregate(rows)} for name, rows in raw.items()},
    }


def _measured(measure: Measure, index: int) -> dict[str, Any]:
    """One measurement; one that raises is a failed round, not a failed run."""
    try:
        return dict(measure(index))
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def aggregate(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per metric, the median, min and max over the rounds that did not fail; the
    first value seen of every note; the failures; the rounds as they were."""
    samples: dict[str, list[float]] = {}
    notes: dict[str, Any] = {}
    errors = [str(row["error"]) for row in rows if "error" in row]
    for row in rows:
        if "error" in row:
            continue
        numbers, others = split(row)
        for key, value in numbers.items():
            samples.setdefault(key, []).append(value)
        for key, value in others.items():
            notes.setdefault(key, value)
    return {
        "metrics": {key: summary(values) for key, values in samples.items()},
        "notes": notes,
        "errors": errors,
        "rounds": [dict(row) for row in rows],
    }


def split(row: Mapping[str, Any], prefix: str = "") -> tuple[dict[str, float], dict[str, Any]]:
    """The numbers of ``row`` (nested dicts flattened to ``a.b``) and everything else."""
    numbers: dict[str, float] = {}
    others: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            inner_numbers, inner_others = split(value, name + ".")
            numbers.update(inner_numbers)
            others.update(inner_others)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            numbers[name] = float(value)
        else:
            others[name] = value
    return numbers, others


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def metric(section: Mapping[str, Any], contender: str, name: str) -> dict[str, float] | None:
    """The median / min / max / n of one metric of one contender (None: not measured)."""
    measured = section.get("contenders", {}).get(contender, {})
    found: dict[str, float] | None = measured.get("metrics", {}).get(name)
    return found


def check(name: str, section: Mapping[str, Any], contenders: Sequence[str] | None = None) -> None:
    """Raise ``NotInterleaved`` unless ``contenders`` (default: all of the section's)
    were measured in one interleaved run of at least ``MIN_ROUNDS`` rounds, each in
    every round. Every table that sets contenders side by side calls it first."""
    measured = section.get("contenders", {}) if isinstance(section, Mapping) else {}
    names = list(measured) if contenders is None else list(contenders)

    def refuse(why: str) -> NotInterleaved:
        who = " and ".join(names) or "its contenders"
        return NotInterleaved(
            f"section {name!r}: {who} were not measured in one interleaved run ({why}); "
            "refusing to compare them"
        )

    marker = section.get("interleaved") if isinstance(section, Mapping) else None
    if not isinstance(marker, Mapping):
        raise refuse("the results carry no round log: measured one after the other, or by an older run")
    rounds, order = marker.get("rounds", 0), marker.get("order", [])
    if len(names) > 1 and (rounds < MIN_ROUNDS or len(order) != rounds):
        raise refuse(f"{len(order)} rounds logged, at least {MIN_ROUNDS} needed")
    for contender in names:
        if contender not in measured:
            raise refuse(f"{contender} is not in this run")
        if measured[contender].get("run") != marker.get("run"):
            raise refuse(f"{contender} comes from another run")
        if any(contender not in ran for ran in order):
            raise refuse(f"{contender} is missing from some rounds")


def ratio(name: str, section: Mapping[str, Any], contender: str, against: str, key: str) -> float | None:
    """Median of ``key`` of ``contender`` ÷ that of ``against``, from one interleaved
    run only (else ``NotInterleaved``); None where either has no such number."""
    check(name, section, (contender, against))
    mine, theirs = metric(section, contender, key), metric(section, against, key)
    if mine is None or theirs is None or not theirs["median"]:
        return None
    return mine["median"] / theirs["median"]
