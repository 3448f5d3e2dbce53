"""The audit's retention: with ``audit.keep_days`` set, rows older than that are
purged once at start and then every hour, each purge counted in a log line."""

from __future__ import annotations

import functools
import time

import trio

from actors.log_events import get_logger
from supervisor.store.actor import StoreActor
from supervisor.store.database import Store
from supervisor.store.errors import StoreError

log = get_logger("supervisor.retention")

PURGE_EVERY_S = 3600.0
DAY_S = 86400.0


async def keep_audit(
    store: StoreActor,
    keep_days: float,
    every_s: float = PURGE_EVERY_S,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Purge rows older than ``keep_days`` now and every ``every_s`` seconds until
    cancelled. A purge that fails (a full disk) is logged and tried again next time:
    the audit must never stop a service."""
    task_status.started()
    while True:
        before = time.time() - keep_days * DAY_S
        try:
            purged = await store.read(functools.partial(Store.purge_audit, before=before))
        except StoreError:
            log.error("audit retention purge failed; it is tried again", exc_info=True)
        else:
            log.info(
                "audit rows purged: older than the retention",
                extra={"fields": {"rows": purged, "keep_days": keep_days}},
            )
        await trio.sleep(every_s)
