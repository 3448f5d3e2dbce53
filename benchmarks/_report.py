# ruff: noqa: E501, RUF001  (a report of tables: long f-strings, times and dash signs on purpose)
"""Turns benchmarks/run.py's raw results into the printed report and the target verdicts."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import fronts_table
import interleave
from bridge_table import bridge_table
from tables import Column, before_after, failures, round_log, spread, table, times

ROOT = Path(__file__).resolve().parent.parent  # paths in profiles are shown relative to it

BEFORE = "ours-before"  # with run.py --baseline DIR: ours as the code in DIR has it
NO_EXTRA = "no extra"  # the tracing section's row without OpenTelemetry, the others' base
Row = dict[str, Any]
CALL_COLUMNS: list[Column] = [
    ("seq_us.p50", "seq p50 µs", "{:.0f}"),
    ("seq_us.p99", "seq p99 µs", "{:.0f}"),
    ("tput_calls_s", "calls/s in flight", "{:.0f}"),
    ("seq_cpu_us_per_call", "client CPU µs/call, seq", "{:.0f}"),
    ("tput_cpu_us_per_call", "client CPU µs/call, in flight", "{:.0f}"),
]
MEMORY_COLUMNS: list[Column] = [
    ("per_connection_kb", "KB per connection", "{:.1f}"),
    ("open_s", "open + handshake + 1 call (s)", "{:.2f}"),
]


def _median(section: dict[str, Any], contender: str, key: str) -> float | None:
    found = interleave.metric(section, contender, key)
    return None if found is None else found["median"]


def _turncache(section: dict[str, Any]) -> str:
    """The what-if line of runs made before begin_turn had its caches (old JSON files)."""
    if "begin_turn_us_turncache" not in section:
        return ""
    return f"; what-if turncache {_q(section['begin_turn_us_turncache'], 'µs', '{:.1f}')}"


def _best(section: dict[str, Any], prefix: str, key: str, pick: Any) -> str | None:
    """The contender named ``prefix…`` with the best median of ``key`` (``pick``: min or max)."""
    measured = {
        c: m
        for c in section.get("contenders", {})
        if c.startswith(prefix) and (m := _median(section, c, key))
    }
    return pick(measured, key=measured.__getitem__) if measured else None


def calls_table(
    name: str, section: dict[str, Any], base: str = "floor", inflight: int = 64, sdk_columns: bool = True
) -> list[str]:
    """Calls of every client; ratios to ``base`` and to the SDK's better backend, each
    refused (``interleave.NotInterleaved``) unless measured in one interleaved run."""
    interleave.check(name, section)
    clients = section.get("contenders", {})
    sdk_p50 = _best(section, "sdk", "seq_us.p50", min) if sdk_columns else None
    sdk_tput = _best(section, "sdk", "tput_calls_s", max) if sdk_columns else None
    sdk_head = " p50 ÷ SDK | calls/s ÷ SDK |" if sdk_columns else ""
    lines = [
        f"| client | seq p50 µs | seq p99 µs | calls/s, {inflight} in flight | client CPU µs/call seq / {inflight} | "
        f"p50 ÷ {base} | calls/s ÷ {base} |{sdk_head}",
        "|---|---|---|---|---|---|---|" + ("---|---|" if sdk_columns else ""),
    ]

    def versus(client: str, against: str | None, key: str) -> str:
        return (
            times(name, section, client, against, key) if against is not None and against in clients else "-"
        )

    for client in clients:
        cells = [spread(section, client, key) for key, _, _ in CALL_COLUMNS]
        lines.append(
            f"| {client}{failures(section, client)} | {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} / {cells[4]} | "
            f"{versus(client, base, 'seq_us.p50')} | {versus(client, base, 'tput_calls_s')} |"
            + (
                f" {versus(client, sdk_p50, 'seq_us.p50')} | {versus(client, sdk_tput, 'tput_calls_s')} |"
                if sdk_columns
                else ""
            )
        )
    lines.append(round_log(section))
    return lines + _before_after(name, section, CALL_COLUMNS)


def _before_after(name: str, section: dict[str, Any], columns: Sequence[Column]) -> list[str]:
    """The before/after table of a run with ``--baseline`` (ours-before against ours)."""
    found = before_after(name, section, columns, BEFORE, "ours")
    return ["", *found] if found else []


def tracing_table(section: dict[str, Any]) -> list[str]:
    """The calls of ours in each tracing setup, ratios to the one without the extra, then
    what each worker saw: OpenTelemetry loaded, traces on, spans per measured call."""
    lines = calls_table("tracing", section, base=NO_EXTRA, sdk_columns=False)
    for contender, measured in section.get("contenders", {}).items():
        seen = [row["tracing"] for row in measured.get("rounds", []) if "tracing" in row]

        def rounds_with(key: str, seen: list[dict[str, Any]] = seen) -> str:
            return f"{sum(1 for row in seen if row.get(key))} of {len(seen)} rounds"

        spans = ""
        if interleave.metric(section, contender, "tracing.spans_per_call") is not None:
            dropped = sum(row.get("spans_dropped", 0) for row in seen)
            names = seen[0].get("span_names", "") if seen else ""
            spans = (
                f"; spans per measured call {spread(section, contender, 'tracing.spans_per_call', '{:.2f}')}"
                f" ({names}), dropped by a full queue: {dropped}"
            )
        lines.append(
            f"- {contender}: `opentelemetry` imported in {rounds_with('opentelemetry_loaded')}, "
            f"traces on in {rounds_with('traces_on')}{spans}"
        )
    return lines


def _agent_runs(section: dict[str, Any]) -> str:
    return ", ".join(f"{c} {spread(section, c, 'run_us.p50')}" for c in section.get("contenders", {}))


def _verdict(met: bool, miss: str) -> str:
    return "**met**" if met else f"**missed** ({miss})"


def targets(results: dict[str, Any]) -> list[str]:
    """Each issue-6 target against what this run measured."""
    out = ["| target | measured | verdict |", "|---|---|---|"]

    def add(target: str, measured: str, met: bool | None, miss: str = "") -> None:
        out.append(
            f"| {target} | {measured} | {'not measured in this run' if met is None else _verdict(met, miss)} |"
        )

    calls = results.get("calls")
    if calls and {"ours", "floor"} <= set(calls.get("contenders", {})):
        o = {k: _median(calls, "ours", k) for k in ("seq_us.p50", "tput_calls_s")}
        f = {k: _median(calls, "floor", k) for k in ("seq_us.p50", "tput_calls_s")}
        r = interleave.ratio("calls", calls, "ours", "floor", "seq_us.p50")
        if r is not None and o["seq_us.p50"] and f["seq_us.p50"]:
            add(
                "full call path p50 ≤ 1.5× floor",
                f"{o['seq_us.p50']:.0f} µs vs {f['seq_us.p50']:.0f} µs = {r:.2f}×",
                r <= 1.5,
                f"{r / 1.5:.2f}× the bound; {o['seq_us.p50'] - 1.5 * f['seq_us.p50']:.1f} µs too slow",
            )
        r = interleave.ratio("calls", calls, "ours", "floor", "tput_calls_s")
        if r is not None and o["tput_calls_s"] and f["tput_calls_s"]:
            add(
                "throughput @64 ≥ 0.5× floor",
                f"{o['tput_calls_s']:.0f} vs {f['tput_calls_s']:.0f} calls/s = {r:.3f}×",
                r >= 0.5,
                f"needs {0.5 / r:.1f}× more",
            )
        sdk = _best(calls, "sdk", "tput_calls_s", max)
        r = interleave.ratio("calls", calls, "ours", sdk, "tput_calls_s") if sdk else None
        if r is not None:
            add("(about 10× the SDK's throughput)", f"{r:.2f}× the SDK", r >= 10, f"{r:.2f}× instead of 10×")
    memory = results.get("memory")
    if memory:
        ours = sorted(
            (int(count), kb)
            for count, section in memory.items()
            if (kb := _median(section, "ours", "per_connection_kb")) is not None
        )
        if ours:
            worst = max(kb for _, kb in ours)
            text = ", ".join(f"{kb:.0f} KB at {n}" for n, kb in ours)
            add(
                "≤ 15 KB client memory per supervised connection",
                text,
                worst <= 15,
                f"{worst / 15:.1f}× the bound",
            )
    imp = results.get("import")
    t = _median(imp["section"], "import supervisor", "seconds") if imp else None
    if t is not None:
        add("import supervisor ≤ 0.3 s", f"{t:.3f} s", t <= 0.3, f"{(t - 0.3) * 1000:.0f} ms over")
    kill = results.get("kill", {}).get("ours")
    if kill and "error" not in kill:
        p99 = kill["answer_ms"]["p99"]
        add(
            "in-flight calls answered ≤ 50 ms (p99) after a server's death",
            f"p99 {p99:.2f} ms over {kill['kills']} kills",
            p99 <= 50,
            f"{p99 - 50:.1f} ms over",
        )
    search = results.get("search", {}).get("10000")
    if search:
        p50 = search["query_ms"]["p50"]
        add(
            "tool_search query p50 ≤ 0.5 ms at 10,000 tools",
            f"{p50:.4f} ms",
            p50 <= 0.5,
            f"{(p50 - 0.5) * 1000:.1f} µs over",
        )
        re_ms = search["reindex_ms"]["p50"]
        e2e = results.get("turns", {}).get("list_changed_to_epoch_ms", {}).get("p50")
        extra = f"; end to end list_changed → new epoch {e2e:.1f} ms" if e2e else ""
        add(
            "re-index after one server's change ≤ 10 ms",
            f"index {re_ms:.2f} ms ({search['reindex_tools']} tools){extra}",
            re_ms <= 10,
            f"{re_ms - 10:.1f} ms over",
        )
    turns, scale = results.get("turns", {}), results.get("scale", {})
    begins = [
        (label, v["p50"])
        for label, v in (
            ("1 tool", turns.get("begin_turn_us_1_tool")),
            (f"{turns.get('catalog_tools', '?')} tools", turns.get("begin_turn_us")),
            (f"{scale.get('servers', '?')} servers", scale.get("begin_turn_us")),
        )
        if v
    ]
    if begins:
        worst = max(p for _, p in begins)
        add(
            "begin_turn() ≤ 50 µs regardless of catalog size",
            ", ".join(f"{p:.1f} µs ({label})" for label, p in begins),
            worst <= 50,
            f"{worst:.0f} µs at the largest catalog; grows with the number of servers",
        )
    if scale and "error" not in scale:
        n = scale["servers"]
        rss_mb = scale["rss_kb_steady"] / 1024
        steady = scale["all_steady_s"]
        measured = f"{n} servers: all steady in {steady:.1f} s, supervisor RSS {rss_mb:.1f} MB"
        add(
            "1,000 servers steady ≤ 60 s with RSS ≤ 80 MB",
            measured,
            None if n < 1000 else (steady <= 60 and rss_mb <= 80),
            f"steady {steady:.0f} s, RSS {rss_mb:.0f} MB",
        )
    soak = results.get("soak")
    if soak and "error" not in soak:
        growth, fds = soak["rss_growth_pct"], soak["fd_growth"]
        measured = f"{soak['minutes']:g} min: RSS {growth:+.1f}% after warm-up, fds {fds:+d}"
        met = growth <= 5 and fds <= 0
        add(
            "soak: flat memory (≤ 5% after warm-up), no fd growth",
            measured + (" (the target is 30 min)" if soak["minutes"] < 30 else ""),
            met,
            f"RSS {growth:+.1f}%, fds {fds:+d}",
        )
    return out


def _peers_skipped(result: dict[str, Any]) -> list[str]:
    return [f"- {name} skipped: {why}" for name, why in result.get("skipped", {}).items()]


def _section_env(env: dict[str, Any]) -> list[str]:
    pk = ", ".join(f"{k} {v}" for k, v in env["packages"].items())

    def load(averages: Sequence[float]) -> str:
        return " ".join(f"{x:.2f}" for x in averages)

    compared = [f"- compared: {line}" for line in env.get("compared", [])]
    code = [f"- {who} runs `supervisor` from {where}" for who, where in env.get("code_of", {}).items()]
    return [
        *compared,
        f"- date: {env['date']}; wall time {env.get('wall_s', 0):.0f} s",
        f"- command: `{env['command']}`",
        f"- machine: {env['nproc']} × {env['cpu']}; Python {env['python']}",
        f"- packages: {pk}",
        f"- code: {env['git']}",
        f"- load average (1/5/15 min) at start {load(env['loadavg_start'])}, at end {load(env.get('loadavg_end', (0, 0, 0)))}",
        *code,
    ]


def _q(d: dict[str, float] | None, unit: str = "ms", fmt: str = "{:.2f}") -> str:
    if not d:
        return "-"
    return f"p50 {fmt.format(d['p50'])} / p99 {fmt.format(d['p99'])} {unit}"


def render(results: dict[str, Any]) -> str:
    lines = ["## Environment", *_section_env(results["env"])]
    if "calls" in results:
        lines += ["", "## Calls (echo, one connection; medians of the rounds, min–max in brackets)"]
        lines += calls_table("calls", results["calls"])
        lines.append(
            "SDK = the better of the SDK's two backends for each column (trio and asyncio rows above)."
        )
    if "whatif" in results:
        lines += [
            "",
            "## What-if: ours with the patches of benchmarks/what_if.py (bounds, candidates), same run",
        ]
        lines += calls_table("whatif", results["whatif"], base="ours")
    if "tracing" in results:
        lines += [
            "",
            "## Tracing: ours without the otel extra, with it and no provider, with a BatchSpanProcessor (no-op exporter)",
        ]
        lines += tracing_table(results["tracing"])
    if "aio" in results:
        lines += [
            "",
            "## supervisor.aio: ours from an asyncio host (Trio its guest) against the Trio API, the SDK beside",
        ]
        lines += calls_table("aio", results["aio"], base="ours")
    if "agent" in results:
        lines += [
            "",
            "## A pydantic-ai agent's tool call: its tools in-process (supervisor.adapters) and through `/mcp`",
        ]
        lines += calls_table("agent", results["agent"], base="through /mcp", inflight=16, sdk_columns=False)
        lines.append(
            "seq: what the call adds to a run (the model's tool call to its next request); calls/s: runs "
            "of one call each; client CPU: the agent's process (not `serve`'s); whole runs, seq p50 µs: "
            f"{_agent_runs(results['agent'])}."
        )
    if "http" in results:
        http = results["http"]
        lines += ["", "## Streamable HTTP (echo on the official SDK's own server; medians of the rounds)"]
        if "error" in http:
            lines.append(f"- not measured: {http['error']}")
        else:
            lines += calls_table(
                "http", http["section"], base="sdk 2026-07-28", inflight=http["inflight"], sdk_columns=False
            )
            lines.append(
                f"Server: benchmarks/http_server.py (the SDK's `MCPServer`, uvicorn, SSE answers) at {http['url']}; "
                "SDK client: `streamable_http_client` + `ClientSession` on asyncio. Each client in each era: "
                "2025-11-25 (`initialize`, a session) and 2026-07-28 (`server/discover`, `_meta` per request, "
                "no session): ours by the server's `protocol` setting, the SDK's by `initialize()` / `discover()`; "
                "`ours` and `ours-before` alone: `auto`."
            )
    if "gateway" in results:
        lines += ["", "## Gateway (`serve`'s `/mcp` and its peer, before the same stdio backend; ms)"]
        lines += _peers_skipped(results["gateway"])
        lines.append(fronts_table.table(results["gateway"]["section"], name="gateway"))
        lines += _before_after("gateway", results["gateway"]["section"], fronts_table.COLUMNS)
    if "bridge" in results:
        lines += ["", "## Bridge (`serve`'s `/v1/bridge` and supergateway's WebSocket mode; a round trip)"]
        lines += _peers_skipped(results["bridge"])
        lines += bridge_table("bridge", results["bridge"]["section"])
    if "breakdown" in results and "error" not in results["breakdown"]:
        lines += [
            "",
            "## Call-path steps alone (µs per operation, best of 5 runs); relist steps (µs per relist, mean of 20)",
            "| µs | step |",
            "|---|---|",
        ]
        lines += [f"| {v:.2f} | {k} |" for k, v in results["breakdown"].items()]
    if "memory" in results:
        lines += ["", "## Client RSS per open stdio connection (medians of the rounds, min–max in brackets)"]
        for count, section in results["memory"].items():
            lines += [f"### {count} connections", *table(f"memory@{count}", section, MEMORY_COLUMNS)]
            lines += _before_after(f"memory@{count}", section, MEMORY_COLUMNS)
        for client in (BEFORE, "floor", "ours", "sdk"):
            pts = sorted(
                (int(count), kb * int(count))
                for count, section in results["memory"].items()
                if (kb := _median(section, client, "per_connection_kb")) is not None
            )
            if len(pts) >= 2:
                (n1, d1), (n2, d2) = pts[0], pts[-1]
                lines.append(
                    f"- {client}: marginal {(d2 - d1) / (n2 - n1):.1f} KB per connection between {n1} and {n2}"
                )
    if "import" in results:
        imp = results["import"]
        lines += ["", "## Import time (wall, fresh interpreter, median (min–max))"]
        lines += table("import", imp["section"], [("seconds", "s", "{:.3f}")])
        found = before_after(
            "import",
            imp["section"],
            [("seconds", "s", "{:.3f}")],
            f"import supervisor ({BEFORE})",
            "import supervisor",
        )
        lines += ["", *found] if found else []
        lines.append(
            "- `-X importtime` of `import supervisor`, largest cumulative: "
            + "; ".join(f"{name.strip()} {ms:.0f} ms" for ms, name in imp["importtime_top"][:12])
        )
    if "kill" in results:
        lines += [
            "",
            "## SIGKILL of a server with 4 calls in flight",
            "| client | kills | kill → last in-flight call answered | reconnect to steady (ours) / fresh connect (floor, SDK) | outcomes |",
            "|---|---|---|---|---|",
        ]
        for client, v in results["kill"].items():
            if "error" in v:
                lines.append(f"| {client} | error: {v['error']} | | | |")
                continue
            lines.append(
                f"| {client} | {v['kills']} | {_q(v['answer_ms'])} | {_q(v['reconnect_ms'], fmt='{:.1f}')} | {v['codes']} |"
            )
        if any(client.startswith("ours-http") for client in results["kill"]):
            lines.append(
                "ours-http: a Streamable HTTP server (the SDK's own, `tests/servers/sdk_server.py --http`) "
                "in its own process, not frozen: the calls are running there, each has reported progress on "
                "its answer stream, when SIGKILL comes; `-resumable`: its streams carry event ids, so they "
                "would be resumed. It is started again after each kill (no reconnect time of ours to show). "
                "`-2026-07-28` / `-2025-11-25`: the server's `protocol` pinned to the per-request era (which "
                "`auto` finds with the SDK 2.3 server) / to the handshake era."
            )
    if "search" in results and "error" not in results["search"]:
        lines += [
            "",
            "## tool_search index (search_bench corpus, 50 servers)",
            "| tools | build | query | re-index one server | first query after |",
            "|---|---|---|---|---|",
        ]
        for tools, v in results["search"].items():
            lines.append(
                f"| {tools} | {v['build_ms']:.0f} ms | {_q(v['query_ms'], fmt='{:.3f}')} | "
                f"{_q(v['reindex_ms'])} ({v['reindex_tools']} tools) | {v['first_query_after_ms']:.3f} ms |"
            )
    if "turns" in results and "error" not in results["turns"]:
        t = results["turns"]
        lines += [
            "",
            f"## Turns over a real catalog of {t['catalog_tools']} tools (50 servers, search on: {t['search_enabled']})",
            f"- begin_turn(): {_q(t['begin_turn_us'], 'µs', '{:.1f}')}; "
            f"with a 1-tool catalog {_q(t['begin_turn_us_1_tool'], 'µs', '{:.1f}')}" + _turncache(t),
            f"- turn.search() (BM25 + allow filter + activation): {_q(t['turn_search_ms'], fmt='{:.3f}')}",
            f"- list_changed of a {t['relisted_tools']}-tool server → new epoch visible: {_q(t['list_changed_to_epoch_ms'], fmt='{:.1f}')}",
            f"- first turn (start 50 lazy servers, list, index): {t['first_turn_s']:.2f} s",
        ]
    if "scale" in results:
        s = results["scale"]
        lines += ["", "## Scale"]
        if "error" in s:
            lines.append(f"- error: {s['error']}")
        else:
            lines += [
                f"- {s['servers']} eager servers: first steady {s['first_steady_s']:.2f} s, all steady {s['all_steady_s']:.2f} s",
                f"- supervisor RSS {s['rss_kb_start'] / 1024:.1f} MB at start → {s['rss_kb_steady'] / 1024:.1f} MB steady → "
                f"{s['rss_kb_after_calls'] / 1024:.1f} MB after the calls; fds {s['fds_start']} → {s['fds_steady']} → {s['fds_end']} after stop",
                f"- one call to every server at once: {s['one_call_each_s'] * 1000:.0f} ms; then {s['loop_calls']} calls across all in "
                f"{s['loop_calls'] / s['loop_calls_s']:.1f} s = {s['loop_calls_s']:.0f} calls/s, latency {_q(s['loop_latency_ms'], fmt='{:.1f}')}, failures {s['failures'] or 'none'}",
                f"- begin_turn() with {s['catalog_tools']} tools on {s['servers']} servers: "
                f"{_q(s['begin_turn_us'], 'µs', '{:.1f}')}" + _turncache(s),
                f"- stop (every server torn down): {s['stop_s']:.2f} s; machine memory available {s['mem_available_mb_before']} → {s['mem_available_mb_steady']} MB",
            ]
    if "soak" in results:
        s = results["soak"]
        lines += ["", "## Soak"]
        if "error" in s:
            lines.append(f"- error: {s['error']}")
        else:
            a, b = s["start"], s["end"]
            lines += [
                f"- {s['minutes']:g} min, {s['servers']} servers, {s['inflight']} workers; warm-up {s['warmup_s']:.0f} s",
                f"- after warm-up (t={a['t_s']} s): RSS {a['rss_kb'] / 1024:.1f} MB, fds {a['fds']}, children {a['children']}",
                f"- end (t={b['t_s']} s): RSS {b['rss_kb'] / 1024:.1f} MB ({s['rss_growth_pct']:+.1f}%), fds {b['fds']} ({s['fd_growth']:+d}), "
                f"children {b['children']}; largest RSS {s['rss_max_kb'] / 1024:.1f} MB",
                f"- {s['counts']}; outcomes {s['codes']}; {s['epochs']} catalog epochs; audit rows dropped {b['audit_dropped']}; "
                f"server processes left after stop: {s['leftover_processes']}",
                "- RSS over time (t s: MB): "
                + ", ".join(f"{x['t_s']:.0f}: {x['rss_kb'] / 1024:.1f}" for x in _thin(s["samples"], 25)),
            ]
    if "profile" in results:
        lines += ["", "## Profile of ours"]
        for mode, p in results["profile"].items():
            if "error" in p:
                lines.append(f"- {mode}: {p['error']}")
                continue
            lines.append(
                f"### {'64 in flight' if mode == 'tput' else 'sequential'} ("
                + (
                    "cProfile; % of total time)"
                    if p["tool"] == "cProfile"
                    else f"{p['tool']}, {p.get('samples', '?')} samples; % of samples)"
                )
            )
            lines.append("inclusive: " + "; ".join(f"{pct:.1f}% {name}" for pct, name in p["inclusive"]))
            lines.append("")
            lines.append("self: " + "; ".join(f"{pct:.1f}% {name}" for pct, name in p["self"]))
    verdicts = targets(results)
    if len(verdicts) > 2:  # more than the header: some section with a target ran
        lines += ["", "## Issue 6 targets", *verdicts]
    return "\n".join(lines)


def _thin(samples: list[Row], most: int) -> list[Row]:
    """At most ``most`` samples, evenly spread, the first and the last kept."""
    if len(samples) <= most:
        return samples
    step = (len(samples) - 1) / (most - 1)
    return [samples[round(i * step)] for i in range(most)]


# ------------------------------------------------------------------------ profiles

_LINE = re.compile(r":\d+\)$")


def _short(frame: str) -> str:
    frame = _LINE.sub(")", frame)
    frame = re.sub(r"\(/[^)]*?site-packages/", "(", frame)
    return frame.replace(f"({ROOT}/", "(")


def collapse(raw: str, limit: int = 28) -> dict[str, Any]:
    """Self and inclusive shares from py-spy raw (collapsed) stacks, imports left out."""
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit() or "_find_and_load" in stack:
            continue
        n = int(count)
        total += n
        frames = [
            _short(f)
            for f in stack.split(";")
            if not f.startswith("thread (") and not f.startswith("process ")
        ]
        if not frames:
            continue
        own[frames[-1]] += n
        for frame in set(frames):
            incl[frame] += n

    def keep(frame: str) -> bool:
        return not frame.startswith(("<module>", "main (bench", "run (trio", "unrolled_run"))

    return {
        "samples": total,
        "self": [(100 * n / total, f) for f, n in own.most_common(limit)],
        "inclusive": [(100 * n / total, f) for f, n in incl.most_common(limit * 2) if keep(f)][:limit],
    }


def pstats_top(path: Path, limit: int = 28) -> dict[str, Any]:
    import pstats

    stats = pstats.Stats(str(path))
    rows = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in rows.values()) or 1.0
    by_self = sorted(rows.items(), key=lambda kv: kv[1][2], reverse=True)[:limit]
    by_cum = sorted(rows.items(), key=lambda kv: kv[1][3], reverse=True)[:limit]

    def name(k: tuple[str, int, str]) -> str:
        return f"{k[2]} ({k[0].removeprefix(f'{ROOT}/').split('site-packages/')[-1]})"

    return {
        "samples": "cProfile",
        "self": [(100 * v[2] / total, name(k)) for k, v in by_self],
        "inclusive": [(100 * v[3] / total, name(k)) for k, v in by_cum],
    }
