"""What-if patches for ``bench_calls.py --client ours --what-if NAME[,NAME]``.

Each patch is a candidate optimization of our call path, applied by monkeypatching
inside the benchmark process only (the project's code is not touched), so its gain
can be measured in the same run as the unpatched path before anyone implements it:

* ``linger``: the store actor waits ``LINGER_S`` after the first queued message
  before writing, so sequential calls share one SQLite transaction (and one thread
  hop) instead of paying one each (supervisor/store/actor.py, ``StoreActor.run``).
* ``policy``: no rules → the default decision without computing the call's subject
  (``actors.router.trust.decide`` encodes the arguments as sorted JSON for
  ``subject_of`` even when no rule will read it), and the audit hash from orjson
  (``OPT_SORT_KEYS``) instead of the standard library's json (supervisor/store/records.py,
  ``hash_arguments``), falling back to the original for what orjson refuses.
* ``validate``: a plain-Python check compiled once per schema for the common shape
  (``type: object``, ``properties`` with a primitive ``type`` each, ``required``,
  ``additionalProperties`` true/false); jsonschema only runs when that check fails
  (to write the message) or the schema has any other keyword
  (actors/router/validation.py, ``validate_arguments``).
* ``drain``: the connection actor takes every message already queued in its mailbox
  before yielding (``receive_nowait`` after each ``receive``, as the router's
  ``_fold`` does), so calls that arrive together leave in one write
  (actors/connection/actor.py, ``ConnectionActor.run``). Without it, at 64 in flight
  each call tends to get a pipe write of its own: the actor handles one message per
  scheduling round, and the writer runs in between.
* ``nowait``: ``Turn._call`` hands the call to the actor's mailbox with
  ``send_nowait`` (``await send`` only when the mailbox is full), instead of
  ``await mailbox.send``, which always yields once more (supervisor/turns.py,
  ``_dispatch``).
* ``direct``: while the connection is live and accepting calls, ``_dispatch`` calls
  the actor's synchronous ``_dispatch`` from the caller's task (one Trio thread,
  nothing awaited in between, so no race), skipping the hop through the actor's
  task; otherwise the mailbox as before. A structural change, measured to size it.
* ``turncache`` (begin_turn, not the call path): ``Session.begin_turn`` walks every
  configured server twice per turn (session-scoped specs, then the servers still
  starting); here the session-scoped specs are found once and the unsettled servers
  once per catalog epoch (catalogs are immutable, so caching by identity is safe),
  making a turn over a settled catalog O(1) (supervisor/sessions.py).
* ``reply``: a one-shot reply slot (an Event and a value) instead of a size-1 memory
  channel per call (``trio.open_memory_channel[CallOutcome](1)`` in
  supervisor/turns.py ``Turn._call``): trio's memory channels cost ~5 µs to make.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson
import trio

LINGER_S = 0.005
NAMES = ("linger", "policy", "validate", "drain", "nowait", "direct", "reply")


class _LingeringReceive:
    """Wraps the store actor's receive end: the first message of a batch waits a little."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def receive(self) -> Any:
        message = await self._inner.receive()
        await trio.sleep(LINGER_S)
        return message

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _linger(sup: Any) -> None:
    sup.store._receive = _LingeringReceive(sup.store._receive)


def _policy(sup: Any) -> None:
    import supervisor.policy as policy_module
    import supervisor.turns as turns_module
    from actors.router import trust
    from supervisor.store import records

    original_decide = policy_module.decide

    def decide(
        server: str, tool: str, arguments: Mapping[str, Any], *, trusted: bool, risk: Any, rules: Any
    ) -> Any:
        if not rules:
            return trust.Decision(
                trust.default_action(trusted, risk), trust._default_reason(trusted, risk), None
            )
        return original_decide(server, tool, arguments, trusted=trusted, risk=risk, rules=rules)

    original_hash = records.hash_arguments
    import hashlib

    def hash_arguments(arguments: Mapping[str, Any]) -> tuple[str, int]:
        try:
            data = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            return original_hash(arguments)
        return hashlib.sha256(data).hexdigest(), len(data)

    policy_module.decide = decide  # type: ignore[assignment]
    turns_module.hash_arguments = hash_arguments  # type: ignore[assignment]


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}
_ANNOTATIONS = {"description", "title", "$schema", "default", "examples"}
_MISSING = object()


