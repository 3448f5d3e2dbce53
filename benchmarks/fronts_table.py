# ruff: noqa: E501  (a report of tables: long f-strings and en dashes on purpose)
"""``bench_fronts.py``'s report (and ``run.py``'s gateway section): the fronts with
medians (min-max) of their interleaved rounds and ratios against ours, the checks,
the first-call rows, and issue 17's targets met or missed. Every ratio goes through
``interleave.ratio``: fronts not measured in one interleaved run are not compared."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import interleave
from tables import Column, failures, round_log, spread, times

COLUMNS: list[Column] = [
    ("sequential_ms.p50", "p50 ms", "{:.2f}"),
    ("sequential_ms.p99", "p99 ms", "{:.2f}"),
    ("calls_per_s", "calls/s", "{:.0f}"),
]
YES = {True: "yes", False: "**no**", None: "—"}


def table(section: Mapping[str, Any], warm: Mapping[str, Any] | None = None, name: str = "fronts") -> str:
    interleave.check(name, section)
    if warm:
        interleave.check("first call", warm)
    fronts = section.get("contenders", {})
    ours = "ours" if "ours" in fronts else None

    def versus(front: str, key: str) -> str:
        return times(name, section, front, ours, key, "{:.2f}x") if ours else "—"

    lines = [
        "| front | p50 ms | p99 ms | p50 ÷ ours | calls/s (16 sessions) | ÷ ours | progress | no leak to "
        "another session | cancel reaches backend | backend SIGKILLed mid-call | same session back |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for front, measured in fronts.items():
        if not measured.get("metrics"):
            lines.append(f"| {front} | skipped{failures(section, front)} |" + " |" * 9)
            continue
        p50, p99, rate = (spread(section, front, key, fmt) for key, _, fmt in COLUMNS)
        lines.append(
            f"| {front}{failures(section, front)} | {p50} | {p99} | {versus(front, 'sequential_ms.p50')} | {rate} | "
            f"{versus(front, 'calls_per_s')} | {_checks(section, front)} |"
        )
    lines.append(round_log(section))
    for contender in (warm or {}).get("contenders", {}):
        lines.append(
            f"\nfirst call, {contender} (Python backend, mcp-server-time): p50 "
            f"{spread(warm or {}, contender, 'spaced_ms.p50', '{:.1f}')} ms over the rounds"
        )
    if warm:
        lines.append(round_log(warm))
    lines.append("\n" + "\n".join(targets(section, warm, name)))
    return "\n".join(lines)


def _checks(section: Mapping[str, Any], front: str) -> str:
    """The correctness columns, from the round that ran the checks (the first)."""
    notes = section["contenders"][front].get("notes", {})
    if "progress" not in notes:
        return " | ".join(["—"] * 5)
    cancel = YES[notes.get("cancel_reaches_backend")] + (
        f" ({notes['cancel_note']})" if notes.get("cancel_note") else ""
    )
    kill_ms = interleave.metric(section, front, "kill_answer_ms")
    kill = str(notes.get("kill_answer", "—")) + (f" in {kill_ms['median']:.0f} ms" if kill_ms else "")
    recovered = interleave.metric(section, front, "recovered_s")
    back = f"{recovered['median']} s" if recovered else f"no ({notes.get('recover_error', 'timeout')})"
    leak = notes.get("progress_reaches_other_session")
    return f"{YES[notes.get('progress')]} | {YES[None if leak is None else not leak]} | {cancel} | {kill} | {back}"


def targets(
    section: Mapping[str, Any], warm: Mapping[str, Any] | None = None, name: str = "fronts"
) -> list[str]:
    """Issue 17's targets for ours, each met or missed, from this run's medians."""
    ours = interleave.metric(section, "ours", "sequential_ms.p50")
    if ours is None:
        return ["targets: ours was not measured"]
    out = []

    def verdict(target: str, met: bool, detail: str) -> None:
        out.append(f"- {target}: {'met' if met else '**missed**'} ({detail})")

    p50 = ours["median"]
    p99 = (interleave.metric(section, "ours", "sequential_ms.p99") or {"median": float("nan")})["median"]
    floor = (
        interleave.ratio(name, section, "ours", "direct-http", "sequential_ms.p50")
        if _has(section, "direct-http")
        else None
    )
    if floor is not None:
        verdict("p50 ≤ direct to the SDK server", floor <= 1, f"{p50:.2f} ms, {floor:.2f}x direct")
    verdict("p99 ≤ 5 ms", p99 <= 5, f"{p99:.2f} ms")
    peer_rates = {  # the peers reached with the same client as ours (not the raw WebSocket row)
        front: found["median"]
        for front in section.get("contenders", {})
        if not front.startswith(("ours", "direct"))
        and front != "supergateway-ws"
        and (found := interleave.metric(section, front, "calls_per_s"))
    }
    if peer_rates:
        best = max(peer_rates, key=peer_rates.__getitem__)
        ratio = interleave.ratio(name, section, "ours", best, "calls_per_s")
        if ratio is not None:
            verdict(
                "calls/s ≥ 1.3x the best peer",
                ratio >= 1.3,
                f"{ratio:.2f}x {best}'s {peer_rates[best]:.0f}/s (medians)",
            )
    first = interleave.metric(warm or {}, "warm: 1", "spaced_ms.p50")
    if first:
        verdict(
            "first call on a warm session server ≤ 50 ms",
            first["median"] <= 50,
            f"p50 {first['median']:.1f} ms",
        )
    return out


def _has(section: Mapping[str, Any], front: str) -> bool:
    return interleave.metric(section, front, "sequential_ms.p50") is not None
