"""Run the conformance suite's SERVER scenarios against one URL and gate on a baseline.

``.ci/conformance`` calls this once per suite, selection and target: the suite runs
``node dist/index.js server --url URL <selection>`` (``--suite all`` on 0.1.16,
``--requirements <revision>`` on 0.2.0-alpha.12) in one go, its whole output in
``<results>/<label>.log``, and we read each scenario's verdict from the suite's
summary (``✓ name: N passed, 0 failed`` / ``✗ name: …``). Server scenarios are quick
and independent, so one run per selection keeps the whole script within minutes.

- Extension scenarios (``[extension]`` in ``list --server``) are reported, never gated.
- The baseline (``server:`` and ``- scenario  # reason`` lines, the suite's own
  expected-failures format, parsed by ``conformance_gate.parse_baseline``) is judged as
  for the client scenarios: a failure outside it fails the run, a listed scenario that
  passes is a warning to remove it, an entry the run did not score is an error.
- No ``--baseline``: nothing may fail (the fixture run: the fixture must be honest).
- No summary at all (the target was not reachable, the suite crashed): the run fails.

Exit status: 0 gate passed, 1 gate failed, 2 bad baseline or usage.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from conformance_gate import HEADER, BaselineError, Outcome, format_row, judge, parse_baseline

_VERDICT = re.compile(
    r"^(?P<mark>[✓✗]) (?P<name>\S+): (?P<passed>\d+) passed, (?P<failed>\d+) failed", re.MULTILINE
)


def extensions(node: str, suite: str) -> set[str]:
    """Server scenarios the suite tags ``[extension]``: reported, not gated."""
    listing = subprocess.run(
        [node, suite, "list", "--server"], capture_output=True, text=True, check=True
    ).stdout
    return set(re.findall(r"^\s*- (\S+) \[extension\]", listing, flags=re.MULTILINE))


def verdicts(log_text: str, log: str) -> list[Outcome]:
    """Each scenario's verdict from the suite's summary (after ``=== SUMMARY ===``)."""
    summary = log_text.split("=== SUMMARY ===", 1)[-1] if "=== SUMMARY ===" in log_text else ""
    outcomes = []
    for found in _VERDICT.finditer(summary):
        passed = found["mark"] == "✓" and found["failed"] == "0"
        reason = (
            ""
            if passed
            else f"{found['failed']} of {int(found['passed']) + int(found['failed'])} checks failed"
        )
        outcomes.append(Outcome(found["name"], passed, reason, log))
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=".ci/conformance_server_gate.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--node", required=True)
    parser.add_argument("--suite", required=True, help="the suite's dist/index.js")
    parser.add_argument("--label", required=True, help="names this run in the report and its log")
    parser.add_argument("--url", required=True, help="the MCP endpoint under test")
    parser.add_argument("--baseline", help="the expected-failures file (none: nothing may fail)")
    parser.add_argument("--results", required=True, help="directory for the run's log")
    parser.add_argument(
        "selection", nargs=argparse.REMAINDER, help="passed to `server` (--suite all, --requirements R)"
    )
    args = parser.parse_args(argv)
    selection = args.selection[1:] if args.selection[:1] == ["--"] else args.selection
    try:
        baseline = (
            parse_baseline(Path(args.baseline).read_text(), args.baseline, "server") if args.baseline else {}
        )
    except (OSError, BaselineError) as problem:
        print(f"conformance {args.label}: baseline error: {problem}", file=sys.stderr)
        return 2
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    log = results / (re.sub(r"[^A-Za-z0-9_.-]+", "_", args.label) + ".log")
    started = time.monotonic()
    with log.open("wb") as out:
        subprocess.run(
            [args.node, args.suite, "server", "--url", args.url, *selection],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    seconds = time.monotonic() - started
    outcomes = verdicts(log.read_text(errors="replace"), str(log))
    if not outcomes:
        print(
            f"conformance {args.label}: error: the suite reported no scenario (log: {log})", file=sys.stderr
        )
        return 1
    reported = extensions(args.node, args.suite)
    gated = [o for o in outcomes if o.scenario not in reported]
    verdict = judge(gated, baseline, [o.scenario for o in outcomes])
    print(HEADER)
    for row in verdict.rows:
        print(format_row(row))
    for outcome in outcomes:
        if outcome.scenario in reported:
            note = "passes" if outcome.passed else outcome.reason
            print(f"{outcome.scenario:<45} {'extension':<11} {'-':>6}  {note} (not gated)")
    passed = sum(r.result in ("pass", "now passes") for r in verdict.rows)
    expected = sum(r.result == "expected" for r in verdict.rows)
    where = args.baseline or "no baseline: every scenario must pass"
    print(
        f"conformance {args.label}: {passed} of {len(verdict.rows)} server scenarios pass, "
        f"{expected} expected failures ({where}), {len(verdict.unexpected)} unexpected, "
        f"{len(outcomes) - len(gated)} extensions reported; {seconds:.0f} s"
    )
    for name in verdict.now_passing:
        print(f"conformance {args.label}: warning: {name} now passes: remove it from {args.baseline}")
    for name in verdict.unknown_entries:
        print(f"conformance {args.label}: error: {args.baseline} lists {name}, which this run did not score")
    for outcome in verdict.unexpected:
        print(
            f"conformance {args.label}: error: {outcome.scenario} failed and is not in the baseline: "
            f"{outcome.reason} (log: {outcome.log})"
        )
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