def compile_plain(schema: Any) -> Callable[[dict[str, Any]], bool] | None:
    """A predicate equivalent to the schema for the plain shape, else None."""
    if not isinstance(schema, dict) or set(schema) - _ANNOTATIONS - {
        "type",
        "properties",
        "required",
        "additionalProperties",
    }:
        return None
    if schema.get("type", "object") != "object":
        return None
    checks: dict[str, Callable[[Any], bool] | None] = {}
    for key, sub in (schema.get("properties") or {}).items():
        if not isinstance(sub, dict) or set(sub) - _ANNOTATIONS - {"type"}:
            return None
        kind = sub.get("type")
        if kind is None:
            checks[key] = None
        elif isinstance(kind, str) and kind in _TYPE_CHECKS:
            checks[key] = _TYPE_CHECKS[kind]
        else:
            return None
    required = schema.get("required", [])
    additional = schema.get("additionalProperties", True)
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return None
    if additional is not True and additional is not False:
        return None
    required_keys = tuple(required)
    closed = additional is False

    def check(arguments: dict[str, Any]) -> bool:
        for key in required_keys:
            if key not in arguments:
                return False
        for key, value in arguments.items():
            test = checks.get(key, _MISSING)
            if test is _MISSING:
                if closed:
                    return False
            elif test is not None and not test(value):  # type: ignore[operator]
                return False
        return True

    return check


def _validate(sup: Any) -> None:
    import supervisor.turns as turns_module

    original = turns_module.validate_arguments
    compiled: dict[Any, Callable[[dict[str, Any]], bool] | None] = {}

    def validate_arguments(tool_id: str, check: Any, arguments: Any) -> str | None:
        try:
            plain = compiled[check]
        except KeyError:
            plain = compiled[check] = (
                compile_plain(check.validator.schema) if check.validator is not None else None
            )
        if plain is not None and type(arguments) is dict and plain(arguments):
            return None
        return original(tool_id, check, arguments)

    turns_module.validate_arguments = validate_arguments  # type: ignore[assignment]


class _Reply:
    """A one-shot reply: what ``answer()`` and ``_dispatch`` use of a memory channel."""

    __slots__ = ("_closed", "_event", "_value")

    def __init__(self) -> None:
        self._event = trio.Event()
        self._value: Any = None
        self._closed = False

    def send_nowait(self, value: Any) -> None:
        if self._closed:
            raise trio.BrokenResourceError
        if self._event.is_set():
            raise trio.WouldBlock
        self._value = value
        self._event.set()

    async def receive(self) -> Any:
        await self._event.wait()
        return self._value

    def close(self) -> None:
        self._closed = True


class _ReplyChannels:
    """Stands in for ``trio.open_memory_channel[T]``: ``(1)`` makes a one-shot pair."""

    def __call__(self, size: int) -> tuple[_Reply, _Reply]:
        reply = _Reply()
        return reply, reply


class _Subscriptable:
    """``open_memory_channel[T]`` → the one-shot pair maker, whatever ``T``."""

    def __init__(self) -> None:
        self._channels = _ReplyChannels()

    def __getitem__(self, item: Any) -> _ReplyChannels:
        return self._channels


class _TrioWithReplies:
    """``trio`` as supervisor/turns.py sees it, with light reply channels."""

    open_memory_channel = _Subscriptable()

    def __getattr__(self, name: str) -> Any:
        return getattr(trio, name)


def _reply(sup: Any) -> None:
    import supervisor.turns as turns_module

    turns_module.trio = _TrioWithReplies()  # type: ignore[assignment]


def _drain() -> None:
    from actors.connection.actor import ConnectionActor
    from actors.connection.messages import CallFailed

    async def run(self: Any, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._lifecycle, nursery.cancel_scope)
                task_status.started()
                receive_nowait = self._mailbox.receive_nowait
                async for message in self._mailbox:
                    self._dispatch(message)
                    while True:
                        try:
                            message = receive_nowait()
                        except (trio.WouldBlock, trio.EndOfChannel):
                            break
                        self._dispatch(message)
        finally:
            self._answer_everyone(CallFailed("unavailable", self.unavailable))
            if self._stopped:
                self._close_mailbox()

    ConnectionActor.run = run  # type: ignore[method-assign]


