"""trio-mcp-supervisor: keeps an agent host's MCP server connections alive, honest and safe.

Public surface (DESIGN.md §6)::

    from supervisor import Approval, Supervisor, load_config
"""

from supervisor.approvals import Approval, ApprovalRequest
from supervisor.service import Supervisor
from supervisor.settings.loader import ConfigError, load_config

__all__ = ["Approval", "ApprovalRequest", "ConfigError", "Supervisor", "load_config"]
