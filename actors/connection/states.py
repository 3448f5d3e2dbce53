"""The connection state machine: one enum, one transition table, nothing else.

A connection actor walks one MCP server through

    idle ─need─► resolve ─► authenticate ─► handshake ─► list ─► steady
                    ▲                                      ▲        │ list_changed
                    │                                      └────────┘
                    └──retry── backoff ◄──failed── (any live state)

``resolve`` finds the command (or parses the URL) and starts the transport;
``authenticate`` readies credentials (none for stdio, headers or OAuth for HTTP);
``handshake`` is ``initialize`` answered and ``notifications/initialized`` sent;
``list`` reads every page of ``tools/list``; ``steady`` serves calls. A relist after
``notifications/tools/list_changed`` goes back through ``list`` while calls keep
flowing on the old list. Any failure of a live state (transport closed, crash,
timeout, protocol error) goes to ``backoff``; when the schedule's delay has passed the
actor retries from ``resolve``.

An actor that replaces one which crashed past the supervisor's restart intensity
starts *parked*: ``idle ─crashed─► backoff``, with the condition ``crashed`` and a
retry at the schedule's last delay.

``stop``, ``disable`` and ``restart`` pass through ``teardown`` (the process is being
shut down) and end in ``stopped``, ``disabled`` or ``resolve``. ``enable`` brings a
disabled server back to ``idle``.

Every state change of the actor goes through ``transition``; a pair that is not in
the table raises ``InvalidTransition`` — a bug in the actor, never a peer's fault.
The admin API shows the state names exactly as the enum values below.
"""

from __future__ import annotations

import enum


class State(enum.Enum):
    """Where a connection stands (names are part of the admin API contract)."""

    IDLE = "idle"
    RESOLVE = "resolve"
    AUTHENTICATE = "authenticate"
    HANDSHAKE = "handshake"
    LIST = "list"
    STEADY = "steady"
    BACKOFF = "backoff"
    TEARDOWN = "teardown"
    DISABLED = "disabled"
    STOPPED = "stopped"


class Trigger(enum.Enum):
    """What happened."""

    NEEDED = "needed"
    RESOLVED = "resolved"
    AUTHENTICATED = "authenticated"
    INITIALIZED = "initialized"
    LISTED = "listed"
    LIST_CHANGED = "list_changed"
    FAILED = "failed"
    RETRY = "retry"
    STOP = "stop"
    DISABLE = "disable"
    RESTART = "restart"
    TORN_DOWN_STOP = "torn_down_stop"
    TORN_DOWN_DISABLE = "torn_down_disable"
    TORN_DOWN_RESTART = "torn_down_restart"
    ENABLE = "enable"
    CRASHED = "crashed"


LIVE_STATES = frozenset({State.RESOLVE, State.AUTHENTICATE, State.HANDSHAKE, State.LIST, State.STEADY})
STARTING_STATES = frozenset({State.RESOLVE, State.AUTHENTICATE, State.HANDSHAKE, State.LIST})
DOWN_STATES = frozenset({State.BACKOFF, State.TEARDOWN, State.DISABLED, State.STOPPED})


def _table() -> dict[tuple[State, Trigger], State]:
    table = {
        (State.IDLE, Trigger.NEEDED): State.RESOLVE,
        (State.RESOLVE, Trigger.RESOLVED): State.AUTHENTICATE,
        (State.AUTHENTICATE, Trigger.AUTHENTICATED): State.HANDSHAKE,
        (State.HANDSHAKE, Trigger.INITIALIZED): State.LIST,
        (State.LIST, Trigger.LISTED): State.STEADY,
        (State.STEADY, Trigger.LIST_CHANGED): State.LIST,
        (State.BACKOFF, Trigger.RETRY): State.RESOLVE,
        (State.BACKOFF, Trigger.RESTART): State.RESOLVE,
        (State.IDLE, Trigger.RESTART): State.RESOLVE,
        (State.TEARDOWN, Trigger.TORN_DOWN_STOP): State.STOPPED,
        (State.TEARDOWN, Trigger.TORN_DOWN_DISABLE): State.DISABLED,
        (State.TEARDOWN, Trigger.TORN_DOWN_RESTART): State.RESOLVE,
        (State.DISABLED, Trigger.ENABLE): State.IDLE,
        (State.DISABLED, Trigger.STOP): State.STOPPED,
        (State.IDLE, Trigger.CRASHED): State.BACKOFF,
    }
    for state in LIVE_STATES:
        table[(state, Trigger.FAILED)] = State.BACKOFF
        table[(state, Trigger.RESTART)] = State.TEARDOWN
    for state in LIVE_STATES | {State.IDLE, State.BACKOFF}:
        table[(state, Trigger.STOP)] = State.TEARDOWN
        table[(state, Trigger.DISABLE)] = State.TEARDOWN
    return table


TRANSITIONS: dict[tuple[State, Trigger], State] = _table()


class InvalidTransition(RuntimeError):
    """The actor tried a transition the table does not have."""


def transition(state: State, trigger: Trigger) -> State:
    """The next state, or InvalidTransition (fail closed, like h2)."""
    try:
        return TRANSITIONS[(state, trigger)]
    except KeyError:
        raise InvalidTransition(f"no transition from {state.value} on {trigger.value}") from None
