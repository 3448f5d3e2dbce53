"""A one-for-one supervisor (Erlang/OTP style) for long-lived Trio children.

Children start in order (each reports readiness through ``task_status``) and stop
in reverse. A child that crashes (raises) is restarted on its own, unless it crashed
more than ``max_restarts`` times within ``within_s`` seconds (the restart intensity),
so a bug in our own code cannot turn into a silent restart loop. Past the intensity:

- a child with a ``park`` is *parked*: an error is logged (with the traceback) and
  the child is started through ``park(crash, delay)`` instead, which must wait
  ``delay`` (``park_s()``, asked at each parking) before it tries its work again (a
  connection actor waits in ``backoff`` with the condition ``crashed``, its schedule's
  last delay jittered: children parked together do not retry together). A crash
  within ``within_s`` after that retry parks it again at once, with no quick restarts
  in between; a crash later than that counts afresh. So a child that always crashes
  tries about once every ``park_s()``, forever, and everything else keeps running.
- a child without one makes the supervisor give up *upward* by raising
  ``SupervisorGaveUp`` (never by exiting the process).

A child that returns normally has finished on purpose (it was told to stop) and is
not restarted.

Children can be added (``start_child``) and removed (``stop_child``) while the
supervisor runs. A ``dynamic`` supervisor runs until ``stop``, also with no child
left, so children can come later; otherwise ``run`` returns once every child is done.

A connection failing is not a crash: connection actors handle that themselves with
their reconnect schedule. A crash here means an exception escaped an actor.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import attrs
import trio

from actors.log_events import get_logger

log = get_logger("supervisor.one_for_one")


class Startable(Protocol):
    def __call__(self, *, task_status: trio.TaskStatus[None] = ...) -> Awaitable[None]: ...


@attrs.frozen(slots=True, eq=False)
class ChildSpec:
    """How to (re)start one child and how to ask it to stop."""

    name: str
    start: Callable[[], Startable]
    request_stop: Callable[[], bool]
    """Ask the child to stop gracefully; False when the request could not be delivered."""
    park: Callable[[Exception, float], Startable] | None = None
    """Past the restart intensity: start the child parked (given the last crash and the
    delay), so it waits that long before it tries again. None: the supervisor gives up
    instead."""
    park_s: Callable[[], float] = lambda: 0.0
    """The delay of a parking, asked anew at each (it may be jittered)."""


class SupervisorGaveUp(Exception):
    """A child crashed too often; the error it last raised is the cause."""


@attrs.define(eq=False)
class _Slot:
    spec: ChildSpec
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: trio.Event = attrs.field(factory=trio.Event)
    restarts: deque[float] = attrs.field(factory=deque)
    stopping: bool = False
    # While parked: a crash before this moment parks the child again at once.
    parked_until: float | None = None


class _Ready:
    """Passes the first start's readiness on, and remembers that it happened."""

    __slots__ = ("_status", "done")

    def __init__(self, status: trio.TaskStatus[None]) -> None:
        self._status = status
        self.done = False

    def started(self, value: None = None) -> None:
        self.done = True
        self._status.started(value)


def _crash_of(exc: Exception) -> Exception:
    """What the child raised: a child's own nursery wraps it in a group of one."""
    if isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
        return exc.exceptions[0]
    return exc


