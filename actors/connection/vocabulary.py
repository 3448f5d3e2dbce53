"""The state machine's words: the states and sub-states, what goes in and what comes out.

``states.py`` holds the rules that join them (every rule about a connection's state
lives there); this module only names things. Events are facts the actor reports;
effects are what the machine tells the actor to do. All are frozen values; the ones
without fields have one shared instance each (``NEEDED`` …), so reporting them
allocates nothing.
"""

from __future__ import annotations

import enum
from typing import TypeAlias

import attrs

# ------------------------------------------------------------------------ names


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


class Phase(enum.Enum):
    """How a connection came into resolve … list (see ``states.py``)."""

    STARTING = "starting"
    RECONNECTING = "reconnecting"
    RELISTING = "relisting"


class Condition(enum.Enum):
    """Why a connection waits in backoff (see ``states.py``)."""

    RETRYING = "retrying"
    NEEDS_AUTH = "needs_auth"
    CRASHED = "crashed"


class Control(enum.Enum):
    """Operator commands."""

    STOP = "stop"
    DISABLE = "disable"
    ENABLE = "enable"
    RESTART = "restart"


class Route(enum.Enum):
    """What a call that arrives now meets."""

    SEND = "send"
    PARK = "park"
    REFUSE = "refuse"


class Availability(enum.Enum):
    """What a turn may expect of a server for its whole length (see ``states.py``)."""

    AVAILABLE = "available"  # serving: calls are sent
    ON_DEMAND = "on_demand"  # idle or starting: a call starts it, or waits for its start
    UNAVAILABLE = "unavailable"  # down or reconnecting: refused for the whole turn


class Why(enum.Enum):
    """Why calls are failed (the actor words the answer)."""

    UNAVAILABLE = "unavailable"  # the server is down or going down
    STOPPED_RESPONDING = "stopped_responding"  # the connection died under the call
    AUTH_FAILED = "auth_failed"  # the server refused our credentials
    CANCELLED = "cancelled"  # the actor itself is going away


# ----------------------------------------------------------------------- events


@attrs.frozen(slots=True)
class Crashed:
    """Start parked: the actor this one replaces crashed past the supervisor's restart
    intensity. The new one waits ``retry_in_s`` in backoff (condition ``crashed``)."""

    reason: str
    retry_in_s: float


@attrs.frozen(slots=True)
class Launched:
    """The actor runs (``crashed``: it replaces one that crashed too often)."""

    now: float
    crashed: Crashed | None = None


@attrs.frozen(slots=True)
class Needed:
    """Someone needs the server's tools (``EnsureStarted``, or a parked call)."""


@attrs.frozen(slots=True)
class Commanded:
    """An operator's command arrived."""

    control: Control


@attrs.frozen(slots=True)
class Resolved:
    """The transport is open."""


@attrs.frozen(slots=True)
class Authenticated:
    """Credentials are ready."""


@attrs.frozen(slots=True)
class Initialized:
    """The era is settled: ``initialize`` answered (and ``notifications/initialized``
    sent), or ``server/discover`` answered with a per-request version we speak."""

    version: str = ""  # the protocol revision spoken from now on


@attrs.frozen(slots=True)
class Listed:
    """Every page of ``tools/list`` was read and published."""

    now: float


@attrs.frozen(slots=True)
class ListChanged:
    """The server sent ``notifications/tools/list_changed``."""


@attrs.frozen(slots=True)
class Failed:
    """The attempt failed. ``auth``: the server refused our credentials (calls end
    ``auth_failed``); ``needs_login``: and retrying will not help. ``draw``: a random
    number in [0, 1), where the retry falls within the schedule's jitter (the actor
    draws it, so the machine stays a pure function; 0.5: no jitter)."""

    reason: str
    now: float
    auth: bool = False
    needs_login: bool = False
    draw: float = 0.5


@attrs.frozen(slots=True)
class CallTimedOut:
    """A call passed its deadline (the server may be hung)."""

    tool: str


@attrs.frozen(slots=True)
class Alive:
    """The server answered the ping that followed a timeout."""


@attrs.frozen(slots=True)
class RetryDue:
    """The lifecycle's sleep until ``Sleep.until`` ended."""

    now: float


@attrs.frozen(slots=True)
class Closing:
    """The attempt's tasks are done; its transport closes next."""


@attrs.frozen(slots=True)
class TornDown:
    """The attempt is over: its tasks are done and its transport is closed."""


Event: TypeAlias = (
    Launched
    | Needed
    | Commanded
    | Resolved
    | Authenticated
    | Initialized
    | Listed
    | ListChanged
    | Failed
    | CallTimedOut
    | Alive
    | RetryDue
    | Closing
    | TornDown
)
NEEDED = Needed()
RESOLVED = Resolved()
AUTHENTICATED = Authenticated()
INITIALIZED = Initialized()
LIST_CHANGED = ListChanged()
ALIVE = Alive()
CLOSING = Closing()
TORN_DOWN = TornDown()

# ---------------------------------------------------------------------- effects


@attrs.frozen(slots=True)
class Announce:
    """Publish a state change, and log it (``states.py`` says which fields show)."""

    state: State
    previous: State
    attempt: int
    reason: str | None
    retry_at: float | None  # set in backoff only
    condition: Condition | None
    phase: Phase | None
    protocol_version: str | None = None  # the revision last negotiated (none before)


@attrs.frozen(slots=True)
class FailCalls:
    """Answer every call in flight and every parked call now."""

    in_flight: Why
    parked: Why


@attrs.frozen(slots=True)
class StartAttempt:
    """Lifecycle order: run one connection attempt, from resolve until it is torn down."""


@attrs.frozen(slots=True)
class Sleep:
    """Lifecycle order: wait until ``until`` (then report ``RetryDue``), or until woken."""

    until: float | None = None


@attrs.frozen(slots=True)
class Finish:
    """Lifecycle order: the actor is stopped; publish what is left and end."""


@attrs.frozen(slots=True)
class CancelAttempt:
    """Cancel the attempt, wherever it is (connecting, serving, listing)."""


@attrs.frozen(slots=True)
class DropConnection:
    """Stop the connection's tasks; its transport is then closed as usual."""


@attrs.frozen(slots=True)
class SendParked:
    """Send every parked call."""


@attrs.frozen(slots=True)
class StartRelist:
    """Read the tool list again, in the background."""


@attrs.frozen(slots=True)
class ListAgain:
    """The list changed while it was read: read it again before going on."""


@attrs.frozen(slots=True)
class CheckAlive:
    """Ping the server; no answer in time is a failure (after ``tool`` timed out)."""

    tool: str


Effect: TypeAlias = (
    Announce
    | FailCalls
    | StartAttempt
    | Sleep
    | Finish
    | CancelAttempt
    | DropConnection
    | SendParked
    | StartRelist
    | ListAgain
    | CheckAlive
)
Effects: TypeAlias = tuple[Effect, ...]
START_ATTEMPT = StartAttempt()
SLEEP = Sleep()
FINISH = Finish()
CANCEL_ATTEMPT = CancelAttempt()
DROP_CONNECTION = DropConnection()
SEND_PARKED = SendParked()
START_RELIST = StartRelist()
LIST_AGAIN = ListAgain()
