"""Who this process is among the replicas sharing its store.

A process has a replica identity when its store is shared (``store.url``): its id
(``cluster.replica``, else the host name and process id) and its *incarnation*, the id
with a random suffix drawn at each start, which is what a session's owner and a
heartbeat row name. Without ``store.url`` there is none, and nothing says "replica"
(single-process events, logs, audit rows and metrics stay as they were).
"""

from __future__ import annotations

import os
import re
import secrets
import socket
from collections.abc import Mapping
from typing import Any

import attrs

from actors.broadcast import Broadcast
from supervisor.settings.model import ClusterSettings, Config


@attrs.frozen(slots=True)
class ReplicaIdentity:
    """This process as a replica (see the module docstring)."""

    id: str
    incarnation: str
    cluster: ClusterSettings | None = None
    """The ``cluster`` section (None: a shared store without one; no shared keys)."""


def identity_for(config: Config) -> ReplicaIdentity | None:
    """This process's replica identity under ``config`` (None without ``store.url``)."""
    if config.store.url is None:
        return None
    if config.cluster is not None:
        replica = config.cluster.replica
    else:
        host = re.sub(r"[^A-Za-z0-9_-]", "-", socket.gethostname())[:20].strip("-") or "host"
        replica = f"{host}-{os.getpid()}"
    return ReplicaIdentity(replica, f"{replica}:{secrets.token_hex(4)}", config.cluster)


class ReplicaEvents(Broadcast[Mapping[str, Any]]):
    """Events that name the replica publishing them (``replica``), so a stream read
    through a load balancer says which replica each came from."""

    def __init__(self, replica: str) -> None:
        super().__init__()
        self._stamp = {"replica": replica}

    def publish(self, event: Mapping[str, Any]) -> None:
        super().publish({**event, **self._stamp})


def events_for(replica: ReplicaIdentity | None) -> Broadcast[Mapping[str, Any]]:
    """The service's event broadcast: stamped with the replica id, for a replica only."""
    return Broadcast() if replica is None else ReplicaEvents(replica.id)
