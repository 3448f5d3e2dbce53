"""Trio as a guest of the host's running asyncio loop, and the two ways across.

``supervisor.aio`` does not start a second event loop or a thread of its own: it starts
Trio in guest mode on the asyncio loop that is running (``trio.lowlevel.start_guest_run``),
so Trio's scheduler runs in the loop's callbacks, on the loop's thread. Only Trio's
wait for I/O happens in a worker thread of Trio's, which wakes the loop when something
is ready. One Trio run per thread: Trio keeps its run in a thread-local, so a thread
that runs one (another ``supervisor.aio`` supervisor, ``trio.run``, trio-asyncio)
cannot start a second.

Nothing here calls Trio from asyncio code. asyncio hands work to Trio through the
run's token (``TrioToken.run_sync_soon``, whose callbacks run inside the Trio run), and
Trio hands answers back by resolving asyncio futures, which it may do directly: its
code runs on the loop's thread, inside one of the loop's callbacks.

- ``Guest.run``: await a Trio async function from asyncio; cancelling the awaiting
  asyncio task cancels the Trio task and waits for it to end (a call's server is told).
- ``Guest.host``: a host's asyncio coroutine function as an async callable for the
  Trio side; each call is an asyncio task on the loop, cancelled (and waited for) when
  the Trio side is.
- ``Holding``: an ``async with`` on the asyncio side whose Trio context manager (the
  supervisor, a session) one Trio task enters and leaves, as Trio's nurseries require.
- ``guest_run``: the run itself, for the duration of an ``async with``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any, Generic, ParamSpec, TypeVar

import outcome
import trio

T = TypeVar("T")
P = ParamSpec("P")

NO_LOOP = (
    "supervisor.aio needs a running asyncio event loop in this thread and finds none: open it "
    "inside a coroutine that asyncio runs (asyncio.run(main())); a Trio program uses "
    "supervisor.Supervisor.open instead"
)
ONE_RUN_PER_THREAD = (
    "supervisor.aio runs Trio as a guest of this thread's asyncio loop, but a Trio run is active in "
    "this thread already (one Trio run per thread: another supervisor.aio supervisor is open here, "
    "or trio-asyncio or trio.run runs this code): open your sessions on the supervisor that is open "
    "(it takes any number), or open this one in another thread with its own event loop"
)
OTHER_LOOP = (
    "this supervisor runs on the asyncio event loop that opened it, in its thread: await its "
    "requests there (from another thread, hand them over with asyncio.run_coroutine_threadsafe)"
)
CLOSED = "the supervisor is closed (its async with block has ended): open a new one"


class SupervisorClosed(RuntimeError):
    """Asked of a ``supervisor.aio`` supervisor, session or turn after its block ended."""

    def __init__(self, message: str = CLOSED) -> None:
        super().__init__(message)


def host_loop() -> asyncio.AbstractEventLoop:
    """The running asyncio loop, where a guest run may start (else a RuntimeError that says
    why and what to do)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError(NO_LOOP) from None
    if trio.lowlevel.in_trio_run():
        raise RuntimeError(ONE_RUN_PER_THREAD)
    return loop


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def resolve(future: asyncio.Future[T], value: T) -> bool:
    """Answer ``future`` unless it is done (cancelled by its waiter); whether it was answered."""
    if future.done():
        return False
    future.set_result(value)
    return True


def fail(future: asyncio.Future[Any], error: BaseException) -> bool:
    """``resolve`` with an error."""
    if future.done():
        return False
    future.set_exception(error)
    return True


async def wait_through_cancel(future: asyncio.Future[Any]) -> None:
    """Wait until ``future`` is done, even if the waiting task is cancelled meanwhile (then
    raise CancelledError after): a Trio task's end is waited for, never abandoned."""
    cancelled = False
    while not future.done():
        try:
            await asyncio.wait((future,))
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError


class _Job(Generic[T]):
    """One Trio call awaited from asyncio (``Guest.run``)."""

    __slots__ = ("cancelled", "ended", "finished", "future", "scope")

    def __init__(self, future: asyncio.Future[T]) -> None:
        self.future = future
        self.scope: trio.CancelScope | None = None
        self.cancelled = False
        self.finished = False
        self.ended: asyncio.Future[None] | None = None  # made when asyncio waits for the end

    def cancel(self) -> None:
        """(Trio side) The awaiting asyncio task was cancelled."""
        self.cancelled = True
        if self.scope is not None:
            self.scope.cancel()

    def finish(self) -> None:
        """(Trio side) The job's task ends; one the run's end cancelled says so."""
        self.finished = True
        fail(self.future, SupervisorClosed("the supervisor closed while this call was in flight"))
        if self.ended is not None:
            resolve(self.ended, None)


async def _run_job(job: _Job[T], call: Callable[[], Awaitable[T]]) -> None:
    try:
        with trio.CancelScope() as scope:
            job.scope = scope
            if job.cancelled:
                scope.cancel()
            try:
                value = await call()
            except Exception as exc:  # the caller's to handle, as the Trio API raises it
                fail(job.future, exc)
            else:
                resolve(job.future, value)
    finally:
        job.finish()


