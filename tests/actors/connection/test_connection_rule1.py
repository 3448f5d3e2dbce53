"""Rule 1: every rule about a connection's state lives in ``actors/connection/states.py``.

No other module under ``actors/connection/`` may look at a state to decide something:
it may not name a state, a phase or a condition (``State.IDLE`` …), compare anything
with a ``.state``, use the old state sets, or read a sub-state of the machine (its
phase, condition, teardown ending, attempt count, flags). It carries out effects and
reads the machine's decisions (``call_route``), nothing else. The checker runs on
snippets first, so it is known to catch what it is meant to catch.
"""

from __future__ import annotations

import ast

import pytest

from tests.support.paths import REPO

PACKAGE = REPO / "actors" / "connection"
RULES_MODULE = "states.py"

STATE_ENUMS = {"State", "Phase", "Condition"}
STATE_SETS = {"STARTING_STATES", "LIVE_STATES", "DOWN_STATES", "_LIVE", "_STARTING", "_DOWN"}
# Sub-states and rule data of the machine, and the hidden flags the actor once kept.
SUB_STATE_FIELDS = {"phase", "condition", "ending", "attempt_open", "relist_due", "checking"}
SUB_STATE_FIELDS |= {"retry_at", "steady_since", "attempt", "policy"}
OLD_FLAGS = {"accepting_calls", "relist_requested", "relisting", "pinging", "failure", "needs_auth"}
OLD_FLAGS |= {"_starting", "_condition", "_control", "_needed", "_next_retry_at", "_steady_since", "_attempt"}
MACHINE_READS = {"call_route", "state"}  # a decision, and the public state to show


def violations(source: str) -> list[str]:
    """What in ``source`` decides on a connection's state outside the rules module."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id in STATE_ENUMS:
                found.append(f"line {line}: names {node.value.id}.{node.attr}")
            if node.attr in SUB_STATE_FIELDS | OLD_FLAGS and isinstance(node.ctx, ast.Load):
                found.append(f"line {line}: reads .{node.attr}")
            if node.attr in STATE_SETS:
                found.append(f"line {line}: uses {node.attr}")
            machine = node.value
            if (
                isinstance(machine, ast.Attribute)
                and machine.attr == "_machine"
                and node.attr not in MACHINE_READS
            ):
                found.append(f"line {line}: reads the machine's .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in STATE_SETS:
            found.append(f"line {line}: uses {node.id}")
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name in STATE_SETS:
                    found.append(f"line {line}: imports {alias.name}")
        elif isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                if isinstance(operand, ast.Attribute) and operand.attr == "state":
                    found.append(f"line {line}: compares .state")
        elif isinstance(node, ast.Match):
            subject = node.subject
            if isinstance(subject, ast.Attribute) and subject.attr == "state":
                found.append(f"line {line}: matches on .state")
    return found


@pytest.mark.parametrize(
    "snippet",
    [
        "if self.state is State.IDLE: pass",
        "x = self.state in STARTING_STATES",
        "from actors.connection.states import STARTING_STATES",
        "if live is not None and live.accepting_calls: pass",
        "if self._starting or self._control is None: pass",
        "if self._condition == 'needs_auth': pass",
        "if machine.phase is Phase.STARTING: pass",
        "if self._machine.attempt_open: pass",
        "wait = self._machine.retry_at",
        "if m.state == s: pass",
        "match self.state:\n    case _: pass",
        "ok = states.STARTING_STATES",
        "live.relisting = live.relisting or True",
    ],
)
def test_the_checker_catches_a_decision_on_state(snippet: str) -> None:
    assert violations(snippet)


@pytest.mark.parametrize(
    "snippet",
    [
        "route = self._machine.call_route",
        "return self._machine.state",
        "if route is Route.SEND: pass",
        "message = StateChanged(self.name, at=now, **fields)",
        "self._machine, effects = step(self._machine, event)",
        "state: State",
    ],
)
def test_the_checker_lets_the_actor_carry_out_effects(snippet: str) -> None:
    assert violations(snippet) == []


def test_no_module_but_states_py_decides_on_state() -> None:
    modules = sorted(p for p in PACKAGE.glob("*.py") if p.name != RULES_MODULE)
    assert {p.name for p in modules} >= {"actor.py", "live.py", "vocabulary.py", "messages.py"}
    found = {p.name: violations(p.read_text(encoding="utf-8")) for p in modules}
    assert {name: lines for name, lines in found.items() if lines} == {}
