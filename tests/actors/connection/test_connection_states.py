"""The connection state machine (``states.py``) and the reconnect schedule: both pure.

The expected table is written out here by hand, from the module docstring of
``states.py``: every pair of a state (with each of its sub-states) and an event has
its outcome below, or raises, and raising changes nothing. A random walk that acts as
the actor would (``test_random_walks_…``) checks what no table can: no sequence of
legal events reaches an undefined pair, and no call outlives the state that held it.
"""

from __future__ import annotations

import ast
import copy
import itertools
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.connection.schedule import ReconnectSchedule, jittered
from actors.connection.states import (
    RULES,
    ConnectionState,
    InvalidTransition,
    Policy,
    initial,
    is_available,
    is_down,
    is_reconnect,
    is_settled,
    log_fields,
    message_fields,
    needs_start,
    step,
)
from actors.connection.vocabulary import (
    Alive,
    Announce,
    Authenticated,
    CallTimedOut,
    CheckAlive,
    Closing,
    Commanded,
    Condition,
    Control,
    Crashed,
    Effect,
    FailCalls,
    Failed,
    Finish,
    Initialized,
    Launched,
    ListAgain,
    ListChanged,
    Listed,
    Needed,
    Phase,
    Resolved,
    RetryDue,
    Route,
    SendParked,
    Sleep,
    StartAttempt,
    StartRelist,
    State,
    TornDown,
    Why,
)
from actors.spec import DEFAULT_RECONNECT_SCHEDULE_S, ServerSpec
from tests.support.paths import REPO

S = State
P = Phase
C = Condition
LIVE_STATES = (S.RESOLVE, S.AUTHENTICATE, S.HANDSHAKE, S.LIST, S.STEADY)
DELAYS = (1.0, 2.0, 5.0)
POLICY = Policy(ReconnectSchedule(DELAYS))


def at(state: State, **data: Any) -> ConnectionState:
    return ConnectionState(POLICY, state, **data)


def live(state: State, phase: Phase | None = None, **data: Any) -> ConnectionState:
    return at(state, phase=phase, attempt_open=True, **data)


def describe(m: ConnectionState) -> str:
    """A short name for where a machine stands: state, sub-state, flags."""
    parts = [m.state.value]
    parts += [x.value for x in (m.phase, m.condition, m.ending) if x is not None]
    parts += [flag for flag, on in (("due", m.relist_due), ("checking", m.checking)) if on]
    if m.attempt_open and m.state in (S.BACKOFF, S.TEARDOWN):
        parts.append("open")
    if not m.attempt_open and m.state in LIVE_STATES:
        parts.append("closed")
    return "/".join(parts)


VARIANTS: dict[str, ConnectionState] = {
    m_name: m
    for m in (
        at(S.IDLE),
        live(S.RESOLVE, P.STARTING),
        live(S.RESOLVE, P.RECONNECTING),
        live(S.AUTHENTICATE, P.STARTING),
        live(S.AUTHENTICATE, P.RECONNECTING),
        live(S.HANDSHAKE, P.STARTING),
        live(S.HANDSHAKE, P.RECONNECTING),
        live(S.LIST, P.STARTING),
        live(S.LIST, P.RECONNECTING),
        live(S.LIST, P.RELISTING, steady_since=0.0),
        live(S.LIST, P.RELISTING, steady_since=0.0, relist_due=True),
        live(S.LIST, P.RELISTING, steady_since=0.0, checking=True),
        live(S.STEADY, steady_since=0.0),
        live(S.STEADY, steady_since=0.0, checking=True),
        at(S.BACKOFF, condition=C.RETRYING, attempt=1, retry_at=10.0, attempt_open=True),
        at(S.BACKOFF, condition=C.RETRYING, attempt=1, retry_at=10.0),
        at(S.BACKOFF, condition=C.NEEDS_AUTH, attempt=1, attempt_open=True),
        at(S.BACKOFF, condition=C.NEEDS_AUTH, attempt=1),
        at(S.BACKOFF, condition=C.CRASHED, attempt=3, retry_at=10.0),
        at(S.TEARDOWN, ending=Control.STOP, attempt_open=True),
        at(S.TEARDOWN, ending=Control.DISABLE, attempt_open=True),
        at(S.TEARDOWN, ending=Control.RESTART, attempt_open=True),
        at(S.DISABLED),
        at(S.STOPPED),
    )
    for m_name in [describe(m)]
}
LIVE = [
    name
    for name in VARIANTS
    if name.split("/")[0] in ("resolve", "authenticate", "handshake", "list", "steady")
]
LATE = [name for name in VARIANTS if name.endswith("/open")]  # backoff or teardown, attempt still open
EVERY = list(VARIANTS)