async def _dispatch_nowait(view: Any, call: Any, answers: Any) -> Any:
    from actors.connection.messages import CallFailed, CancelCall
    from actors.mailbox import try_send

    mailbox = view.mailbox
    try:
        try:
            mailbox.send_nowait(call)
        except trio.WouldBlock:
            await mailbox.send(call)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return CallFailed("unavailable", f"mcp server {view.name} is unavailable")
    try:
        return await answers.receive()
    except trio.Cancelled:
        try_send(mailbox, CancelCall(call.reply))
        raise


def _nowait() -> None:
    import supervisor.turns as turns_module

    turns_module._dispatch = _dispatch_nowait  # type: ignore[assignment]


_ACTORS: dict[int, Any] = {}  # id of a mailbox's shared state -> the newest actor reading it


def _direct() -> None:
    import supervisor.turns as turns_module
    from actors.connection.actor import ConnectionActor

    original_init = ConnectionActor.__init__

    def __init__(self: Any, spec: Any, connector: Any, mailbox: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, spec, connector, mailbox, *args, **kwargs)
        _ACTORS[id(mailbox._state)] = self

    async def dispatch(view: Any, call: Any, answers: Any) -> Any:
        actor = _ACTORS.get(id(view.mailbox._state))
        live = actor._live if actor is not None else None
        if live is not None and live.accepting_calls:
            actor._dispatch(call)
            return await answers.receive()  # cancellation: as in _dispatch_nowait, elided here
        return await _dispatch_nowait(view, call, answers)

    ConnectionActor.__init__ = __init__  # type: ignore[method-assign]
    turns_module._dispatch = dispatch  # type: ignore[assignment]


def turncache() -> None:
    """Applied at run time (Session methods are looked up per call)."""
    from actors.connection.spec import Scope
    from supervisor import sessions

    original = sessions.Session._start_and_wait
    unsettled: dict[int, tuple[Any, tuple[Any, ...]]] = {}
    private_specs: dict[int, tuple[Any, ...]] = {}

    async def _start_and_wait(self: Any, catalog: Any, wanted: Any) -> None:
        hit = unsettled.get(id(catalog))
        if hit is None or hit[0] is not catalog:
            if len(unsettled) > 8:
                unsettled.clear()
            views = tuple(v for v in catalog.servers.values() if v.spec.enabled and not sessions._settled(v))
            hit = unsettled[id(catalog)] = (catalog, views)
        if hit[1]:
            await original(self, catalog, wanted)

    async def _spawn_private_servers(self: Any) -> None:
        config = self.supervisor.config
        specs = private_specs.get(id(config))
        if specs is None:
            specs = private_specs[id(config)] = tuple(
                s for s in config.servers if s.scope is Scope.SESSION and s.enabled
            )
        for spec in specs:
            if spec.name not in self._private:
                await self._spawn_private(spec)

    sessions.Session._start_and_wait = _start_and_wait  # type: ignore[method-assign]
    sessions.Session._spawn_private_servers = _spawn_private_servers  # type: ignore[method-assign]


# Patches of classes and modules, applied before Supervisor.open creates the actors.
PREPARE: dict[str, Callable[[], None]] = {"drain": _drain, "nowait": _nowait, "direct": _direct}

PATCHES: dict[str, Callable[[Any], None]] = {
    "linger": _linger,
    "policy": _policy,
    "validate": _validate,
    "reply": _reply,
}


def prepare(names: list[str]) -> None:
    """Apply the class-level patches among ``names`` (before ``Supervisor.open``)."""
    unknown = set(names) - set(NAMES)
    if unknown:
        raise SystemExit(f"unknown what-if patch: {', '.join(sorted(unknown))}; known: {', '.join(NAMES)}")
    for name in names:
        if name in PREPARE:
            PREPARE[name]()


def apply(names: list[str], sup: Any) -> None:
    """Apply the instance-level patches among ``names`` to a running supervisor."""
    for name in names:
        if name in PATCHES:
            PATCHES[name](sup)
