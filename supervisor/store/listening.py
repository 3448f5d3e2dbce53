"""A ``LISTEN`` connection that outlives the database going away (PostgreSQL).

Shared by the policy feed (``policy_feed.py``) and the gateway's tenant states
(``supervisor/gateway/tenant_sharing.py``): connect and listen, catch up on what was
announced while nobody listened, then hand each announcement on as it comes. A lost
connection is followed by a new one every ``retry_s`` (one log line per outage), and by
another catch-up. No thread waits on the socket: Trio does, so stopping is immediate.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import trio

from actors.log_events import get_logger
from supervisor.store.errors import DatabaseError, StoreError
from supervisor.store.postgres import psycopg_error


@attrs.frozen
class Channel:
    """What one listener does, and what it says when it is lost and back."""

    connect: Callable[[], Any]
    """Blocking (run in a thread): a connection listening on the channel."""
    catch_up: Callable[[], Awaitable[None]]
    heard: Callable[[str], Awaitable[None]]
    """One announcement's payload."""
    logger: str
    lost: str
    back: str
    fields: Mapping[str, Any] = attrs.field(factory=dict)


async def follow_channel(
    channel: Channel, retry_s: float, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Listen until cancelled; started once the first connection listens and has caught
    up (or failed to: it goes on trying)."""
    log = get_logger(channel.logger)
    outage: str | None = None
    starting = True
    while True:
        listener = None
        try:
            listener = await trio.to_thread.run_sync(channel.connect, abandon_on_cancel=True)
            await channel.catch_up()
            if outage is not None:
                log.info(channel.back, extra={"fields": dict(channel.fields)})
                outage = None
            if starting:
                starting = False
                task_status.started()
            while True:
                await trio.lowlevel.wait_readable(listener.fileno())
                for note in listener.notifies(timeout=0):
                    await channel.heard(note.payload)
        except (DatabaseError, StoreError, psycopg_error()) as exc:
            if outage is None:
                outage = " ".join(str(exc).split())
                fields = {**channel.fields, "why": outage, "retry_in_s": retry_s}
                log.warning(channel.lost, extra={"fields": fields})
        finally:
            if listener is not None:
                listener.close()
        if starting:
            starting = False
            task_status.started()
        await trio.sleep(retry_s)
