# ruff: noqa: RUF001  (en dashes and multiplication signs in the tables on purpose)
"""Markdown tables of interleaved sections (``interleave.run``): every cell the median
of the rounds with their min-max, every ratio through ``interleave.ratio``, so no
table compares contenders that were not measured together; and the round log under
each table (rounds, order, load average at start and end)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import interleave

Section = Mapping[str, Any]
# One measured number shown: its metric key, the column's header, the format of one value.
Column = tuple[str, str, str]


def spread(section: Section, contender: str, key: str, fmt: str = "{:.0f}") -> str:
    """``median (min-max)`` of one metric over the rounds, ``-`` when never measured."""
    found = interleave.metric(section, contender, key)
    if found is None:
        return "-"
    median = fmt.format(found["median"])
    if found["n"] == 1:
        return median
    return f"{median} ({fmt.format(found['min'])}–{fmt.format(found['max'])})"


def times(name: str, section: Section, contender: str, against: str, key: str, fmt: str = "{:.2f}×") -> str:
    """The ratio of medians, refused (``NotInterleaved``) unless measured together."""
    found = interleave.ratio(name, section, contender, against, key)
    return "-" if found is None else fmt.format(found)


def failures(section: Section, contender: str) -> str:
    """`` (2 of 5 rounds failed: ...)`` after a contender's name, or nothing."""
    measured = section.get("contenders", {}).get(contender, {})
    errors: list[str] = measured.get("errors", [])
    if not errors:
        return ""
    return f" ({len(errors)} of {len(measured.get('rounds', []))} rounds failed: {errors[0][:120]})"


def round_log(section: Section) -> str:
    """How the section was run, in one line."""
    marker = section.get("interleaved")
    if not marker:
        return "not interleaved"
    first = ", ".join(marker["order"][0]) if marker["order"] else "-"
    rotated = (
        "the order balanced over the rounds (each first, and right after each other, about as often)"
        if marker.get("rotate")
        else "in the same order each round"
    )
    return (
        f"{marker['rounds']} rounds, contenders interleaved, {rotated} (round 1: {first}); "
        f"load average (1 min) {marker['load_start']:.2f} at the start, {marker['load_end']:.2f} at the end"
    )


def table(
    name: str,
    section: Section,
    columns: Sequence[Column],
    against: str | None = None,
    ratio_keys: Sequence[tuple[str, str]] = (),
) -> list[str]:
    """One row per contender: each column's median (min-max), then, for each of
    ``ratio_keys`` (key, header), its median ÷ that of ``against``."""
    interleave.check(name, section)
    ratios = ratio_keys if against in section.get("contenders", {}) else ()
    head = [header for _, header, _ in columns] + [f"{header} ÷ {against}" for _, header in ratios]
    lines = ["| contender | " + " | ".join(head) + " |", "|---|" + "---|" * len(head)]
    for contender in section.get("contenders", {}):
        cells = [spread(section, contender, key, fmt) for key, _, fmt in columns]
        cells += [times(name, section, contender, str(against), key) for key, _ in ratios]
        lines.append(f"| {contender}{failures(section, contender)} | " + " | ".join(cells) + " |")
    lines.append(round_log(section))
    return lines


def before_after(
    name: str, section: Section, columns: Sequence[Column], before: str, after: str
) -> list[str]:
    """Per metric: ``before``'s median (min-max), ``after``'s, after ÷ before, and
    whether the two ranges of rounds overlap (then the run shows no difference)."""
    contenders = section.get("contenders", {})
    if before not in contenders or after not in contenders:
        return []
    interleave.check(name, section, (before, after))
    lines = [
        f"| {name}: measure | {before} | {after} | {after} ÷ {before} | ranges of the rounds |",
        "|---|---|---|---|---|",
    ]
    for key, header, fmt in columns:
        mine, theirs = spread(section, after, key, fmt), spread(section, before, key, fmt)
        ratio = times(name, section, after, before, key, "{:.3f}×")
        lines.append(f"| {header} | {theirs} | {mine} | {ratio} | {_overlap(section, before, after, key)} |")
    return lines


def _overlap(section: Section, before: str, after: str, key: str) -> str:
    mine, theirs = interleave.metric(section, after, key), interleave.metric(section, before, key)
    if mine is None or theirs is None:
        return "-"
    apart = mine["min"] > theirs["max"] or theirs["min"] > mine["max"]
    return "apart" if apart else "overlap"
