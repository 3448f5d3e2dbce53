"""A local server's process between its spawn and its teardown, with or without a transport.

The stdio transport spawns its process and tears it down around its use
(``stdio.py``). A warm pool (``supervisor/runtime/warm_pool.py``) spawns the process earlier,
keeps it idle before ``initialize``, and hands it to the transport of the session that
checks it out (``open_stdio_transport(spares=...)``). Both hold the same
:class:`Spawned`: the process counted in the process-group registry, its pidfile
written, and one teardown (``process_group.py``) whoever owns it last.

Ownership passes with no checkpoint in between: ``spawn_server`` returns a process
that is already counted and has its pidfile, and a taker enters the transport's
``try`` in the same step as the take, so a cancellation never loses a process.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import attrs
import trio

from actors.log_events import get_logger
from actors.spec import ServerSpec
from actors.transports.escapees import server_marker
from actors.transports.instances import new_instance_id
from actors.transports.pidfiles import remove_pidfile, write_pidfile
from actors.transports.process_group import (
    ProcessGroup,
    adopt,
    close_pipes,
    expect,
    reap_escapees_of,
    release,
    unexpect,
)
from actors.transports.spawn import plan_launch, spawn

_log = get_logger("actors.transports.stdio")

# The instance named in the marker of servers started outside a supervisor.
_STANDALONE = new_instance_id()


@attrs.define(eq=False)
class Spawned:
    """One spawned server process and what must be undone when it goes."""

    spec: ServerSpec
    process: trio.Process
    marker: str
    group: ProcessGroup
    pidfile: Path | None
    started_at: float = attrs.field(factory=trio.current_time)
    """Trio time of the spawn (a spare that lived long enough resets the pool's schedule)."""

    async def stop_group(self) -> None:
        """Stop the group (stdin closed, SIGTERM, SIGKILL, reaped) and its escapees; shielded."""
        await self.group.stop(self.spec.shutdown_grace_s)
        await reap_escapees_of(self.process, self.marker)  # before stderr: they may hold it open

    async def close(self) -> None:
        """The last step of every teardown: the group stopped (a no-op if it was), the
        process counted out, its pipes closed, its pidfile deleted."""
        try:
            await self.group.stop(self.spec.shutdown_grace_s)
        finally:
            release(self.process, self.marker)
            await close_pipes(self.process)
            if self.pidfile is not None:
                remove_pidfile(self.pidfile)

    async def aclose(self) -> None:
        """Tear down a process no transport took (an idle spare)."""
        try:
            await self.stop_group()
        finally:
            await self.close()


SpareSource = Callable[[ServerSpec], "Spawned | None"]
"""A synchronous take of an idle spawned process for ``spec`` (None: spawn one)."""


async def spawn_server(spec: ServerSpec, state_dir: Path | None, instance: str | None) -> Spawned:
    """Plan and spawn ``spec``'s process, count it in and write its pidfile. The caller
    owns the result at once (no checkpoint after the spawn) and must ``close`` it.

    Raises SpawnError if it cannot be started.
    """
    marker = server_marker(instance or _STANDALONE, spec.name)
    launch = plan_launch(spec, os.environ, marker)
    expect(marker)
    try:
        process = await spawn(spec, launch)
    except BaseException:
        unexpect(marker)
        raise
    del launch  # its copy of the environment (~5 KB) must not live as long as the server
    adopt(process)
    spawned = Spawned(spec, process, marker, ProcessGroup(process, spec.name), None)
    try:
        if state_dir is not None:
            spawned.pidfile = _try_write_pidfile(spec, process, state_dir, instance)
    except BaseException:  # a bug: the process must not outlive it
        await spawned.aclose()
        raise
    return spawned


def _try_write_pidfile(
    spec: ServerSpec, process: trio.Process, state_dir: Path, instance: str | None
) -> Path | None:
    """Write the pidfile; a failure is logged, not fatal (the server still works)."""
    # A tiny local write, done inline so no checkpoint separates it from the spawn.
    try:
        return write_pidfile(
            state_dir,
            pid=process.pid,
            pgid=process.pid,
            server=spec.name,
            argv0=spec.command[0],
            instance=instance,
        )
    except OSError as exc:
        _log.warning(
            "mcp server %s: cannot write pidfile in %s (%s); an orphan left by a crash "
            "of this run would not be cleaned up",
            spec.name,
            state_dir,
            exc,
        )
        return None