EVENTS: dict[str, Any] = {
    "launched": Launched(0.0),
    "launched crashed": Launched(0.0, Crashed("it crashed", 60.0)),
    "needed": Needed(),
    "stop": Commanded(Control.STOP),
    "disable": Commanded(Control.DISABLE),
    "enable": Commanded(Control.ENABLE),
    "restart": Commanded(Control.RESTART),
    "resolved": Resolved(),
    "authenticated": Authenticated(),
    "initialized": Initialized(),
    "listed": Listed(100.0),
    "list changed": ListChanged(),
    "failed": Failed("eof", 100.0),
    "failed auth": Failed("401", 100.0, auth=True),
    "failed needs login": Failed("401", 100.0, auth=True, needs_login=True),
    "call timed out": CallTimedOut("echo"),
    "alive": Alive(),
    "retry due": RetryDue(10.0),
    "closing": Closing(),
    "torn down": TornDown(),
}

SAME = "="  # the machine does not change
RAISES = "!"
# Effects by name: A(nnounce), C(ancelAttempt), D(ropConnection), F(ailCalls), P (SendParked),
# R (StartRelist), L (ListAgain), K (CheckAlive), S(tartAttempt), Z (Sleep), X (Finish).
_LETTERS = {
    Announce: "A",
    StartAttempt: "S",
    Sleep: "Z",
    Finish: "X",
    FailCalls: "F",
    SendParked: "P",
    StartRelist: "R",
    ListAgain: "L",
    CheckAlive: "K",
}


def letters(effects: tuple[Effect, ...]) -> str:
    return "".join(_LETTERS.get(type(e), type(e).__name__[0]) for e in effects)


def column(default: str, *groups: tuple[list[str] | str, str]) -> dict[str, str]:
    """One event's outcome for every variant: ``default`` unless a group names it.
    An outcome is ``"<variant after> <effect letters>"``, ``SAME`` (with effects after
    a space, if any) or ``RAISES``."""
    outcomes = dict.fromkeys(EVERY, default)
    for names, outcome in groups:
        for name in [names] if isinstance(names, str) else names:
            assert name in outcomes, name
            outcomes[name] = outcome
    return outcomes


CLOSED_BACKOFF = ["backoff/retrying", "backoff/needs_auth", "backoff/crashed"]
OPEN_BACKOFF = ["backoff/retrying/open", "backoff/needs_auth/open"]

