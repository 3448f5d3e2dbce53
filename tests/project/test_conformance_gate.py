"""The conformance gate (.ci/conformance_gate.py): the baseline parser, the verdicts,
and a whole run against a stand-in suite (a small Python script that answers
``list --client`` and ``client --scenario NAME`` as the npm suite does). The real suite
runs from .ci/conformance, never from the tests."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.paths import REPO

ROOT = REPO
AUTH_LATER = "auth for the current spec: a later issue"


def load_gate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("conformance_gate", ROOT / ".ci" / "conformance_gate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["conformance_gate"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


gate = load_gate()


def test_the_baseline_is_the_suites_yaml_with_a_reason_per_entry() -> None:
    text = textwrap.dedent(
        """\
        # a comment
        client:
          # a group
          - auth/dpop  # auth for the current spec: a later issue
          - request-metadata   #   issue 13, in progress
        """
    )
    assert gate.parse_baseline(text, "b.yml") == {
        "auth/dpop": AUTH_LATER,
        "request-metadata": "issue 13, in progress",
    }
    assert gate.parse_baseline("# none\nclient: []\n", "b.yml") == {}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("client:\n  - auth/dpop\n", "b.yml:2: auth/dpop has no reason"),
        ("client:\n  - a  # x\n  - a  # y\n", "b.yml:3: a is listed twice"),
        ("  - a  # x\nclient:\n", "b.yml:1: an entry before the 'client:' key"),
        ("server:\n  - a  # x\n", "b.yml:1: expected '  - scenario  # reason'"),
        ("client:\n  - a: b  # x\n", "b.yml:2: expected"),
        ("client:\nclient: []\n", "b.yml:2: a second 'client:' key"),
        ("# nothing\n", "b.yml: no 'client:' key"),
    ],
)
def test_a_malformed_baseline_names_the_file_and_line(text: str, problem: str) -> None:
    with pytest.raises(gate.BaselineError) as raised:
        gate.parse_baseline(text, "b.yml")
    assert str(raised.value).startswith(problem), str(raised.value)


def test_the_committed_baselines_parse_and_are_empty() -> None:
    """Every client scenario of both suites passes (issue 18 emptied the alpha.12 one)."""
    for version in ("0.1.16", "0.2.0-alpha.12"):
        text = (ROOT / f".ci/conformance-baseline-{version}.yml").read_text()
        assert gate.parse_baseline(text, version) == {}


def outcome(name: str, passed: bool) -> object:
    return gate.Outcome(name, passed, "" if passed else f"{name} broke", f"logs/{name}.log", 1.0)


def test_the_verdicts_against_the_baseline() -> None:
    baseline = {"known-bad": "a later issue", "fixed": "issue 13, in progress"}
    outcomes = [
        outcome("good", True),
        outcome("known-bad", False),
        outcome("new-bad", False),
        outcome("fixed", True),
    ]
    verdict = gate.judge(outcomes, baseline, ["good", "known-bad", "new-bad", "fixed"])
    assert [(r.scenario, r.result) for r in verdict.rows] == [
        ("good", "pass"),
        ("known-bad", "expected"),
        ("new-bad", "FAIL"),
        ("fixed", "now passes"),
    ]
    assert [o.scenario for o in verdict.unexpected] == ["new-bad"]
    assert verdict.now_passing == ("fixed",)
    assert not verdict.ok
    text = gate.summary(verdict, "9.9", "b.yml", 3.0)
    assert (
        "conformance 9.9: 2 of 4 client scenarios pass, 1 expected failures (baseline), 1 unexpected" in text
    )
    assert "warning: fixed now passes: remove it from b.yml" in text
    assert "error: new-bad failed and is not in b.yml: new-bad broke (log: logs/new-bad.log)" in text


def test_a_scenario_that_now_passes_warns_but_does_not_fail() -> None:
    verdict = gate.judge([outcome("fixed", True)], {"fixed": "in progress"}, ["fixed"])
    assert verdict.ok


def test_a_baseline_entry_the_suite_does_not_list_fails_a_whole_run_only() -> None:
    baseline = {"renamed": "why"}
    assert gate.judge([outcome("a", True)], baseline, ["a"]).unknown_entries == ("renamed",)
    assert not gate.judge([outcome("a", True)], baseline, ["a"]).ok
    assert gate.judge([outcome("a", True)], baseline, None).ok  # only some scenarios ran


def test_the_reason_is_the_clients_own_line_else_the_failed_check() -> None:
    log = "Starting\n\nStderr:\nWARNING actors.x noise\ns1: connect failed: refused\n\nChecks:\n"
    assert gate.reason_of(log, "s1", 30000) == "s1: connect failed: refused"
    log = "Checks:\nFailed Checks:\n  - X: y\n    Error: no DPoP proof\n"
    assert gate.reason_of(log, "s1", 30000) == "no DPoP proof"
    assert (
        gate.reason_of("⚠️  CLIENT TIMED OUT - Test incomplete", "s1", 500) == "client timed out after 500 ms"
    )


FAKE_SUITE = """\
import sys
if sys.argv[1] == "list":
    print("Client scenarios (test against a client):")
    for name in ("good", "known-bad", "auth/new-bad"):
        print(f"  - {name} [2026-07-28]")
    sys.exit(0)