async def _host_call(fn: Callable[..., Awaitable[T]], what: str, args: tuple[Any, ...]) -> T:
    """(asyncio side) One call of a host's coroutine function, as an asyncio task."""
    answer = fn(*args)
    if not inspect.isawaitable(answer):
        raise TypeError(
            f"{what} returned {type(answer).__name__}, not an awaitable: pass an async def function"
        )
    return await answer


class Guest:
    """One Trio guest run on the host's loop (``guest_run``): what crosses in each direction."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._stop: trio.Event | None = None
        self.stopping = False

    async def main(self, started: asyncio.Future[None]) -> None:
        """(Trio side) The run's main task: a nursery for every job and held context."""
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        if self.stopping:  # left before the run got here
            return
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            resolve(started, None)
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    def soon(self, fn: Callable[..., object], *args: Any) -> None:
        """(asyncio side) Run ``fn(*args)`` inside the Trio run, soon; SupervisorClosed after
        the run ended."""
        if self._token is None or self.stopping:
            raise SupervisorClosed
        try:
            self._token.run_sync_soon(fn, *args)
        except trio.RunFinishedError:
            raise SupervisorClosed from None

    def spawn(self, fn: Callable[..., Awaitable[object]], *args: Any) -> bool:
        """(Trio side, in a ``soon`` callback) Start a task in the run's nursery; False when
        the run is ending and takes no more."""
        if self._nursery is None or self._stop is None or self._stop.is_set():
            return False
        try:
            self._nursery.start_soon(fn, *args)
        except RuntimeError:  # the nursery closed: the run is ending
            return False
        return True

    def stop(self) -> None:
        """(asyncio side) End the run: what still runs in it is cancelled."""
        if not self.stopping and self._stop is not None:
            self.soon(self._stop.set)
        self.stopping = True  # (a run not started yet sees it and ends at once)

    # ------------------------------------------------------------ asyncio → Trio

    async def run(self, fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """Await ``fn(*args, **kwargs)``, a Trio async function, from asyncio.

        Its value or exception comes back as is. Cancelling the awaiting task cancels the
        Trio task, waits for it to end, then raises CancelledError. SupervisorClosed: the
        run has ended, or ended while this ran. RuntimeError: awaited on another loop."""
        if _running_loop() is not self.loop:
            raise RuntimeError(OTHER_LOOP)
        job: _Job[T] = _Job(self.loop.create_future())
        self.soon(self._start, job, functools.partial(fn, *args, **kwargs))
        try:
            return await job.future
        except asyncio.CancelledError:
            if job.future.cancelled() and not job.finished:  # the awaiting task was cancelled
                job.ended = self.loop.create_future()
                self.soon(job.cancel)
                await wait_through_cancel(job.ended)
            raise

    def _start(self, job: _Job[Any], call: Callable[[], Awaitable[Any]]) -> None:
        if not self.spawn(_run_job, job, call):
            job.finish()

    # ------------------------------------------------------------ Trio → asyncio

    def host(self, fn: Callable[P, Awaitable[T]], what: str) -> Callable[P, Awaitable[T]]:
        """``fn``, a host's asyncio coroutine function, for the Trio side to await.

        Each call runs as an asyncio task on the loop, in a copy of the context this was
        made in (the host's contextvars, as where it passed ``fn``); its answer or error
        comes back to the Trio side as is. Cancelled on the Trio side (a timeout, the
        supervisor closing), the task is cancelled and waited for. ``what`` names ``fn``
        in errors (a TypeError now when it is no callable)."""
        if not callable(fn):
            raise TypeError(f"{what}: expected an async callable (an async def function); got {fn!r}")
        context = contextvars.copy_context()

        async def on_the_trio_side(*args: P.args, **kwargs: P.kwargs) -> T:
            call = functools.partial(fn, **kwargs) if kwargs else fn
            return await self._await_host(call, what, context, args)

        return on_the_trio_side

    async def _await_host(
        self,
        fn: Callable[..., Awaitable[T]],
        what: str,
        context: contextvars.Context,
        args: tuple[Any, ...],
    ) -> T:
        done = trio.Event()
        task = self.loop.create_task(_host_call(fn, what, args), context=context.copy())
        task.add_done_callback(lambda _task: self._wake(done))
        try:
            await done.wait()
        except BaseException:  # cancelled on the Trio side: so is the task, and it is waited for
            task.cancel()
            with trio.CancelScope(shield=True):
                await done.wait()
            raise
        if task.cancelled():
            raise RuntimeError(f"{what} was cancelled on the asyncio side before it answered")
        return task.result()

    def _wake(self, done: trio.Event) -> None:
        """(asyncio side) A host task ended: tell the Trio task that waits for it."""
        if self._token is not None:
            with contextlib.suppress(trio.RunFinishedError):  # nobody waits any more
                self._token.run_sync_soon(done.set)


class Holding(Generic[T]):
    """``async with`` on the asyncio side around a Trio async context manager.

    One Trio task enters ``opener()``, hands its value to the block, holds it until the
    block ends, then leaves it (Trio's nurseries are entered and left by one task).
    Errors of entering or leaving come out of the ``async with`` as the Trio API raises
    them; the block's own error comes out unchanged. Leaving waits for the Trio side to
    finish (a supervisor reaps its servers) even when the host is cancelled meanwhile.
    If the Trio side ends on its own while the block runs (a bug of ours, or the run
    interrupted), the task in the block is cancelled, and the block raises why instead.
    """

    def __init__(self, guest: Guest, opener: Callable[[], AbstractAsyncContextManager[T]]) -> None:
        self._guest = guest
        self._opener = opener
        self._entered: asyncio.Future[T] = guest.loop.create_future()
        self._ended: asyncio.Future[None] = guest.loop.create_future()
        self._leave: trio.Event | None = None
        self._scope: trio.CancelScope | None = None
        self._host: asyncio.Task[Any] | None = None
        self._leaving = False
        self._cut = False  # the Trio side ended first and cancelled the host's task

    @property
    def done(self) -> bool:
        """Left (or never entered)."""
        return self._host is None or self._ended.done()

    async def __aenter__(self) -> T:
        if self._host is not None:
            raise RuntimeError("this async with block was entered already: make a new one")
        self._host = asyncio.current_task()
        self._guest.soon(self._start)
        try:
            value = await self._entered
        except asyncio.CancelledError:
            if self._entered.cancelled():  # cancelled while entering: the Trio side gives up
                self._leaving = True
                self._guest.soon(self._abandon)
            await wait_through_cancel(self._ended)
            raise
        except BaseException:
            await wait_through_cancel(self._ended)
            raise
        self._ended.add_done_callback(self._ended_first)
        return value

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.leave()
        failure = self._ended.exception()
        if self._cut and isinstance(error, asyncio.CancelledError) and self._host is not None:
            self._host.uncancel()  # our cancellation: the reason comes out instead
            raise failure or SupervisorClosed("the supervisor stopped on its own; see its log")
        if failure is not None:
            raise failure

    async def leave(self) -> None:
        """Leave the Trio context (also before the block ends) and wait until it is left."""
        if self._host is None:
            return
        if not self._ended.done():
            self._leaving = True
            self._guest.soon(self._set_leave)
        await wait_through_cancel(self._ended)

    def _ended_first(self, _ended: asyncio.Future[None]) -> None:
        if not self._leaving and self._host is not None and not self._host.done():
            self._cut = True
            self._host.cancel()

    # ------------------------------------------------------------------ Trio side

    def _start(self) -> None:
        if not self._guest.spawn(self._hold):
            fail(self._entered, SupervisorClosed())
            resolve(self._ended, None)

    def _abandon(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    def _set_leave(self) -> None:
        if self._leave is not None:
            self._leave.set()

    async def _hold(self) -> None:
        self._leave = trio.Event()
        try:
            with trio.CancelScope() as self._scope:
                async with self._opener() as value:
                    if resolve(self._entered, value):
                        await self._leave.wait()
        except Exception as exc:  # entering or leaving failed: the host's to see
            if not fail(self._entered, exc):
                fail(self._ended, exc)
        finally:
            fail(self._entered, SupervisorClosed())
            resolve(self._ended, None)


@asynccontextmanager
async def guest_run() -> AsyncIterator[Guest]:
    """A Trio guest run on the running asyncio loop for the block; leaving it ends the run
    (what still runs in it is cancelled) and waits for its end. An error that ended the
    run (a KeyboardInterrupt Trio caught) comes out of the block.

    Raises RuntimeError (before the block) when no asyncio loop runs in this thread, or
    a Trio run is active in it already."""
    loop = host_loop()
    guest = Guest(loop)
    started: asyncio.Future[None] = loop.create_future()
    done: asyncio.Future[outcome.Outcome[None]] = loop.create_future()
    trio.lowlevel.start_guest_run(
        guest.main,
        started,
        run_sync_soon_threadsafe=loop.call_soon_threadsafe,
        run_sync_soon_not_threadsafe=loop.call_soon,
        done_callback=functools.partial(resolve, done),
        # asyncio owns signal.set_wakeup_fd (its add_signal_handler needs it); the guest
        # run needs no signals of its own (docs/architecture.md, "asyncio hosts: the guest run")
        host_uses_signal_set_wakeup_fd=True,
    )
    try:
        await asyncio.wait((started, done), return_when=asyncio.FIRST_COMPLETED)
        yield guest
    finally:
        if not done.done():
            guest.stop()
        await wait_through_cancel(done)
        ended = done.result()
        if isinstance(ended, outcome.Error):
            raise _interrupt_first(ended.error)


def _interrupt_first(error: BaseException) -> BaseException:
    """What ended the run, for the host: a KeyboardInterrupt Trio delivered (a host with
    Python's default SIGINT handler, such as ``loop.run_until_complete``) comes out as
    one, as the host's loop would raise it, not inside Trio's group."""
    if isinstance(error, BaseExceptionGroup):
        interrupted, _rest = error.split(KeyboardInterrupt)
        if interrupted is not None:
            interrupt = KeyboardInterrupt()
            interrupt.__cause__ = error
            return interrupt
    return error
