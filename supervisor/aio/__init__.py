"""The embedding API for asyncio hosts: the supervisor in the host's own thread and loop.

    from supervisor.aio import Supervisor

Trio runs as a guest of the running asyncio loop (``supervisor/aio/guest.py``); the
supervisor, its sessions and turns are the Trio API's, their requests awaitable from
asyncio and the host's callbacks (approver, handlers) asyncio coroutine functions
(``supervisor/aio/api.py``). The README's "From asyncio" shows it in use. What an
adapter needs besides comes from here too.
"""

from actors.protocol.notifications import ProgressReceived
from actors.router.envelope import Envelope
from supervisor.aio.api import ResourceUpdates, Session, Supervisor
from supervisor.aio.guest import SupervisorClosed
from supervisor.aio.turns import Turn
from supervisor.calls.requests import RequestInFlight
from supervisor.runtime.state_dir import StateError
from supervisor.sessions.approvals import Approval, ApprovalRequest
from supervisor.sessions.subscriptions import ResourceUpdate
from supervisor.settings.loader import ConfigError, load_config

__all__ = [
    "Approval",
    "ApprovalRequest",
    "ConfigError",
    "Envelope",
    "ProgressReceived",
    "RequestInFlight",
    "ResourceUpdate",
    "ResourceUpdates",
    "Session",
    "StateError",
    "Supervisor",
    "SupervisorClosed",
    "Turn",
    "load_config",
]
