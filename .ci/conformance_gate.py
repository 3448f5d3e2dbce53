"""Run the MCP conformance suite's client scenarios one at a time and gate on a baseline.

``.ci/conformance`` installs each pinned suite (Node 22 + ``@modelcontextprotocol/conformance``)
and calls this once per suite. Every scenario runs alone (``sse-retry`` measures reconnect
timing) as ``node dist/index.js client --scenario NAME --command CLIENT``; its verdict is
the suite's own single-scenario exit status: failed or warning checks, a timeout, or the
client exiting non-zero all fail it.

The baseline is the suite's own expected-failures file (``client:`` and a list of
scenario names, so ``--expected-failures FILE`` reads it too), with a reason on every
entry as a trailing comment. We do not pass it to the suite: with a baseline the suite
judges a scenario by its checks alone, so a client that exited 1 after passing checks,
or timed out, would count as passing. The gate, per scenario:

==============  ===========  =========================================================
suite verdict   in baseline  outcome
==============  ===========  =========================================================
pass            no           pass
fail            yes          ``expected`` (the baseline's reason is printed)
fail            no           ``FAIL``: the run fails, naming the scenario and its log
pass            yes          ``now passes``: a warning to remove the entry; the run
                             does not fail (the work that fixes a scenario lands, then
                             the entry goes, without a red run in between)
==============  ===========  =========================================================

A baseline entry the suite does not list (a typo, a renamed scenario) fails a run of
the whole list. Exit status: 0 gate passed, 1 gate failed, 2 bad baseline or usage.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_ENTRY = re.compile(r"^\s+-\s+(?P<name>[A-Za-z0-9_./:-]+)\s*(?:#\s*(?P<reason>.*?))?\s*$")


class BaselineError(ValueError):
    """A malformed baseline file; the message names the file and line."""


def parse_baseline(text: str, source: str, key: str = "client") -> dict[str, str]:
    """Scenario -> reason, from the suite's expected-failures YAML (a ``client:`` list,
    ``- scenario  # reason`` per line, or ``client: []``; ``server:`` for the server
    scenarios). Only this subset is accepted, so what we read is what the suite would read."""
    entries: dict[str, str] = {}
    seen_key = False
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{source}:{number}"
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if re.fullmatch(rf"{key}:\s*(\[\s*\])?\s*(#.*)?", stripped) and not line[0].isspace():
            if seen_key:
                raise BaselineError(f"{where}: a second '{key}:' key")
            seen_key = True
            continue
        match = _ENTRY.match(line)
        if match is None:
            raise BaselineError(
                f"{where}: expected '  - scenario  # reason' under '{key}:', got {stripped[:60]!r}"
            )
        if not seen_key:
            raise BaselineError(f"{where}: an entry before the '{key}:' key")
        name, reason = match["name"], (match["reason"] or "").strip()
        if not reason:
            raise BaselineError(f"{where}: {name} has no reason (add '  # why it fails')")
        if name in entries:
            raise BaselineError(f"{where}: {name} is listed twice")
        entries[name] = reason
    if not seen_key:
        raise BaselineError(f"{source}: no '{key}:' key (write '{key}: []' for an empty baseline)")
    return entries


@dataclass(frozen=True)
class Outcome:
    """One scenario's verdict from the suite."""

    scenario: str
    passed: bool
    reason: str = ""  # why it failed, one line
    log: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class Row:
    """One line of the gate's table."""

    scenario: str
    result: str  # pass | expected | FAIL | now passes
    note: str
    seconds: float


@dataclass(frozen=True)
class Verdict:
    rows: tuple[Row, ...]
    unexpected: tuple[Outcome, ...]
    now_passing: tuple[str, ...]
    unknown_entries: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.unexpected and not self.unknown_entries


def classify(outcome: Outcome, baseline: Mapping[str, str]) -> Row:
    """One scenario's line: the suite's verdict against the baseline."""
    reason = baseline.get(outcome.scenario)
    if outcome.passed and reason is None:
        return Row(outcome.scenario, "pass", "", outcome.seconds)
    if outcome.passed:
        return Row(outcome.scenario, "now passes", "remove it from the baseline", outcome.seconds)
    if reason is not None:
        return Row(outcome.scenario, "expected", reason, outcome.seconds)
    return Row(outcome.scenario, "FAIL", f"{outcome.reason} (log: {outcome.log})", outcome.seconds)


def judge(outcomes: Sequence[Outcome], baseline: Mapping[str, str], listed: Iterable[str] | None) -> Verdict:
    """Apply the baseline to the suite's verdicts. ``listed`` is every scenario the suite
    lists when the whole list ran (baseline entries outside it are errors), else None."""
    rows = tuple(classify(outcome, baseline) for outcome in outcomes)
    unexpected = tuple(o for o, r in zip(outcomes, rows, strict=True) if r.result == "FAIL")
    now_passing = tuple(r.scenario for r in rows if r.result == "now passes")
    unknown = tuple(sorted(set(baseline) - set(listed))) if listed is not None else ()
    return Verdict(rows, unexpected, now_passing, unknown)


