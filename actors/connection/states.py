"""The connection state machine: every rule about a connection's state, and only those.

Rule 1 (as in h11's ``_state.py``): whatever decides what a connection does next,
given where it stands, lives in this file (the whole picture: "The connection state
machine" in ``docs/architecture.md``). The connection actor (``actor.py``) is the
I/O loop that carries out what this machine says; it never looks at a state itself.
Rule 2: this file does no I/O and knows nothing of Trio. ``step(machine, event)`` is a
pure function: the machine is a frozen ``ConnectionState``, the answer is the next
one and the effects the actor must carry out, in order.

The states
----------
A connection actor walks one MCP server through

    idle ─need─► resolve ─► authenticate ─► handshake ─► list ─► steady
                    ▲                                      ▲        │ list_changed
                    │                                      └────────┘
                    └──retry── backoff ◄──failed── (any live state)

``resolve`` finds the command (or parses the URL) and starts the transport;
``authenticate`` readies credentials (none for stdio, headers or OAuth for HTTP);
``handshake`` settles the protocol era (``actors/protocol/era.py``): ``server/discover``
answered with the per-request revision, or else ``initialize`` answered and
``notifications/initialized`` sent (the same states and schedule for both eras; the
revision found is ``protocol_version``, kept until the next handshake settles one);
``list`` reads every page of ``tools/list``; ``steady`` serves calls. Any failure of a
live state (transport closed, crash, timeout, protocol error) goes to ``backoff``; when
the schedule's delay has passed the actor retries from ``resolve``. ``stop``,
``disable`` and ``restart`` pass through ``teardown`` and end in ``stopped``,
``disabled`` or ``resolve``; ``enable`` brings a disabled server back to ``idle``. The
state names are the admin API's contract: they do not change.

Sub-states
----------
Two states hide a choice that changes what happens in them; the machine makes both
explicit, and the admin API shows them as fields of their own:

* ``phase``, in resolve … list. ``starting``: the connection left idle because someone
  needs it; a call that arrives waits for the start (it is parked) and is sent once
  steady. ``reconnecting``: after a failure or a restart; a call is refused at once,
  since the next try may be a minute away. ``relisting``: list after ``list_changed``;
  calls keep flowing on the old list, so the server stays available.
* ``condition``, in backoff. ``retrying``: the next attempt is at ``retry_at`` (the
  admin API shows no condition). ``needs_auth``: the server refused our credentials
  and retrying cannot help; it waits for a restart (``auth login`` sends one).
  ``crashed``: the actor before this one crashed past the supervisor's restart
  intensity; it retries at the schedule's last delay.

Teardown remembers what it ends in (``stopped``, ``disabled``, or ``resolve`` for a
restart); a later command replaces that, except that a stop is final. An actor that
replaces one which crashed past the supervisor's restart intensity starts parked:
``idle ─launched─► backoff`` with the condition ``crashed``.

Events and effects
------------------
Their names are in ``vocabulary.py``. Events say what happened: the mailbox brought
``Needed`` or ``Commanded``; the attempt reports ``Resolved`` … ``Listed``,
``ListChanged``, ``Failed``, ``CallTimedOut``, ``Alive``, then ``Closing`` before its
transport closes and ``TornDown`` after; the lifecycle's sleep ends in ``RetryDue``.
Effects say what to do: ``Announce`` a change, ``FailCalls``, ``CancelAttempt`` or
``DropConnection``, ``SendParked``, ``StartRelist`` or ``ListAgain``, ``CheckAlive``,
and one order for the lifecycle task: ``StartAttempt``, ``Sleep`` (until a retry, or
until woken) or ``Finish``.

Rules others read
-----------------
What a call meets: ``machine.call_route`` is ``send``, ``park`` (the call needs the
server: the actor parks it and reports ``Needed``) or ``refuse``, computed once per
machine, so the call path pays one attribute read. Whether a server is available
(``is_available``: the router), what a turn frozen now may expect of it for its
whole length (``turn_availability``), settled (``is_settled``: a turn stops waiting), down,
or waiting for someone to need it (``needs_start``) is decided here too.

Failing closed
--------------
An event the table does not allow in a state raises ``InvalidTransition`` and changes
nothing (the machine is a frozen value) — a bug in the actor, never a peer's fault.
Events from outside (``Needed``, ``Commanded``) are allowed in every state. An attempt
ends in several tasks at once (a reader that sees the pipe close, a lister waiting for
an answer), so its reports may still arrive after the first failure or a command, in
backoff or teardown while the attempt is open: they are dropped. The same reports
with no attempt open are bugs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

import attrs

from actors.connection.schedule import ReconnectSchedule
from actors.connection.vocabulary import (
    CANCEL_ATTEMPT,
    DROP_CONNECTION,
    FINISH,
    LIST_AGAIN,
    SEND_PARKED,
    SLEEP,
    START_ATTEMPT,
    START_RELIST,
    Alive,
    Announce,
    Authenticated,
    Availability,
    CallTimedOut,
    CheckAlive,
    Closing,
    Commanded,
    Condition,
    Control,
    Crashed,
    Effect,
    Effects,
    Event,
    FailCalls,
    Failed,
    Initialized,
    Launched,
    ListChanged,
    Listed,
    Needed,
    Phase,
    Resolved,
    RetryDue,
    Route,
    Sleep,
    State,
    TornDown,
    Why,
)

# The rules, and the names of the vocabulary that importers know from here.
__all__ = ["RULES", "Condition", "ConnectionState", "Control", "Crashed", "InvalidTransition", "Phase"]
__all__ += ["Policy", "Route", "State", "Why", "initial", "is_available", "is_down", "is_reconnect"]
__all__ += ["is_settled", "log_fields", "message_fields", "needs_start", "public_condition", "step"]
__all__ += ["Availability", "turn_availability"]
__all__ += ["Availability", "turn_availability"]


class InvalidTransition(RuntimeError):
    """The actor reported an event the table does not allow where the machine stands."""


_LIVE = frozenset({State.RESOLVE, State.AUTHENTICATE, State.HANDSHAKE, State.LIST, State.STEADY})
_STARTING = frozenset({State.RESOLVE, State.AUTHENTICATE, State.HANDSHAKE, State.LIST})
_DOWN = frozenset({State.BACKOFF, State.TEARDOWN, State.DISABLED, State.STOPPED})


# --------------------------------------------------------------- rules others read


def is_available(state: State, phase: Phase | None) -> bool:
    """Calls are served: steady, or relisting (calls flow on the old list)."""
    return state is State.STEADY or (state is State.LIST and phase is Phase.RELISTING)


_TURN_AVAILABILITY = {
    Route.SEND: Availability.AVAILABLE,
    Route.PARK: Availability.ON_DEMAND,
    Route.REFUSE: Availability.UNAVAILABLE,
}


def turn_availability(state: State, phase: Phase | None) -> Availability:
    """What a turn begun now may expect of the server until it ends: the route a call
    met when it began. Serving: available. Idle or starting: on demand (a call starts
    it, or waits for the start). Anything else (backoff, reconnecting, teardown,
    disabled, stopped): unavailable for the whole turn, even if it comes back."""
    return _TURN_AVAILABILITY[_route(state, phase)]


def is_down(state: State) -> bool:
    """Not serving and not on the way up."""
    return state in _DOWN


def is_settled(state: State, phase: Phase | None) -> bool:
    """Done starting, either way: serving, or down (a turn stops waiting for it)."""
    return is_available(state, phase) or state in _DOWN


def needs_start(state: State) -> bool:
    """Idle: someone who needs its tools must say so (``EnsureStarted``)."""
    return state is State.IDLE


def is_reconnect(previous: State, state: State) -> bool:
    """One more try after a failure (the admin API counts them)."""
    return previous is State.BACKOFF and state is State.RESOLVE


def _route(state: State, phase: Phase | None) -> Route:
    if is_available(state, phase):
        return Route.SEND
    if state is State.IDLE or phase is Phase.STARTING:
        return Route.PARK
    return Route.REFUSE


# ------------------------------------------------------------------ the machine


@attrs.frozen(slots=True)
class Policy:
    """What the spec says about starting and retrying (fixed for an actor's life)."""

    schedule: ReconnectSchedule = attrs.field(eq=False)
    restart: bool = True  # retry after a failure; False (session scope): stop instead
    eager: bool = False  # start at launch and after enable, without waiting for a need
    enabled: bool = True


@attrs.frozen(slots=True)
class ConnectionState:
    """Where a connection stands: the public state, its sub-state, and what the rules
    need to remember (attempt count, retry time, whether an attempt is still open)."""

    policy: Policy
    state: State = State.IDLE
    phase: Phase | None = None  # resolve … list
    condition: Condition | None = None  # backoff
    ending: Control | None = None  # teardown: stop, disable or restart
    attempt: int = 0  # reconnect attempts since the last long steady run
    retry_at: float | None = None  # backoff: when to try again (none: wait for a command)
    steady_since: float | None = None
    attempt_open: bool = False  # a connection attempt runs (until its TornDown)
    relist_due: bool = False  # list: list_changed arrived during this listing
    checking: bool = False  # a ping is out after a call timed out
    protocol_version: str | None = None  # the revision the last handshake settled on
    call_route: Route = attrs.field(init=False, eq=False)

    def __attrs_post_init__(self) -> None:
        if (self.phase is not None) != (self.state in _STARTING):
            raise InvalidTransition(f"{self.state.value} with phase {self.phase}")
        if (self.condition is not None) != (self.state is State.BACKOFF):
            raise InvalidTransition(f"{self.state.value} with condition {self.condition}")
        if (self.ending is not None) != (self.state is State.TEARDOWN):
            raise InvalidTransition(f"{self.state.value} ending in {self.ending}")
        if self.attempt_open and self.state not in _LIVE | {State.BACKOFF, State.TEARDOWN}:
            raise InvalidTransition(f"an attempt is open in {self.state.value}")
        object.__setattr__(self, "call_route", _route(self.state, self.phase))


# ------------------------------------------------------------- what is announced


def public_condition(condition: Condition | None) -> str | None:
    """The admin API's ``condition``: none while simply retrying."""
    return None if condition is None or condition is Condition.RETRYING else condition.value


def message_fields(change: Announce) -> dict[str, Any]:
    """The fields of the published ``StateChanged`` that the machine knows."""
    return {
        "state": change.state,
        "previous": change.previous,
        "attempt": change.attempt,
        "reason": change.reason,
        "next_retry_at": change.retry_at,
        "condition": public_condition(change.condition),
        "phase": change.phase,
        "protocol_version": change.protocol_version,
    }


def log_fields(change: Announce, now: float) -> dict[str, Any]:
    """The state line's fields: the attempt and the retry only in backoff."""
    fields: dict[str, Any] = {"state": change.state.value, "prev": change.previous.value}
    if change.previous is State.HANDSHAKE and change.protocol_version:  # the era just settled
        fields["protocol"] = change.protocol_version
    if change.state is State.BACKOFF:
        fields["attempt"] = change.attempt
        if change.retry_at is not None:
            fields["retry_in_s"] = round(max(0.0, change.retry_at - now), 3)
    if change.reason:
        fields["reason"] = change.reason
    condition = public_condition(change.condition)
    if condition:
        fields["condition"] = condition
    return fields


# ------------------------------------------------------------------------ rules

_NOTHING: Effects = ()
S = State
Result: TypeAlias = tuple[ConnectionState, Effects]


def _go(
    m: ConnectionState, state: State, reason: str | None = None, **data: Any
) -> tuple[ConnectionState, Announce]:
    """``m`` moved to ``state``; sub-states of other states are cleared."""
    fields: dict[str, Any] = {"phase": None, "condition": None, "ending": None, "relist_due": False}
    if state is not S.BACKOFF:
        fields["retry_at"] = None
    if state not in (S.LIST, S.STEADY):  # a ping outlives a relist, not its connection
        fields["checking"] = False
    fields.update(data)
    new = attrs.evolve(m, state=state, **fields)
    announce = Announce(
        state, m.state, new.attempt, reason, new.retry_at, new.condition, new.phase, new.protocol_version
    )
    return new, announce


def _start_attempt(m: ConnectionState, phase: Phase) -> Result:
    new, announce = _go(m, S.RESOLVE, phase=phase, attempt_open=True)
    return new, (announce, START_ATTEMPT)


def _launched(m: ConnectionState, e: Launched) -> Result:
    effects: list[Effect] = []
    if e.crashed is not None:  # wait at the last delay; a failure after the retry keeps it
        m, announce = _go(
            m,
            S.BACKOFF,
            e.crashed.reason,
            condition=Condition.CRASHED,
            attempt=len(m.policy.schedule.delays),
            retry_at=e.now + e.crashed.retry_in_s,
        )
        effects += (announce, Sleep(m.retry_at))
    if not m.policy.enabled:
        m, more = _commanded(m, Commanded(Control.DISABLE))
        effects += more
    elif e.crashed is None and m.policy.eager:
        m, more = _start_attempt(m, Phase.STARTING)
        effects += more
    return m, tuple(effects)


def _needed(m: ConnectionState, e: Needed) -> Result:
    if m.state is S.IDLE:
        return _start_attempt(m, Phase.STARTING)
    return m, _NOTHING  # on its way already, or down on purpose


def _commanded(m: ConnectionState, e: Commanded) -> Result:
    control, state = e.control, m.state
    if control is Control.ENABLE:
        if state is not S.DISABLED:
            return m, _NOTHING
        m, announce = _go(m, S.IDLE)
        if m.policy.eager:
            m, more = _start_attempt(m, Phase.STARTING)
            return m, (announce, *more)
        return m, (announce, SLEEP)
    if state is S.STOPPED:
        return m, _NOTHING
    if state is S.DISABLED:
        if control is not Control.STOP:
            return m, _NOTHING
        m, announce = _go(m, S.STOPPED)
        return m, (announce, FINISH)
    if state is S.TEARDOWN:
        if m.ending is Control.STOP:  # a stop is final
            return m, _NOTHING
        return attrs.evolve(m, ending=control), _NOTHING
    attempt = 0 if control is Control.RESTART and state is S.BACKOFF else m.attempt
    if m.attempt_open:  # tear the attempt down first; TornDown ends the teardown
        m, announce = _go(m, S.TEARDOWN, ending=control, attempt=attempt)
        return m, (CANCEL_ATTEMPT, FailCalls(Why.UNAVAILABLE, Why.UNAVAILABLE), announce)
    if control is Control.RESTART:  # idle, or backoff: nothing to tear down
        return _start_attempt(attrs.evolve(m, attempt=0, retry_at=None), Phase.RECONNECTING)
    m, announce = _go(m, S.TEARDOWN, ending=control)
    m, more = _end_teardown(m)
    return m, (announce, *more)


def _end_teardown(m: ConnectionState) -> Result:
    if m.ending is Control.STOP:
        m, announce = _go(m, S.STOPPED)
        return m, (announce, FINISH)
    if m.ending is Control.DISABLE:
        m, announce = _go(m, S.DISABLED)
        return m, (announce, SLEEP)
    return _start_attempt(m, Phase.RECONNECTING)


_UP = {S.RESOLVE: S.AUTHENTICATE, S.AUTHENTICATE: S.HANDSHAKE, S.HANDSHAKE: S.LIST}


def _up(m: ConnectionState, e: Resolved | Authenticated | Initialized) -> Result:
    if isinstance(e, Initialized):
        new, announce = _go(m, S.LIST, phase=m.phase, protocol_version=e.version or None)
        return new, (announce,)
    new, announce = _go(m, _UP[m.state], phase=m.phase)
    return new, (announce,)


def _listed(m: ConnectionState, e: Listed) -> Result:
    if m.relist_due:
        return attrs.evolve(m, relist_due=False), (LIST_AGAIN,)
    if m.phase is Phase.RELISTING:
        new, announce = _go(m, S.STEADY)
        return new, (announce,)
    new, announce = _go(m, S.STEADY, steady_since=e.now)
    return new, (announce, SEND_PARKED)


def _list_changed(m: ConnectionState, e: ListChanged) -> Result:
    if m.state is S.STEADY:
        new, announce = _go(m, S.LIST, phase=Phase.RELISTING)
        return new, (announce, START_RELIST)
    if m.state is S.LIST:
        return attrs.evolve(m, relist_due=True), _NOTHING
    return m, _NOTHING  # handshake: the first listing is still to come


def _failed(m: ConnectionState, e: Failed) -> Result:
    steady_for = None if m.steady_since is None else e.now - m.steady_since
    attempt = m.policy.schedule.next_attempt(m.attempt, steady_for)
    if e.needs_login:
        condition, retry_at = Condition.NEEDS_AUTH, None
    elif m.policy.restart:
        condition, retry_at = Condition.RETRYING, e.now + m.policy.schedule.delay(attempt, e.draw)
    else:
        condition, retry_at = Condition.RETRYING, None
    new, announce = _go(
        m, S.BACKOFF, e.reason, condition=condition, attempt=attempt, retry_at=retry_at, steady_since=None
    )
    calls = FailCalls(Why.AUTH_FAILED if e.auth else Why.STOPPED_RESPONDING, Why.UNAVAILABLE)
    return new, (calls, DROP_CONNECTION, announce)


def _call_timed_out(m: ConnectionState, e: CallTimedOut) -> Result:
    if m.call_route is not Route.SEND:
        raise InvalidTransition(f"a call timed out in {m.state.value} ({m.phase}), where none is sent")
    if m.checking:
        return m, _NOTHING
    return attrs.evolve(m, checking=True), (CheckAlive(e.tool),)


def _alive(m: ConnectionState, e: Alive) -> Result:
    if not m.checking:
        raise InvalidTransition(f"a ping answered in {m.state.value} while none was sent")
    return attrs.evolve(m, checking=False), _NOTHING


def _retry_due(m: ConnectionState, e: RetryDue) -> Result:
    if m.attempt_open or m.retry_at is None or e.now < m.retry_at:
        raise InvalidTransition(
            f"retry due at {e.now} in backoff (retry_at {m.retry_at}, attempt open: {m.attempt_open})"
        )
    return _start_attempt(attrs.evolve(m, retry_at=None), Phase.RECONNECTING)


def _closing(m: ConnectionState, e: Closing) -> Result:
    if not m.attempt_open:
        raise InvalidTransition(f"closing in {m.state.value} with no attempt open")
    if m.state in _LIVE:  # no failure and no command ended it: the actor is being cancelled
        return m, (FailCalls(Why.CANCELLED, Why.CANCELLED),)
    return m, _NOTHING  # backoff or teardown: the calls were answered when it began


def _torn_down(m: ConnectionState, e: TornDown) -> Result:
    if not m.attempt_open:
        raise InvalidTransition(f"torn down in {m.state.value} with no attempt open")
    m = attrs.evolve(m, attempt_open=False)
    if m.state is S.TEARDOWN:
        return _end_teardown(m)
    if m.state is S.BACKOFF:
        if m.condition is Condition.RETRYING and not m.policy.restart:  # session scope: never restarted
            m, announce = _go(m, S.TEARDOWN, ending=Control.STOP)
            m, more = _end_teardown(m)
            return m, (announce, *more)
        return m, (Sleep(m.retry_at),)
    # A live attempt ended with no failure and no command: the actor is being cancelled.
    return m, (FailCalls(Why.CANCELLED, Why.CANCELLED),)


def _late(m: ConnectionState, e: Event) -> Result:
    """In backoff or teardown, a report of the attempt being torn down is dropped."""
    if not m.attempt_open:
        raise InvalidTransition(f"no attempt is open in {m.state.value} to report {type(e).__name__}")
    return m, _NOTHING


Rule: TypeAlias = Callable[[ConnectionState, Any], Result]

_REPORTS: dict[type[Event], tuple[Rule, frozenset[State]]] = {
    # event: (rule, the states where it is the attempt's news rather than a late report)
    Resolved: (_up, frozenset({S.RESOLVE})),
    Authenticated: (_up, frozenset({S.AUTHENTICATE})),
    Initialized: (_up, frozenset({S.HANDSHAKE})),
    Listed: (_listed, frozenset({S.LIST})),
    ListChanged: (_list_changed, frozenset({S.HANDSHAKE, S.LIST, S.STEADY})),
    Failed: (_failed, _LIVE),
    CallTimedOut: (_call_timed_out, frozenset({S.LIST, S.STEADY})),
    Alive: (_alive, frozenset({S.LIST, S.STEADY})),
}


def _table() -> dict[tuple[State, type[Event]], Rule]:
    table: dict[tuple[State, type[Event]], Rule] = {(S.IDLE, Launched): _launched}
    for state in State:
        table[(state, Needed)] = _needed
        table[(state, Commanded)] = _commanded
    for event, (rule, states) in _REPORTS.items():
        for state in states:
            table[(state, event)] = rule
        for state in (S.BACKOFF, S.TEARDOWN):
            table[(state, event)] = _late
    table[(S.BACKOFF, RetryDue)] = _retry_due
    for state in _LIVE | {S.BACKOFF, S.TEARDOWN}:
        table[(state, Closing)] = _closing
        table[(state, TornDown)] = _torn_down
    return table


RULES: dict[tuple[State, type[Event]], Rule] = _table()
"""Which rule answers which event in which state; a pair not here is a bug."""


def step(machine: ConnectionState, event: Event) -> Result:
    """The machine after ``event``, and what the actor must do, in order.

    Raises InvalidTransition (and changes nothing: the machine is a frozen value) when
    ``event`` cannot happen where the machine stands.
    """
    rule = RULES.get((machine.state, type(event)))
    if rule is None:
        raise InvalidTransition(f"no transition from {machine.state.value} on {type(event).__name__}")
    return rule(machine, event)


def retuned(
    m: ConnectionState, schedule: ReconnectSchedule, *, eager: bool, enabled: bool
) -> ConnectionState:
    """The same connection under a reloaded spec's policy: where it stands does not
    change; the new schedule and start rule hold from its next transition on."""
    return attrs.evolve(m, policy=attrs.evolve(m.policy, schedule=schedule, eager=eager, enabled=enabled))


def initial(policy: Policy) -> ConnectionState:
    """A new connection: idle, nothing tried yet."""
    return ConnectionState(policy)
