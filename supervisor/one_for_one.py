"""A one-for-one supervisor (Erlang/OTP style) for long-lived Trio children.

Children start in order (each reports readiness through ``task_status``) and stop
in reverse. A child that crashes (raises) is restarted on its own, unless it crashed
more than ``max_restarts`` times within ``within_s`` seconds: then the supervisor
gives up *upward* by raising ``SupervisorGaveUp`` (never by exiting the process), so
a bug in our own code cannot turn into a silent restart loop. A child that returns
normally has finished on purpose (it was told to stop) and is not restarted.

A connection failing is not a crash: connection actors handle that themselves with
their reconnect schedule. A crash here means an exception escaped an actor.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import attrs
import trio

log = logging.getLogger("supervisor.one_for_one")


class Startable(Protocol):
    def __call__(self, *, task_status: trio.TaskStatus[None] = ...) -> Awaitable[None]: ...


@attrs.frozen(slots=True, eq=False)
class ChildSpec:
    """How to (re)start one child and how to ask it to stop."""

    name: str
    start: Callable[[], Startable]
    request_stop: Callable[[], bool]
    """Ask the child to stop gracefully; False when the request could not be delivered."""


class SupervisorGaveUp(Exception):
    """A child crashed too often; the error it last raised is the cause."""


@attrs.define(eq=False)
class _Slot:
    spec: ChildSpec
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: trio.Event = attrs.field(factory=trio.Event)
    restarts: deque[float] = attrs.field(factory=deque)
    stopping: bool = False


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

    def __init__(self, *, max_restarts: int = 3, within_s: float = 5.0, stop_timeout_s: float = 10.0) -> None:
        self.max_restarts = max_restarts
        self.within_s = within_s
        self.stop_timeout_s = stop_timeout_s
        self._slots: list[_Slot] = []
        self._nursery: trio.Nursery | None = None

    async def run(
        self, children: Sequence[ChildSpec], *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Start every child in order, report ready, and supervise until all are done."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for spec in children:
                await self.start_child(spec)
            task_status.started()

    async def start_child(self, spec: ChildSpec) -> None:
        """Start one more child (after the initial ones) under the same rules."""
        assert self._nursery is not None, "start_child before run"
        slot = _Slot(spec)
        self._slots.append(slot)
        await self._nursery.start(self._supervise, slot)

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
        try:
            with slot.scope:
                while True:
                    try:
                        status = trio.TASK_STATUS_IGNORED if ready.done else ready
                        await slot.spec.start()(task_status=status)
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
                        self._note_crash(slot, crash)
                        continue
                    if not ready.done:
                        raise RuntimeError(f"child {slot.spec.name} returned without reporting it started")
                    return
        finally:
            slot.done.set()

    def _note_crash(self, slot: _Slot, exc: Exception) -> None:
        now = trio.current_time()
        slot.restarts.append(now)
        while slot.restarts and now - slot.restarts[0] > self.within_s:
            slot.restarts.popleft()
        if len(slot.restarts) > self.max_restarts:
            raise SupervisorGaveUp(
                f"{slot.spec.name} crashed {len(slot.restarts)} times within {self.within_s:g} s; "
                "giving up (this is a bug: please report it with the log)"
            ) from exc
        log.error("child crashed; restarting", exc_info=exc, extra={"fields": {"child": slot.spec.name}})

    async def stop(self) -> None:
        """Stop children in reverse start order, each within ``stop_timeout_s``."""
        for slot in reversed(self._slots):
            if slot.done.is_set():
                continue
            slot.stopping = True
            delivered = slot.spec.request_stop()
            if delivered:
                with trio.move_on_after(self.stop_timeout_s):
                    await slot.done.wait()
            if not slot.done.is_set():
                slot.scope.cancel()
                await slot.done.wait()