EXPECTED: dict[str, dict[str, str]] = {
    "launched": column(RAISES, ("idle", SAME)),
    "launched crashed": column(RAISES, ("idle", "backoff/crashed AZ")),
    "needed": column(SAME, ("idle", "resolve/starting AS")),
    "stop": column(
        SAME,
        ("idle", "stopped AAX"),
        (LIVE + OPEN_BACKOFF, "teardown/stop/open CFA"),
        (CLOSED_BACKOFF, "stopped AAX"),
        (["teardown/disable/open", "teardown/restart/open"], "teardown/stop/open"),
        ("disabled", "stopped AX"),
    ),
    "disable": column(
        SAME,
        ("idle", "disabled AAZ"),
        (LIVE + OPEN_BACKOFF, "teardown/disable/open CFA"),
        (CLOSED_BACKOFF, "disabled AAZ"),
        ("teardown/restart/open", "teardown/disable/open"),  # a stop is final; the others replace
    ),
    "enable": column(SAME, ("disabled", "idle AZ")),
    "restart": column(
        SAME,
        ("idle", "resolve/reconnecting AS"),
        (LIVE + OPEN_BACKOFF, "teardown/restart/open CFA"),
        (CLOSED_BACKOFF, "resolve/reconnecting AS"),
        ("teardown/disable/open", "teardown/restart/open"),
    ),
    "resolved": column(
        RAISES,
        ("resolve/starting", "authenticate/starting A"),
        ("resolve/reconnecting", "authenticate/reconnecting A"),
        (LATE, SAME),
    ),
    "authenticated": column(
        RAISES,
        ("authenticate/starting", "handshake/starting A"),
        ("authenticate/reconnecting", "handshake/reconnecting A"),
        (LATE, SAME),
    ),
    "initialized": column(
        RAISES,
        ("handshake/starting", "list/starting A"),
        ("handshake/reconnecting", "list/reconnecting A"),
        (LATE, SAME),
    ),
    "listed": column(
        RAISES,
        (["list/starting", "list/reconnecting"], "steady AP"),  # parked calls go out
        ("list/relisting", "steady A"),
        ("list/relisting/due", "list/relisting L"),  # it changed while it was read
        ("list/relisting/checking", "steady/checking A"),
        (LATE, SAME),
    ),
    "list changed": column(
        RAISES,
        (["handshake/starting", "handshake/reconnecting", "list/relisting/due"], SAME),
        ("list/starting", "list/starting/due"),
        ("list/reconnecting", "list/reconnecting/due"),
        ("list/relisting", "list/relisting/due"),
        ("list/relisting/checking", "list/relisting/due/checking"),
        ("steady", "list/relisting AR"),
        ("steady/checking", "list/relisting/checking AR"),
        (LATE, SAME),
    ),
    "failed": column(RAISES, (LIVE, "backoff/retrying/open FDA"), (LATE, SAME)),
    "failed auth": column(RAISES, (LIVE, "backoff/retrying/open FDA"), (LATE, SAME)),
    "failed needs login": column(RAISES, (LIVE, "backoff/needs_auth/open FDA"), (LATE, SAME)),
    "call timed out": column(
        RAISES,
        ("steady", "steady/checking K"),
        ("list/relisting", "list/relisting/checking K"),
        ("list/relisting/due", "list/relisting/due/checking K"),
        (["steady/checking", "list/relisting/checking"], SAME),  # one ping at a time
        (LATE, SAME),
    ),
    "alive": column(
        RAISES,
        ("steady/checking", "steady"),
        ("list/relisting/checking", "list/relisting"),
        (LATE, SAME),
    ),
    "retry due": column(RAISES, (["backoff/retrying", "backoff/crashed"], "resolve/reconnecting AS")),
    "closing": column(RAISES, (LIVE, SAME + " F"), (LATE, SAME)),
    "torn down": column(
        RAISES,
        *((name, f"{name}/closed F") for name in LIVE),  # the actor itself is being cancelled
        ("teardown/stop/open", "stopped AX"),
        ("teardown/disable/open", "disabled AZ"),
        ("teardown/restart/open", "resolve/reconnecting AS"),
        ("backoff/retrying/open", "backoff/retrying Z"),
        ("backoff/needs_auth/open", "backoff/needs_auth Z"),
    ),
}

PAIRS = [(variant, event) for event in EVENTS for variant in EVERY]


# -------------------------------------------------------------------- the table


def test_state_names_are_the_admin_api_contract() -> None:
    assert [s.value for s in State] == [
        *("idle", "resolve", "authenticate", "handshake", "list", "steady"),
        *("backoff", "teardown", "disabled", "stopped"),
    ]
    assert [p.value for p in Phase] == ["starting", "reconnecting", "relisting"]
    assert {message_fields(_announce(c))["condition"] for c in Condition} == {None, "needs_auth", "crashed"}


def _announce(condition: Condition) -> Announce:
    return Announce(S.BACKOFF, S.STEADY, 1, "eof", 5.0, condition, None)


def test_the_expected_table_covers_every_pair() -> None:
    assert set(EXPECTED) == set(EVENTS)
    assert all(set(column) == set(VARIANTS) for column in EXPECTED.values())
    assert {type(e) for e in EVENTS.values()} == {event for _, event in RULES}
    assert {describe(m) for m in VARIANTS.values()} == set(VARIANTS)  # no two alike
    assert {m.state for m in VARIANTS.values()} == set(State)


@pytest.mark.parametrize(("variant", "event"), PAIRS, ids=[f"{v} + {e}" for v, e in PAIRS])
def test_every_pair(variant: str, event: str) -> None:
    machine = VARIANTS[variant]
    before = attrs.asdict(machine, recurse=False)
    expected = EXPECTED[event][variant]
    if expected == RAISES:
        with pytest.raises(InvalidTransition):
            step(machine, EVENTS[event])
        assert attrs.asdict(machine, recurse=False) == before  # raising changes nothing
        return
    after, effects = step(machine, EVENTS[event])
    assert attrs.asdict(machine, recurse=False) == before  # a value: the old one is untouched
    target, _, effect_letters = expected.partition(" ")
    if target == SAME:
        assert after == machine
    else:
        assert describe(after) == target
    assert letters(effects) == effect_letters
    announced = [e for e in effects if isinstance(e, Announce)]
    if announced:
        assert announced[0].previous is machine.state and announced[-1].state is after.state
        assert all(a.state is b.previous for a, b in itertools.pairwise(announced))


