"""The connection state machine and the reconnect schedule: both pure, both small.

The expected transition table is written out here by hand, from the diagram in
``states.py``: the test compares the code with the documented machine, not the code
with itself.
"""

from __future__ import annotations

import itertools
from collections import deque

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.connection.schedule import ReconnectSchedule
from actors.connection.spec import DEFAULT_RECONNECT_SCHEDULE_S, ServerSpec
from actors.connection.states import (
    LIVE_STATES,
    TRANSITIONS,
    InvalidTransition,
    State,
    Trigger,
    transition,
)

S = State
T = Trigger

LIVE = (S.RESOLVE, S.AUTHENTICATE, S.HANDSHAKE, S.LIST, S.STEADY)

EXPECTED: dict[tuple[State, Trigger], State] = {
    # the way up
    (S.IDLE, T.NEEDED): S.RESOLVE,
    (S.RESOLVE, T.RESOLVED): S.AUTHENTICATE,
    (S.AUTHENTICATE, T.AUTHENTICATED): S.HANDSHAKE,
    (S.HANDSHAKE, T.INITIALIZED): S.LIST,
    (S.LIST, T.LISTED): S.STEADY,
    (S.STEADY, T.LIST_CHANGED): S.LIST,
    # failure and retry
    (S.RESOLVE, T.FAILED): S.BACKOFF,
    (S.AUTHENTICATE, T.FAILED): S.BACKOFF,
    (S.HANDSHAKE, T.FAILED): S.BACKOFF,
    (S.LIST, T.FAILED): S.BACKOFF,
    (S.STEADY, T.FAILED): S.BACKOFF,
    (S.BACKOFF, T.RETRY): S.RESOLVE,
    # the replacement of an actor that crashed past the restart intensity starts parked
    (S.IDLE, T.CRASHED): S.BACKOFF,
    # restart: live connections are torn down first; nothing to tear down otherwise
    (S.RESOLVE, T.RESTART): S.TEARDOWN,
    (S.AUTHENTICATE, T.RESTART): S.TEARDOWN,
    (S.HANDSHAKE, T.RESTART): S.TEARDOWN,
    (S.LIST, T.RESTART): S.TEARDOWN,
    (S.STEADY, T.RESTART): S.TEARDOWN,
    (S.IDLE, T.RESTART): S.RESOLVE,
    (S.BACKOFF, T.RESTART): S.RESOLVE,
    # stop and disable always pass through teardown
    (S.IDLE, T.STOP): S.TEARDOWN,
    (S.RESOLVE, T.STOP): S.TEARDOWN,
    (S.AUTHENTICATE, T.STOP): S.TEARDOWN,
    (S.HANDSHAKE, T.STOP): S.TEARDOWN,
    (S.LIST, T.STOP): S.TEARDOWN,
    (S.STEADY, T.STOP): S.TEARDOWN,
    (S.BACKOFF, T.STOP): S.TEARDOWN,
    (S.IDLE, T.DISABLE): S.TEARDOWN,
    (S.RESOLVE, T.DISABLE): S.TEARDOWN,
    (S.AUTHENTICATE, T.DISABLE): S.TEARDOWN,
    (S.HANDSHAKE, T.DISABLE): S.TEARDOWN,
    (S.LIST, T.DISABLE): S.TEARDOWN,
    (S.STEADY, T.DISABLE): S.TEARDOWN,
    (S.BACKOFF, T.DISABLE): S.TEARDOWN,
    (S.TEARDOWN, T.TORN_DOWN_STOP): S.STOPPED,
    (S.TEARDOWN, T.TORN_DOWN_DISABLE): S.DISABLED,
    (S.TEARDOWN, T.TORN_DOWN_RESTART): S.RESOLVE,
    # a disabled server
    (S.DISABLED, T.ENABLE): S.IDLE,
    (S.DISABLED, T.STOP): S.STOPPED,
}


def walk(state: State, *triggers: Trigger) -> list[State]:
    path = [state]
    for trigger in triggers:
        path.append(transition(path[-1], trigger))
    return path


# -------------------------------------------------------------------- the table


def test_state_names_are_the_admin_api_contract() -> None:
    assert {s.value for s in State} == {
        "idle",
        "resolve",
        "authenticate",
        "handshake",
        "list",
        "steady",
        "backoff",
        "teardown",
        "disabled",
        "stopped",
    }
    assert len(State) == 10


