"""``mcp-supervisor reload``: ask a running service to apply its config file again.

It sends ``POST /v1/config/reload`` (the operator role) and prints what the service
did: restarted, started, stopped, applied live. A refused reload (a malformed file,
or a change to ``admin.bind`` or ``state_dir``) prints the service's one line, e.g.
``config error: <file>: <json path>: <problem>``, and exits 2, like ``check``; the
service keeps its running config. ``--json`` prints the service's answer only.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from supervisor.cli.client import AdminClient, ApiError, ClientError
from supervisor.cli.text import printable

# Stopping and starting servers takes their shutdown grace each: more than a query.
RELOAD_TIMEOUT_S = 60.0
_REFUSALS = ("config_error", "restart_needed", "no_config_file")


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser], common: Any) -> None:
    """Register ``reload`` (with the client commands' ``common`` options)."""
    commands.add_parser(
        "reload",
        parents=[common],
        help="re-read the config file of a running service and apply the difference",
        description="Re-read the config file of a running service and apply the difference "
        "without a restart (the service answers SIGHUP the same way). Needs the operator role. "
        f"--timeout defaults to {RELOAD_TIMEOUT_S:g} s here.",
    )


def cmd_reload(client: AdminClient, args: argparse.Namespace) -> int:
    """Exit 0 applied, 2 refused (nothing changed), 1 the service could not be asked."""
    if args.timeout is None:
        client.timeout = RELOAD_TIMEOUT_S
    try:
        reply = client.request("POST", "/v1/config/reload")
    except ApiError as exc:
        if exc.code not in _REFUSALS:
            raise
        print(printable(exc.message), file=sys.stderr)
        return 2
    if args.json:
        print(reply.text.strip())
        return 0
    if not isinstance(reply.data, dict):
        raise ClientError(f"the supervisor at {client.url} answered the reload with something unexpected")
    for line in reload_lines(reply.data):
        print(line)
    return 0


def reload_lines(report: dict[str, Any]) -> list[str]:
    """The readable account of a reload's answer (names come from the config: printable)."""
    lines = [f"reloaded {printable(str(report.get('config') or '(no config file)'))}"]
    for key, label in (("restarted", "restarted"), ("started", "started"), ("stopped", "stopped")):
        names = [printable(str(name)) for name in report.get(key) or ()]
        if names:
            lines.append(f"  {label}: {', '.join(names)}")
    live = report.get("applied_live") or {}
    applied = [
        f"{printable(str(name))} ({', '.join(printable(str(k)) for k in keys)})"
        for name, keys in (live.get("servers") or {}).items()
    ]
    applied += [printable(str(setting)) for setting in live.get("settings") or ()]
    if applied:
        lines.append(f"  applied live: {'; '.join(applied)}")
    sessions = [printable(str(name)) for name in report.get("new_sessions") or ()]
    if sessions:
        lines.append(f"  for new sessions: {', '.join(sessions)}")
    if len(lines) == 1:
        lines.append("  nothing changed")
    return lines
