# ruff: noqa: E501  (a report of tables: long f-strings on purpose)
"""``bench_fronts.py``'s report: the peer table with ratios against ours, the first-call
rows, and issue 17's targets met or missed, from one run's results."""

from __future__ import annotations

from typing import Any


def table(results: dict[str, dict[str, Any]]) -> str:
    measured = {n: r for n, r in results.items() if "sequential_ms" in r}
    ours = measured.get("ours")
    lines = [
        "| front | p50 ms | p99 ms | p50 ÷ ours | calls/s (16 sessions) | ÷ ours | progress | no leak to "
        "another session | cancel reaches backend | backend SIGKILLed mid-call | same session back |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        if "error" in r:
            lines.append(f"| {name} | skipped: {r['error']} |" + " |" * 9)
            continue
        if name not in measured:
            continue
        seq = r["sequential_ms"]
        p50_ratio = f"{seq['p50'] / ours['sequential_ms']['p50']:.2f}x" if ours else "—"
        rate_ratio = f"{r['calls_per_s'] / ours['calls_per_s']:.2f}x" if ours else "—"
        kill, back = "—", "—"
        if "kill_answer" in r:
            kill_ms = r.get("kill_answer_ms")
            kill = f"{r['kill_answer']} in {kill_ms:.0f} ms" if kill_ms else r["kill_answer"]
            back = (
                f"{r['recovered_s']} s"
                if r.get("recovered_s")
                else f"no ({r.get('recover_error', 'timeout')})"
            )
        yes = {True: "yes", False: "**no**", None: "—"}
        cancel = yes[r.get("cancel_reaches_backend")] + (
            f" ({r['cancel_note']})" if r.get("cancel_note") else ""
        )
        no_leak = None if "progress" not in r else not r["progress_reaches_other_session"]
        lines.append(
            f"| {name} | {seq['p50']:.2f} | {seq['p99']:.2f} | {p50_ratio} | {r['calls_per_s']:.0f} | {rate_ratio} "
            f"| {yes[r.get('progress')]} | {yes[no_leak]} | {cancel} | {kill} | {back} |"
        )
    for name, r in results.items():
        if name.startswith("first call"):
            q = r["spaced_ms"]
            lines.append(
                f"\n{name} (Python backend, mcp-server-time): p50 {q['p50']:.1f} ms, "
                f"min {q['min']:.1f}, max {q['max']:.1f} (n={q['n']})"
            )
    lines.append("\n" + "\n".join(targets(results)))
    return "\n".join(lines)


def targets(results: dict[str, dict[str, Any]]) -> list[str]:
    """Issue 17's targets for ours, each met or missed, from this run's numbers."""
    ours, direct = results.get("ours", {}), results.get("direct-http", {})
    if "sequential_ms" not in ours:
        return ["targets: ours was not measured"]
    out = []

    def verdict(name: str, met: bool, detail: str) -> None:
        out.append(f"- {name}: {'met' if met else '**missed**'} ({detail})")

    p50, p99 = ours["sequential_ms"]["p50"], ours["sequential_ms"]["p99"]
    if "sequential_ms" in direct:
        floor = direct["sequential_ms"]["p50"]
        verdict("p50 ≤ direct to the SDK server", p50 <= floor, f"{p50:.2f} ms vs {floor:.2f} ms")
    verdict("p99 ≤ 5 ms", p99 <= 5, f"{p99:.2f} ms")
    peer_rates = {  # the peers reached with the same client as ours (not the raw WebSocket row)
        n: r["calls_per_s"]
        for n, r in results.items()
        if "calls_per_s" in r and not n.startswith(("ours", "direct")) and n != "supergateway-ws"
    }
    if peer_rates:
        best = max(peer_rates, key=peer_rates.__getitem__)
        ratio = ours["calls_per_s"] / peer_rates[best]
        verdict(
            "calls/s ≥ 1.3x the best peer",
            ratio >= 1.3,
            f"{ours['calls_per_s']:.0f}/s, {ratio:.2f}x {best}'s {peer_rates[best]:.0f}/s",
        )
    warm = results.get("first call, warm: 1")
    if warm:
        verdict(
            "first call on a warm session server ≤ 50 ms",
            warm["spaced_ms"]["p50"] <= 50,
            f"p50 {warm['spaced_ms']['p50']:.1f} ms",
        )
    return out