def test_a_pair_outside_the_table_names_both() -> None:
    with pytest.raises(InvalidTransition, match=r"no transition from stopped on Resolved"):
        step(at(S.STOPPED), Resolved())
    with pytest.raises(InvalidTransition):
        ConnectionState(POLICY, S.STEADY, phase=P.STARTING)  # a sub-state of another state


def test_invalid_transition_is_a_bug_not_a_peer_error() -> None:
    assert issubclass(InvalidTransition, RuntimeError)


# -------------------------------------------------------------- what calls meet

ROUTES = {
    "idle": Route.PARK,  # the call needs the server: it waits for the start
    **{name: Route.PARK for name in VARIANTS if name.endswith("starting")},
    **{name: Route.REFUSE for name in VARIANTS if "reconnecting" in name},
    **{name: Route.SEND for name in VARIANTS if name.startswith(("steady", "list/relisting"))},
}


@pytest.mark.parametrize("variant", EVERY)
def test_what_a_call_meets(variant: str) -> None:
    assert VARIANTS[variant].call_route is ROUTES.get(variant, Route.REFUSE)


@pytest.mark.parametrize("variant", EVERY)
def test_availability_settled_down_and_start(variant: str) -> None:
    m = VARIANTS[variant]
    assert is_available(m.state, m.phase) is (m.call_route is Route.SEND)
    assert is_down(m.state) is (m.state in (S.BACKOFF, S.TEARDOWN, S.DISABLED, S.STOPPED))
    assert is_settled(m.state, m.phase) is (is_available(m.state, m.phase) or is_down(m.state))
    assert needs_start(m.state) is (m.state is S.IDLE)


def test_a_reconnect_is_leaving_backoff_for_resolve() -> None:
    assert [(a, b) for a, b in itertools.product(State, State) if is_reconnect(a, b)] == [
        (S.BACKOFF, S.RESOLVE)
    ]


# ---------------------------------------------------------- rules with numbers


def walk(machine: ConnectionState, *events: Any) -> tuple[ConnectionState, list[Effect]]:
    effects: list[Effect] = []
    for event in events:
        machine, more = step(machine, event)
        effects += more
    return machine, effects


UP = (Resolved(), Authenticated(), Initialized())


def test_failures_follow_the_schedule_and_a_long_steady_run_resets_it() -> None:
    m, _ = walk(initial(POLICY), Needed(), *UP, Listed(0.0), Failed("eof", 10.0))
    assert (m.attempt, m.retry_at) == (1, 11.0)
    m, effects = walk(m, TornDown())
    assert effects == [Sleep(11.0)]
    m, _ = walk(m, RetryDue(11.0), *UP[:1], Failed("eof", 12.0), TornDown())
    assert (m.attempt, m.retry_at) == (2, 14.0)
    m, _ = walk(m, RetryDue(14.0), Failed("eof", 14.0), TornDown(), RetryDue(19.0), Failed("x", 19.0))
    assert (m.attempt, m.retry_at) == (4, 24.0)  # the last delay repeats
    m, _ = walk(m, TornDown(), RetryDue(24.0), *UP, Listed(24.0), Failed("eof", 84.0))
    assert (m.attempt, m.retry_at) == (1, 85.0)  # 60 s steady: from the start again


def test_a_relist_keeps_the_steady_run() -> None:
    m, _ = walk(initial(POLICY), Needed(), *UP, Listed(0.0), ListChanged(), Listed(50.0))
    m, _ = walk(m, Failed("eof", 70.0))
    assert m.attempt == 1  # steady since 0, not since the relist


def test_needs_login_waits_for_a_restart_which_resets_the_count() -> None:
    m, _ = walk(initial(POLICY), Needed(), Resolved(), Failed("401", 5.0, auth=True, needs_login=True))
    assert (m.condition, m.retry_at) == (C.NEEDS_AUTH, None)
    m, effects = walk(m, TornDown())
    assert effects == [Sleep(None)]
    with pytest.raises(InvalidTransition):
        step(m, RetryDue(1e9))
    m, _ = walk(m, Commanded(Control.RESTART))
    assert (describe(m), m.attempt) == ("resolve/reconnecting", 0)


def test_a_restart_of_a_live_connection_keeps_the_count() -> None:
    m = at(S.STEADY, attempt=3, attempt_open=True, steady_since=0.0)
    m, _ = walk(m, Commanded(Control.RESTART), TornDown())
    assert (describe(m), m.attempt) == ("resolve/reconnecting", 3)


