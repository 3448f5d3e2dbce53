"""Pins and "always" answers that several supervisors on one PostgreSQL share.

Every write of a pin, a remembered answer or its revocation announces itself with
``pg_notify`` in its own transaction (``Store._announce``): PostgreSQL delivers it at the
commit, to every listener, in commit order, and never for a rolled-back write.
``follow_policy`` is each supervisor's listener: a connection of its own whose socket
Trio waits on (no thread, so stopping is immediate), and each announcement goes into the
in-memory policy through its synchronous ``mirror_*`` methods, between two awaits. Its
own announcements too: applying every commit in commit order is what makes all the
supervisors end where the database ends when two of them write one key at once.

A lost connection is followed by a new one (every ``RETRY_S``, one log line per outage)
and then by a reload of everything, since announcements made meanwhile went unheard;
so does the first connection (what changed between the store's first read and the
``LISTEN``). Nothing here runs on a call's path: calls read the policy's memory only.
SQLite: one supervisor per state directory (its instance lock), so nobody to tell.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Protocol

import trio

from actors.log_events import get_logger
from actors.tool_definitions import DefinitionParts
from supervisor.store.actor import StoreActor
from supervisor.store.database import Store
from supervisor.store.listening import Channel, follow_channel
from supervisor.store.schema import SQLITE

log = get_logger("supervisor.store")

RETRY_S = 1.0
"""How long a lost listener waits before it connects again."""

Snapshot = tuple[
    dict[tuple[str, str], str], dict[tuple[str, str], DefinitionParts], dict[tuple[str, str], tuple[str, str]]
]


class PolicyMirror(Protocol):
    """What the feed changes: the policy's memory (``supervisor.sessions.policy``)."""

    def mirror_pin(self, server: str, tool: str, fingerprint: str, parts: DefinitionParts | None) -> None: ...

    def mirror_always(self, tenant: str, permission: str, fingerprint: str, decision: str) -> None: ...

    def mirror_forget(self, tenant: str, permission: str) -> None: ...

    def mirror_all(
        self,
        pins: Mapping[tuple[str, str], str],
        pin_parts: Mapping[tuple[str, str], DefinitionParts],
        approvals: Mapping[tuple[str, str], tuple[str, str]],
    ) -> None: ...


def apply(mirror: PolicyMirror, payload: str) -> None:
    """One announcement into ``mirror``; one that cannot be read is logged and skipped."""
    try:
        kind, *fields = json.loads(payload)
        if kind == "pin":
            server, tool, fingerprint, description, schema = fields
            parts = None if description is None or schema is None else DefinitionParts(description, schema)
            mirror.mirror_pin(server, tool, fingerprint, parts)
        elif kind == "always":
            tenant, permission, fingerprint, decision = fields
            mirror.mirror_always(tenant, permission, fingerprint, decision)
        elif kind == "forget":
            tenant, permission = fields
            mirror.mirror_forget(tenant, permission)
        else:
            raise ValueError(f"unknown kind {kind!r}")
    except (ValueError, TypeError) as exc:  # a newer supervisor's kind, say: the next reload has it
        log.warning(
            "policy announcement skipped", extra={"fields": {"payload": payload[:200], "why": str(exc)}}
        )


def _snapshot(store: Store) -> Snapshot:
    return store.pins(), store.pin_parts(), store.approvals()


async def _catch_up(store: StoreActor, mirror: PolicyMirror) -> None:
    """Everything from the database, after this process's own queued writes are in it."""
    await store.flush()
    mirror.mirror_all(*await store.read(_snapshot))


async def follow_policy(
    store: StoreActor, mirror: PolicyMirror, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Keep ``mirror`` in step with the database's pins and answers while it runs
    (PostgreSQL; with SQLite it returns at once). Started once its first connection
    listens and has caught up (or failed to: it goes on trying)."""
    if store.store.dialect is SQLITE:
        task_status.started()
        return

    async def heard(payload: str) -> None:
        apply(mirror, payload)

    channel = Channel(
        store.store.listen,
        lambda: _catch_up(store, mirror),
        heard,
        logger="supervisor.store",
        lost="policy listener lost; pins and answers made by other supervisors wait until it is back",
        back="policy listener back",
        fields={"store": store.store.name},
    )
    await follow_channel(channel, RETRY_S, task_status=task_status)