def reason_of(log_text: str, scenario: str, timeout_ms: int) -> str:
    """Why a scenario failed, in one line, from its log: the client's own one-line reason
    (``<scenario>: ...`` on its stderr), else the first failed check's error, else a timeout."""
    lines = log_text.splitlines()
    if "Stderr:" in lines:
        stderr = [line for line in lines[lines.index("Stderr:") + 1 :] if line.strip()]
        ours = [line for line in stderr if line.startswith(f"{scenario}: ")]
        if ours or stderr:
            return (ours or stderr)[-1 if ours else 0][:200]
    for line in lines:
        found = re.match(r"^\s+(?:Error|Warning): (.*)", line)
        if found:
            return found[1][:200]
    if "CLIENT TIMED OUT" in log_text:
        return f"client timed out after {timeout_ms} ms"
    return "see the log"


def run_scenario(
    node: str, suite: str, client: str, scenario: str, timeout_ms: int, results: Path
) -> Outcome:
    """One scenario, alone, its whole output in ``results/<scenario>.log``."""
    log = results / (scenario.replace("/", "_") + ".log")
    started = time.monotonic()
    with log.open("wb") as out:
        command = [node, suite, "client", "--command", client, "--scenario", scenario]
        status = subprocess.run(
            [*command, "--timeout", str(timeout_ms)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        ).returncode
    seconds = time.monotonic() - started
    if status == 0:
        return Outcome(scenario, True, log=str(log), seconds=seconds)
    text = log.read_text(errors="replace")
    return Outcome(scenario, False, reason_of(text, scenario, timeout_ms), str(log), seconds)


def listed_scenarios(node: str, suite: str) -> list[str]:
    """Every client scenario, in the suite's order (``list --client``)."""
    listing = subprocess.run(
        [node, suite, "list", "--client"], capture_output=True, text=True, check=True
    ).stdout
    return re.findall(r"^\s*- (\S+)", listing, flags=re.MULTILINE)


HEADER = f"{'SCENARIO':<45} {'RESULT':<11} {'TIME':>6}  NOTE"


def format_row(row: Row) -> str:
    return f"{row.scenario:<45} {row.result:<11} {row.seconds:5.1f}s  {row.note}".rstrip()


def summary(verdict: Verdict, version: str, baseline_path: str, seconds: float) -> str:
    """The closing lines: the counts, then what to do about each problem."""
    passed = sum(r.result in ("pass", "now passes") for r in verdict.rows)
    expected = sum(r.result == "expected" for r in verdict.rows)
    lines = [
        f"conformance {version}: {passed} of {len(verdict.rows)} client scenarios pass, "
        f"{expected} expected failures (baseline), {len(verdict.unexpected)} unexpected; {seconds:.0f} s"
    ]
    for name in verdict.now_passing:
        lines.append(f"conformance {version}: warning: {name} now passes: remove it from {baseline_path}")
    for name in verdict.unknown_entries:
        lines.append(
            f"conformance {version}: error: {baseline_path} lists {name}, which is not a client "
            "scenario of this suite: remove or rename it"
        )
    for outcome in verdict.unexpected:
        lines.append(
            f"conformance {version}: error: {outcome.scenario} failed and is not in {baseline_path}: "
            f"{outcome.reason} (log: {outcome.log})"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=".ci/conformance_gate.py", description=__doc__.split("\n")[0])
    parser.add_argument("--node", required=True)
    parser.add_argument("--suite", required=True, help="the suite's dist/index.js")
    parser.add_argument("--version", required=True, help="the suite's version, for the report")
    parser.add_argument("--baseline", required=True, help="the expected-failures file")
    parser.add_argument("--client", required=True, help="the command the suite runs (URL appended)")
    parser.add_argument("--results", required=True, help="directory for the per-scenario logs")
    parser.add_argument("--timeout-ms", type=int, default=30000)
    parser.add_argument("scenarios", nargs="*", help="only these (default: every client scenario)")
    args = parser.parse_args(argv)
    try:
        baseline = parse_baseline(Path(args.baseline).read_text(), args.baseline)
    except (OSError, BaselineError) as problem:
        print(f"conformance {args.version}: baseline error: {problem}", file=sys.stderr)
        return 2
    listed = listed_scenarios(args.node, args.suite)
    # Scenarios named on the command line go to every suite; each runs those it has.
    chosen = [s for s in args.scenarios if s in listed]
    absent = [s for s in args.scenarios if s not in listed]
    if absent:
        print(f"conformance {args.version}: not a client scenario here, skipped: {', '.join(absent)}")
    if args.scenarios and not chosen:
        return 0
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    outcomes = []
    print(HEADER, flush=True)
    for scenario in chosen or listed:
        outcome = run_scenario(args.node, args.suite, args.client, scenario, args.timeout_ms, results)
        outcomes.append(outcome)
        print(format_row(classify(outcome, baseline)), flush=True)
    verdict = judge(outcomes, baseline, None if args.scenarios else listed)
    print(summary(verdict, args.version, args.baseline, time.monotonic() - started), flush=True)
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