def test_a_crashed_actor_waits_at_the_last_delay_and_keeps_it() -> None:
    m, effects = walk(initial(POLICY), Launched(100.0, Crashed("boom", 5.0)))
    assert (describe(m), m.attempt, m.retry_at) == ("backoff/crashed", 3, 105.0)
    assert [type(e) for e in effects] == [Announce, Sleep] and effects[1] == Sleep(105.0)
    assert effects[0] == Announce(S.BACKOFF, S.IDLE, 3, "boom", 105.0, C.CRASHED, None)
    m, _ = walk(m, RetryDue(105.0), Failed("boom again", 106.0))
    assert (m.condition, m.attempt, m.retry_at) == (C.RETRYING, 4, 111.0)


@pytest.mark.parametrize(
    ("policy", "crashed", "expected"),
    [
        (Policy(POLICY.schedule), None, []),
        (Policy(POLICY.schedule, eager=True), None, [(S.IDLE, S.RESOLVE)]),
        (
            Policy(POLICY.schedule, eager=True, enabled=False),
            None,
            [(S.IDLE, S.TEARDOWN), (S.TEARDOWN, S.DISABLED)],
        ),
        (
            Policy(POLICY.schedule, enabled=False),
            Crashed("boom", 1.0),
            [(S.IDLE, S.BACKOFF), (S.BACKOFF, S.TEARDOWN), (S.TEARDOWN, S.DISABLED)],
        ),
    ],
)
def test_launch(policy: Policy, crashed: Crashed | None, expected: list[tuple[State, State]]) -> None:
    _, effects = step(initial(policy), Launched(0.0, crashed))
    assert [(e.previous, e.state) for e in effects if isinstance(e, Announce)] == expected


def test_enable_starts_an_eager_server() -> None:
    m = ConnectionState(Policy(POLICY.schedule, eager=True), S.DISABLED)
    m, effects = step(m, Commanded(Control.ENABLE))
    assert describe(m) == "resolve/starting"
    assert [type(e) for e in effects] == [Announce, Announce, StartAttempt]


def test_a_session_scope_connection_stops_after_a_failure() -> None:
    policy = Policy(POLICY.schedule, restart=False)
    m, _ = walk(initial(policy), Needed(), Failed("eof", 1.0))
    assert (describe(m), m.retry_at) == ("backoff/retrying/open", None)
    m, effects = walk(m, TornDown())
    assert [type(e) for e in effects] == [Announce, Announce, Finish]
    assert m.state is S.STOPPED
    # needs_auth is not a failure to give up on: it waits, as a shared server does
    m, _ = walk(initial(policy), Needed(), Failed("401", 1.0, auth=True, needs_login=True), TornDown())
    assert describe(m) == "backoff/needs_auth"


def test_calls_fail_with_the_reason_of_the_failure() -> None:
    _, effects = step(VARIANTS["steady"], Failed("401", 1.0, auth=True))
    assert effects[0] == FailCalls(Why.AUTH_FAILED, Why.UNAVAILABLE)
    _, effects = step(VARIANTS["steady"], Failed("eof", 1.0))
    assert effects[0] == FailCalls(Why.STOPPED_RESPONDING, Why.UNAVAILABLE)
    _, effects = step(VARIANTS["steady"], Commanded(Control.STOP))
    assert FailCalls(Why.UNAVAILABLE, Why.UNAVAILABLE) in effects
    _, effects = step(VARIANTS["steady"], Closing())
    assert effects == (FailCalls(Why.CANCELLED, Why.CANCELLED),)


def test_what_a_state_line_shows() -> None:
    backoff = Announce(S.BACKOFF, S.STEADY, 2, "eof", 12.5, C.RETRYING, None)
    assert list(log_fields(backoff, 10.0).items()) == [
        ("state", "backoff"),
        ("prev", "steady"),
        ("attempt", 2),
        ("retry_in_s", 2.5),
        ("reason", "eof"),
    ]
    parked = Announce(S.BACKOFF, S.STEADY, 1, "401", None, C.NEEDS_AUTH, None)
    assert log_fields(parked, 0.0) == {
        "state": "backoff",
        "prev": "steady",
        "attempt": 1,
        "reason": "401",
        "condition": "needs_auth",
    }
    up = Announce(S.RESOLVE, S.BACKOFF, 2, None, None, None, P.RECONNECTING)
    assert log_fields(up, 0.0) == {"state": "resolve", "prev": "backoff"}
    assert message_fields(up)["phase"] is P.RECONNECTING and message_fields(backoff)["condition"] is None


