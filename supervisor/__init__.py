"""trio-mcp-supervisor: keeps an agent host's MCP server connections alive, honest and safe.

Public surface, the embedding API (a contract; the README's "Embedding" section shows
it in use)::

    from supervisor import Approval, Supervisor, load_config
"""

from supervisor.calls.requests import RequestInFlight
from supervisor.runtime.state_dir import StateError
from supervisor.service import Supervisor
from supervisor.sessions.approvals import Approval, ApprovalRequest
from supervisor.settings.loader import ConfigError, load_config

__all__ = [
    "Approval",
    "ApprovalRequest",
    "ConfigError",
    "RequestInFlight",
    "StateError",
    "Supervisor",
    "load_config",
]
