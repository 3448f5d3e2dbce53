"""StdioHub: one task reads every stdio server's stderr and notices every server's exit.

A server's stderr must be drained (a full pipe blocks the server) and its exit must
be noticed even while a grandchild keeps its pipes open. One task and one nursery per
server for each of those cost ~8 KB of Python allocations per server, 8 MB at 1,000
servers. Here they are two entries in one selector (epoll, kqueue), waited on by one
task: the selector's own descriptor is what that task waits for.

The hub is I/O plumbing, like trio's own I/O manager, not an actor: it calls back the
transport that registered a descriptor, from its task, without waiting. A callback
that raises is logged and its descriptor dropped; the other servers go on. Exits are
watched through a pidfd (Linux); where there is none (macOS), by a task of the hub
that waits for that one process.
"""

from __future__ import annotations

import contextlib
import os
import selectors
from collections.abc import Callable

import trio

from actors.log_events import get_logger

_log = get_logger("actors.transports.stdio")

Ready = Callable[[], object]  # what a callback returns is not looked at


class StdioHub:
    """Run with ``await nursery.start(hub.run)``; transports register while it runs."""

    def __init__(self) -> None:
        self._selector: selectors.BaseSelector | None = None
        self._nursery: trio.Nursery | None = None
        # Per watched process: its pidfd, or the cancel scope of the task waiting for it.
        self._exits: dict[trio.Process, int | trio.CancelScope] = {}

    @property
    def running(self) -> bool:
        return self._selector is not None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with selectors.DefaultSelector() as selector:
            try:
                async with trio.open_nursery() as nursery:
                    self._selector, self._nursery = selector, nursery
                    task_status.started()
                    await self._serve(selector)
            finally:
                self._selector = self._nursery = None
                for watch in self._exits.values():
                    if isinstance(watch, int):
                        os.close(watch)
                self._exits.clear()

    async def _serve(self, selector: selectors.BaseSelector) -> None:
        fd = selector.fileno()  # type: ignore[attr-defined]  # epoll and kqueue have one
        while True:
            await trio.lowlevel.wait_readable(fd)
            registered = selector.get_map()
            for key, _ in selector.select(0):
                if registered.get(key.fd) is not key:
                    continue  # unwatched by a callback earlier in this round
                if not _called(key.data):
                    self.unwatch(key.fd)

    # ------------------------------------------------------------- descriptors

    def watch_readable(self, fd: int, ready: Ready) -> None:
        """Call ``ready()`` whenever ``fd`` is readable (data or EOF), until unwatched.

        ``ready`` must read (or unwatch): the selector is level-triggered."""
        assert self._selector is not None, "watch_readable on a hub that is not running"
        self._selector.register(fd, selectors.EVENT_READ, ready)

    def unwatch(self, fd: int) -> None:
        """Stop watching ``fd`` (before it is closed); a no-op if it is not watched."""
        if self._selector is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(fd)

    # ------------------------------------------------------------------- exits

    def watch_exit(self, process: trio.Process, exited: Ready) -> None:
        """Call ``exited()`` once ``process`` has exited and been reaped."""
        assert self._selector is not None and self._nursery is not None, "watch_exit on a stopped hub"
        pidfd_open = getattr(os, "pidfd_open", None)
        if pidfd_open is not None:
            try:
                pidfd: int = pidfd_open(process.pid)
            except OSError:  # e.g. out of descriptors: a task of our own still works
                pass
            else:
                self._exits[process] = pidfd
                self._selector.register(pidfd, selectors.EVENT_READ, lambda: self._exited(process, exited))
                return
        scope = trio.CancelScope()
        self._exits[process] = scope
        self._nursery.start_soon(self._wait_exit, process, exited, scope)

    def unwatch_exit(self, process: trio.Process) -> None:
        """Stop watching ``process`` (its transport is closing); a no-op if not watched."""
        watch = self._exits.pop(process, None)
        if isinstance(watch, int):
            self.unwatch(watch)
            os.close(watch)
        elif watch is not None:
            watch.cancel()

    def _exited(self, process: trio.Process, exited: Ready) -> None:
        self.unwatch_exit(process)
        process.poll()  # reap it: the pidfd is readable only once the process is gone
        exited()

    async def _wait_exit(self, process: trio.Process, exited: Ready, scope: trio.CancelScope) -> None:
        with scope:
            await process.wait()
            self._exits.pop(process, None)
            _called(exited)


def _called(ready: Ready) -> bool:
    """Call back; False (and logged) when the callback raised."""
    try:
        ready()
    except Exception:
        _log.exception("stdio hub: a callback failed; what it watched is no longer watched")
        return False
    return True
