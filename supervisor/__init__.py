"""trio-mcp-supervisor: keeps an agent host's MCP server connections alive, honest and safe.

Public surface (DESIGN.md §6)::

    from supervisor import Approval, Supervisor, load_config
"""

from supervisor.service import Approval, Supervisor
from supervisor.settings.loader import ConfigError, load_config

__all__ = ["Approval", "ConfigError", "Supervisor", "load_config"]