scenario = sys.argv[sys.argv.index("--scenario") + 1]
if scenario == "good":
    sys.exit(0)
print("Stderr:")
print(f"{scenario}: it broke")
sys.exit(1)
"""


def run_gate(tmp_path: Path, baseline: str, *scenarios: str) -> int:
    (tmp_path / "suite.py").write_text(FAKE_SUITE)
    (tmp_path / "b.yml").write_text(baseline)
    return int(
        gate.main(
            [
                *("--node", sys.executable, "--suite", str(tmp_path / "suite.py"), "--version", "9.9"),
                *("--baseline", str(tmp_path / "b.yml"), "--client", "client"),
                *("--results", str(tmp_path / "results"), *scenarios),
            ]
        )
    )


def test_a_run_fails_on_a_failure_outside_the_baseline_naming_it_and_its_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_gate(tmp_path, "client:\n  - known-bad  # a later issue\n") == 1
    out = capsys.readouterr().out
    log = tmp_path / "results" / "auth_new-bad.log"
    assert f"error: auth/new-bad failed and is not in {tmp_path / 'b.yml'}: auth/new-bad: it broke" in out
    assert f"(log: {log})" in out
    assert "auth/new-bad: it broke" in log.read_text()


def test_a_run_passes_when_every_failure_is_in_the_baseline(tmp_path: Path) -> None:
    baseline = "client:\n  - known-bad  # a later issue\n  - auth/new-bad  # also later\n"
    assert run_gate(tmp_path, baseline) == 0
    assert run_gate(tmp_path, "client: []\n", "good", "not-here") == 0  # each suite runs what it has


def test_a_malformed_baseline_stops_the_run_with_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_gate(tmp_path, "client:\n  - known-bad\n") == 2
    assert "b.yml:2: known-bad has no reason" in capsys.readouterr().err


def load_server_gate() -> ModuleType:
    sys.path.insert(0, str(ROOT / ".ci"))  # it imports conformance_gate as the script does
    try:
        spec = importlib.util.spec_from_file_location(
            "conformance_server_gate", ROOT / ".ci" / "conformance_server_gate.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / ".ci"))


def test_a_server_baseline_uses_the_server_key() -> None:
    text = "server:\n  - caching  # gateway /mcp not merged yet\n"
    assert gate.parse_baseline(text, "s.yml", "server") == {"caching": "gateway /mcp not merged yet"}
    with pytest.raises(gate.BaselineError, match=r"s\.yml: no 'server:' key"):
        gate.parse_baseline("# only a comment\n", "s.yml", "server")


def test_the_server_gate_reads_the_suites_summary_only() -> None:
    server_gate = load_server_gate()
    log = textwrap.dedent(
        """\
        ✗ ping: 0 passed, 1 failed   (a line of progress before the summary: ignored)

        === SUMMARY ===
        ✓ ping: 1 passed, 0 failed
        ✗ caching: 2 passed, 5 failed
        ✓ tasks-lifecycle: 0 passed, 0 failed
        Total: 3 passed, 5 failed
        """
    )
    outcomes = server_gate.verdicts(log, "x.log")
    assert [(o.scenario, o.passed, o.reason) for o in outcomes] == [
        ("ping", True, ""),
        ("caching", False, "5 of 7 checks failed"),
        ("tasks-lifecycle", True, ""),
    ]
    assert server_gate.verdicts("no summary", "x.log") == []


def test_every_server_baseline_parses_and_has_a_reason_per_entry() -> None:
    baselines = sorted((ROOT / ".ci").glob("conformance-server-baseline-*-gateway*.yml"))
    # 0.1.16 all; 0.2.0-alpha.12 at 2025-11-25 and at 2026-07-28: each through a backend of
    # its own era (every scenario passes) and of the other (-backend-<era>).
    assert len(baselines) == 6
    for path in baselines:
        entries = gate.parse_baseline(path.read_text(), str(path), "server")
        assert all(entries.values())
        if path.name.endswith("-gateway.yml"):
            assert entries == {}, path.name