def test_the_rules_know_no_trio_and_do_no_io() -> None:
    allowed = {"__future__", "enum", "collections.abc", "typing", "attrs", "tenacity"}
    allowed |= {"actors.connection.schedule", "actors.connection.vocabulary"}
    for name in ("states.py", "vocabulary.py", "schedule.py"):
        tree = ast.parse((REPO / "actors" / "connection" / name).read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert imported <= allowed, (name, imported - allowed)


# ---------------------------------------------------------- random walks

EXPECTED_EDGES = {
    (S.IDLE, S.RESOLVE),
    (S.RESOLVE, S.AUTHENTICATE),
    (S.AUTHENTICATE, S.HANDSHAKE),
    (S.HANDSHAKE, S.LIST),
    (S.LIST, S.STEADY),
    (S.STEADY, S.LIST),
    *((live, S.BACKOFF) for live in LIVE_STATES),
    (S.BACKOFF, S.RESOLVE),
    (S.IDLE, S.BACKOFF),  # a crashed actor's successor starts parked
    *((s, S.TEARDOWN) for s in (S.IDLE, *LIVE_STATES, S.BACKOFF)),
    (S.TEARDOWN, S.STOPPED),
    (S.TEARDOWN, S.DISABLED),
    (S.TEARDOWN, S.RESOLVE),
    (S.DISABLED, S.IDLE),
    (S.DISABLED, S.STOPPED),
}


class ActorModel:
    """Reports events as the actor can, and when it can: a superset (reports of an
    attempt may still come after its first failure or a command, as they can from the
    actor's other tasks), counting parked and in-flight calls."""

    def __init__(self, policy: Policy) -> None:
        self.m = initial(policy)
        self.now = 0.0
        self.order: Any = None
        self.stage: str | None = None  # None: no attempt runs
        self.ending = False
        self.relisting = self.pinging = self.finished = False
        self.parked = self.in_flight = 0
        self.edges: set[tuple[State, State]] = set()

    def fire(self, event: Any) -> tuple[Effect, ...]:
        before = self.m
        self.m, effects = step(self.m, event)
        for effect in effects:
            if isinstance(effect, Announce):
                assert not self.finished, "nothing happens after stopped"
                self.edges.add((effect.previous, effect.state))
            elif isinstance(effect, FailCalls):
                self.parked = self.in_flight = 0
            elif isinstance(effect, StartAttempt | Sleep | Finish):
                self.order = effect
                self.finished |= isinstance(effect, Finish)
                if isinstance(effect, StartAttempt):
                    self.ending = False  # a new attempt, which a command may end before it begins
            elif isinstance(effect, SendParked):
                self.in_flight, self.parked = self.in_flight + self.parked, 0
            elif isinstance(effect, StartRelist):
                self.relisting = True
            elif isinstance(effect, CheckAlive):
                self.pinging = True
            elif not isinstance(effect, ListAgain):
                self.ending = True  # CancelAttempt, DropConnection
        if isinstance(event, Failed) and before.state in (
            S.RESOLVE,
            S.AUTHENTICATE,
            S.HANDSHAKE,
            S.LIST,
            S.STEADY,
        ):
            assert self.m.state is S.BACKOFF and isinstance(effects[0], FailCalls)
        # No call outlives the state that held it.
        if self.m.call_route is not Route.SEND:
            assert self.in_flight == 0, describe(self.m)
        if self.m.phase is not P.STARTING:
            assert self.parked == 0, describe(self.m)
        assert self.finished is (self.m.state is S.STOPPED)
        return effects

    def act(self, action: Any) -> None:
        self.now += 1.0
        if isinstance(action, Control):
            self.fire(Commanded(action))
        elif action == "call":
            route = self.m.call_route
            if route is Route.SEND:
                self.in_flight += 1
            elif route is Route.PARK:
                self.parked += 1
                self.fire(Needed())
        elif action == "answer" and self.in_flight:
            self.in_flight -= 1
        elif action == "needed":
            self.fire(Needed())
        elif action == "lifecycle" and self.stage is None:
            self._lifecycle()
        elif self.stage is not None:
            self._attempt(action)

    def _lifecycle(self) -> None:
        if isinstance(self.order, StartAttempt):
            self.order, self.stage = None, "connect"
        elif isinstance(self.order, Sleep) and self.order.until is not None:
            self.now = max(self.now, self.order.until)
            self.order = None
            self.fire(RetryDue(self.now))

    def _attempt(self, action: str) -> None:
        stage = self.stage
        if action == "progress":
            if stage == "connect":
                self.fire(Resolved())
                self.stage = "resolved"
            elif stage == "resolved":
                self.fire(Authenticated())
                self.stage = "reading"
            elif stage == "reading":
                self.fire(Initialized())
                self.stage = "listing"
            elif stage == "listing" and ListAgain() not in self.fire(Listed(self.now)):
                self.stage = "steady"
        elif action.startswith("fail"):
            self.fire(Failed("eof", self.now, auth=action != "fail", needs_login=action == "fail login"))
        elif action == "list changed" and stage in ("reading", "listing", "steady"):
            self.fire(ListChanged())
        elif action == "relisted" and self.relisting and ListAgain() not in self.fire(Listed(self.now)):
            self.relisting = False
        elif action == "timeout" and stage == "steady" and self.in_flight:
            self.in_flight -= 1
            self.fire(CallTimedOut("echo"))
        elif action == "pong" and self.pinging:
            self.pinging = False
            self.fire(Alive())
        elif action == "end" and self.ending:
            self.fire(Closing())
            self.fire(TornDown())
            self.stage, self.relisting, self.pinging = None, False, False


# Weighted so that walks get far (an attempt needs a lifecycle turn and four steps up;
# a stop ends a walk): each action's share is how often it is listed.
ACTIONS = st.sampled_from(
    [*Control, *("answer", "needed", "list changed", "relisted", "timeout", "pong")]
    + ["call", "fail", "end"] * 3
    + ["fail auth", "fail login"]
    + ["lifecycle"] * 5
    + ["progress"] * 12
)


@settings(max_examples=400, deadline=None)
@given(
    restart=st.booleans(),
    eager=st.booleans(),
    enabled=st.booleans(),
    crashed=st.booleans(),
    actions=st.lists(ACTIONS, min_size=10, max_size=120),
)
def test_random_walks_reach_no_undefined_pair_and_leave_no_call_behind(
    restart: bool, eager: bool, enabled: bool, crashed: bool, actions: list[Any]
) -> None:
    model = ActorModel(Policy(ReconnectSchedule(DELAYS), restart=restart, eager=eager, enabled=enabled))
    model.fire(Launched(0.0, Crashed("boom", 60.0) if crashed else None))
    for action in actions:
        model.act(action)
    assert model.edges <= EXPECTED_EDGES


ALL_ACTIONS = [
    *Control,
    "call",
    "answer",
    "needed",
    "lifecycle",
    "progress",
    "fail",
    "fail auth",
    "fail login",
]
ALL_ACTIONS += ["list changed", "relisted", "timeout", "pong", "end"]


def _key(model: ActorModel) -> tuple[Any, ...]:
    """Where a model stands, numbers aside (no rule branches on them but the retry's
    time, which the model always meets)."""
    return (
        describe(model.m),
        type(model.order).__name__,
        getattr(model.order, "until", None) is None,
        model.stage,
        model.ending,
        model.relisting,
        model.pinging,
        model.parked > 0,
        model.in_flight > 0,
    )


def test_every_reachable_configuration_takes_every_action() -> None:
    """Breadth first over everything the actor can do, from every kind of start: no
    undefined pair is reached, no call is left behind, and the public states walk
    exactly the documented graph."""
    seen_edges: set[tuple[State, State]] = set()
    seen: set[tuple[Any, ...]] = set()
    for restart, eager, enabled, crashed in itertools.product((True, False), repeat=4):
        start = ActorModel(Policy(ReconnectSchedule(DELAYS), restart=restart, eager=eager, enabled=enabled))
        start.fire(Launched(0.0, Crashed("boom", 60.0) if crashed else None))
        queue = [start]
        while queue:
            model = queue.pop()
            for action in ALL_ACTIONS:
                after = copy.deepcopy(model)
                after.act(action)
                seen_edges |= after.edges
                if _key(after) not in seen:
                    seen.add(_key(after))
                    queue.append(after)
    assert seen_edges == EXPECTED_EDGES
    assert {key[0] for key in seen} >= set(VARIANTS)  # every kind of state of the table, and more


# ------------------------------------------------------------------- the schedule


def test_default_schedule() -> None:
    assert ServerSpec(name="x").reconnect_schedule_s == DEFAULT_RECONNECT_SCHEDULE_S
    schedule = ReconnectSchedule(DEFAULT_RECONNECT_SCHEDULE_S)
    assert [schedule.delay(n) for n in range(1, 10)] == [1, 2, 5, 15, 60, 60, 60, 60, 60]
    assert schedule.delay(10_000) == 60
    assert schedule.reset_after_s == 60


def test_a_failures_draw_places_its_retry_within_the_jitter() -> None:
    """The machine stays pure: the random number comes with the event."""
    policy = Policy(ReconnectSchedule((10.0, 20.0), jitter=0.1))
    up, _ = walk(initial(policy), Needed(), *UP, Listed(0.0))
    retries = [step(up, Failed("eof", 100.0, draw=d))[0].retry_at for d in (0.0, 0.25, 0.5, 0.75, 0.9999)]
    assert retries == pytest.approx([109.0, 109.5, 110.0, 110.5, 111.0], abs=1e-3)
    assert step(up, Failed("eof", 100.0))[0].retry_at == 110.0, "no draw: the schedule's own delay"


@pytest.mark.parametrize("jitter", [0.0, 0.1, 0.5])
def test_jitter_moves_each_delay_by_at_most_its_fraction(jitter: float) -> None:
    schedule = ReconnectSchedule(DEFAULT_RECONNECT_SCHEDULE_S, jitter=jitter)
    for attempt, base in enumerate(DEFAULT_RECONNECT_SCHEDULE_S, 1):
        low, high = schedule.delay(attempt, 0.0), schedule.delay(attempt, 0.999999)
        assert low == pytest.approx(base * (1 - jitter)) and high == pytest.approx(
            base * (1 + jitter), rel=1e-5
        )
        assert schedule.delay(attempt, 0.5) == base
    assert jittered(60.0, 0.1, 0.75) == pytest.approx(63.0)


@pytest.mark.parametrize("jitter", [-0.1, 0.51, 2.0])
def test_a_jitter_outside_0_to_half_is_refused(jitter: float) -> None:
    with pytest.raises(ValueError, match=r"a reconnect jitter is a fraction from 0 to 0\.5"):
        ReconnectSchedule((1.0,), jitter=jitter)


def test_attempts_below_one_count_as_the_first() -> None:
    schedule = ReconnectSchedule((3, 4))
    assert schedule.delay(0) == 3
    assert schedule.delay(-5) == 3


@pytest.mark.parametrize(
    ("delays", "expected"),
    [
        ((0.5, 3), [0.5, 3.0, 3.0, 3.0]),
        ((10,), [10.0, 10.0, 10.0, 10.0]),
        ((0,), [0.0, 0.0, 0.0, 0.0]),
        ((5, 1, 2), [5.0, 1.0, 2.0, 2.0]),  # not forced to grow: the user's list is the schedule
    ],
)
def test_custom_schedules(delays: tuple[float, ...], expected: list[float]) -> None:
    schedule = ReconnectSchedule(delays)
    assert schedule.delays == tuple(float(d) for d in delays)
    assert [schedule.delay(n) for n in range(1, 5)] == expected


def test_next_attempt_counts_on_until_a_long_steady_run() -> None:
    schedule = ReconnectSchedule((1, 2, 5), reset_after_s=30)
    assert schedule.next_attempt(4, None) == 5  # never got steady
    assert schedule.next_attempt(4, 0.0) == 5
    assert schedule.next_attempt(4, 29.999) == 5
    assert schedule.next_attempt(4, 30.0) == 1
    assert schedule.next_attempt(4, 3600.0) == 1


def test_default_reset_after_sixty_seconds_steady() -> None:
    schedule = ReconnectSchedule(DEFAULT_RECONNECT_SCHEDULE_S)
    assert schedule.next_attempt(6, 59.9) == 7
    assert schedule.next_attempt(6, 60.0) == 1
    assert schedule.delay(schedule.next_attempt(6, 60.0)) == 1


@pytest.mark.parametrize("delays", [(), [], (1, -1), (-0.5,)])
def test_invalid_schedules_are_refused(delays: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="non-negative delay"):
        ReconnectSchedule(delays)


@given(
    delays=st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=8),
    attempt=st.integers(min_value=1, max_value=100_000),
)
def test_delay_is_always_a_configured_one(delays: list[float], attempt: int) -> None:
    schedule = ReconnectSchedule(delays)
    assert schedule.delay(attempt) in delays
    assert schedule.delay(attempt) == delays[min(attempt, len(delays)) - 1]


@given(
    first=st.integers(min_value=1, max_value=100_000),
    second=st.integers(min_value=1, max_value=100_000),
)
def test_default_schedule_never_shrinks(first: int, second: int) -> None:
    schedule = ReconnectSchedule(DEFAULT_RECONNECT_SCHEDULE_S)
    low, high = sorted((first, second))
    assert schedule.delay(low) <= schedule.delay(high)
    assert schedule.delay(high) in DEFAULT_RECONNECT_SCHEDULE_S