def test_table_is_the_documented_machine() -> None:
    assert TRANSITIONS == EXPECTED


def test_every_pair_outside_the_table_raises() -> None:
    wrong: list[str] = []
    for state, trigger in itertools.product(State, Trigger):
        if (state, trigger) in EXPECTED:
            if transition(state, trigger) is not EXPECTED[(state, trigger)]:
                wrong.append(f"{state.value} --{trigger.value}--> wrong target")
            continue
        try:
            target = transition(state, trigger)
        except InvalidTransition as exc:
            assert state.value in str(exc) and trigger.value in str(exc)
        else:
            wrong.append(f"{state.value} --{trigger.value}--> {target.value} is not in the machine")
    assert not wrong, "\n".join(wrong)


def test_invalid_transition_is_a_bug_not_a_peer_error() -> None:
    assert issubclass(InvalidTransition, RuntimeError)


def test_live_states() -> None:
    assert set(LIVE) == LIVE_STATES


@pytest.mark.parametrize("state", LIVE)
def test_failure_of_any_live_state_backs_off(state: State) -> None:
    assert transition(state, T.FAILED) is S.BACKOFF


@pytest.mark.parametrize("state", [s for s in State if s not in LIVE])
def test_failure_outside_a_live_state_is_a_bug(state: State) -> None:
    with pytest.raises(InvalidTransition):
        transition(state, T.FAILED)


@pytest.mark.parametrize("state", [S.IDLE, *LIVE, S.BACKOFF])
def test_stop_goes_through_teardown(state: State) -> None:
    assert walk(state, T.STOP, T.TORN_DOWN_STOP) == [state, S.TEARDOWN, S.STOPPED]
    assert walk(state, T.DISABLE, T.TORN_DOWN_DISABLE) == [state, S.TEARDOWN, S.DISABLED]


@pytest.mark.parametrize("state", LIVE)
def test_restart_of_a_live_connection_tears_it_down_first(state: State) -> None:
    assert walk(state, T.RESTART, T.TORN_DOWN_RESTART) == [state, S.TEARDOWN, S.RESOLVE]


def test_happy_path() -> None:
    assert walk(S.IDLE, T.NEEDED, T.RESOLVED, T.AUTHENTICATED, T.INITIALIZED, T.LISTED) == [
        S.IDLE,
        S.RESOLVE,
        S.AUTHENTICATE,
        S.HANDSHAKE,
        S.LIST,
        S.STEADY,
    ]


def test_relist_and_reconnect_cycles() -> None:
    assert walk(S.STEADY, T.LIST_CHANGED, T.LISTED) == [S.STEADY, S.LIST, S.STEADY]
    assert walk(S.STEADY, T.FAILED, T.RETRY, T.RESOLVED) == [S.STEADY, S.BACKOFF, S.RESOLVE, S.AUTHENTICATE]
    assert walk(S.STEADY, T.DISABLE, T.TORN_DOWN_DISABLE, T.ENABLE, T.NEEDED) == [
        S.STEADY,
        S.TEARDOWN,
        S.DISABLED,
        S.IDLE,
        S.RESOLVE,
    ]


def test_every_state_is_reachable_from_idle() -> None:
    seen = {S.IDLE}
    queue = deque([S.IDLE])
    while queue:
        state = queue.popleft()
        for trigger in Trigger:
            try:
                target = transition(state, trigger)
            except InvalidTransition:
                continue
            if target not in seen:
                seen.add(target)
                queue.append(target)
    assert seen == set(State)


def test_stopped_has_no_way_out() -> None:
    for trigger in Trigger:
        with pytest.raises(InvalidTransition):
            transition(S.STOPPED, trigger)


# ------------------------------------------------------------------- the schedule


def test_default_schedule() -> None:
    assert ServerSpec(name="x").reconnect_schedule_s == DEFAULT_RECONNECT_SCHEDULE_S
    schedule = ReconnectSchedule(DEFAULT_RECONNECT_SCHEDULE_S)
    assert [schedule.delay(n) for n in range(1, 10)] == [1, 2, 5, 15, 60, 60, 60, 60, 60]
    assert schedule.delay(10_000) == 60
    assert schedule.reset_after_s == 60


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