class OneForOne:
    """Runs children; see the module docstring."""

    def __init__(
        self,
        *,
        max_restarts: int = 3,
        within_s: float = 5.0,
        stop_timeout_s: float = 10.0,
        dynamic: bool = False,
    ) -> None:
        self.max_restarts = max_restarts
        self.within_s = within_s
        self.stop_timeout_s = stop_timeout_s
        self.dynamic = dynamic
        self._slots: list[_Slot] = []
        self._nursery: trio.Nursery | None = None
        self._stopping = False
        self._stopped = trio.Event()

    async def run(
        self, children: Sequence[ChildSpec], *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Start every child in order, report ready, and supervise until all are done
        (a ``dynamic`` supervisor: until ``stop`` has stopped them)."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for spec in children:
                    await self.start_child(spec)
                task_status.started()
                if self.dynamic:
                    await self._stopped.wait()
        finally:
            self._nursery = None

    async def start_child(self, spec: ChildSpec) -> None:
        """Start one more child (after the initial ones) under the same rules; returns
        when it reported that it started."""
        if self._nursery is None or self._stopping:
            raise RuntimeError(f"cannot start {spec.name}: the supervisor is not running")
        slot = _Slot(spec)
        self._slots.append(slot)
        try:
            await self._nursery.start(self._supervise, slot)
        except BaseException:
            self._slots.remove(slot)
            raise

    async def stop_child(self, name: str) -> bool:
        """Stop one child as ``stop`` would (within ``stop_timeout_s``) and forget it;
        False when there is no child of that name."""
        for slot in self._slots:
            if slot.spec.name == name:
                break
        else:
            return False
        try:
            await self._stop_slot(slot)
        finally:
            if slot.done.is_set():
                self._slots.remove(slot)
        return True

    def restart_counts(self) -> dict[str, int]:
        """Recent crash-restarts per child (for status pages)."""
        return {slot.spec.name: len(slot.restarts) for slot in self._slots}

    async def _supervise(
        self, slot: _Slot, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        # The child runs in this task, not in a task of a nursery of its own: a
        # supervised connection costs one Trio task here, not two tasks and a nursery
        # (~4 KB each, times 1,000 servers). Its first start reports readiness through
        # our task_status; restarts report to nobody.
        ready = _Ready(task_status)
        parked_by: tuple[Exception, float] | None = None  # the crash that parked the child, the delay
        try:
            with slot.scope:
                while True:
                    try:
                        status = trio.TASK_STATUS_IGNORED if ready.done else ready
                        park = slot.spec.park
                        start = slot.spec.start() if parked_by is None or park is None else park(*parked_by)
                        await start(task_status=status)
                    except Exception as exc:
                        if not ready.done:
                            raise
                        crash = _crash_of(exc)
                        if slot.stopping:  # it crashed on its way out: log it, do not restart
                            log.error(
                                "child crashed while stopping",
                                exc_info=crash,
                                extra={"fields": {"child": slot.spec.name}},
                            )
                            return
                        delay = self._note_crash(slot, crash)
                        parked_by = None if delay is None else (crash, delay)
                        continue
                    if not ready.done:
                        raise RuntimeError(f"child {slot.spec.name} returned without reporting it started")
                    return
        finally:
            slot.done.set()

    def _note_crash(self, slot: _Slot, exc: Exception) -> float | None:
        """Count a crash; the delay when the child is to be started parked."""
        now = trio.current_time()
        name = slot.spec.name
        if slot.parked_until is not None and now < slot.parked_until:
            again = f"{name} crashed again within {self.within_s:g} s of its retry"
            return self._park(slot, exc, again, now)
        slot.parked_until = None
        slot.restarts.append(now)
        while slot.restarts and now - slot.restarts[0] > self.within_s:
            slot.restarts.popleft()
        if len(slot.restarts) > self.max_restarts:
            too_often = f"{name} crashed {len(slot.restarts)} times within {self.within_s:g} s"
            if slot.spec.park is None:
                raise SupervisorGaveUp(
                    f"{too_often}; giving up (this is a bug: please report it with the log)"
                ) from exc
            return self._park(slot, exc, too_often, now)
        log.error("child crashed; restarting", exc_info=exc, extra={"fields": {"child": name}})
        return None

    def _park(self, slot: _Slot, exc: Exception, why: str, now: float) -> float:
        slot.restarts.clear()
        delay = slot.spec.park_s()
        slot.parked_until = now + delay + self.within_s
        log.error(
            "child crashed too often; parked (this is a bug: please report it with the log)",
            exc_info=exc,
            extra={"fields": {"child": slot.spec.name, "why": why, "retry_in_s": round(delay, 3)}},
        )
        return delay

    async def stop(self) -> None:
        """Stop children in reverse start order, each within ``stop_timeout_s``; no
        child starts after this began."""
        self._stopping = True
        for slot in reversed(list(self._slots)):
            await self._stop_slot(slot)
        self._stopped.set()

    async def _stop_slot(self, slot: _Slot) -> None:
        if slot.done.is_set():
            return
        slot.stopping = True
        delivered = slot.spec.request_stop()
        if delivered:
            with trio.move_on_after(self.stop_timeout_s):
                await slot.done.wait()
        if not slot.done.is_set():
            slot.scope.cancel()
            await slot.done.wait()
