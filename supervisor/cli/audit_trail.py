"""``mcp-supervisor audit export|purge``: the audit trail a company keeps, offline on
the state directory (no service needed, no token: whoever may read the directory is
the operator).

``export`` writes the rows of a time range as JSON lines on stdout, for a SIEM; it may
run beside a service (SQLite has the rows the store actor has written, milliseconds
behind the calls). ``purge --person`` deletes one person's rows; it refuses while a
service runs on the directory, or while a journal is not folded in yet, because either
would write that person's rows back.
"""

from __future__ import annotations

import argparse
import datetime
import math
import re
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import attrs
import orjson

from actors.transports.instances import instance_is_live, instances_dir
from supervisor.runtime.state_dir import (
    STATE_DIR_HELP,
    StateError,
    default_state_dir,
    open_store,
    resolve_state_dir,
    state_errors,
)
from supervisor.settings.loader import load_config
from supervisor.store import DB_FILENAME, AuditRow
from supervisor.store.replay import journals

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
WHEN_HELP = "an ISO 8601 time (2026-11-01, 2026-11-01T09:00:00Z) or a duration ago (90s, 15m, 12h, 7d)"


class WhenError(ValueError):
    """A --since or --until that is neither a time nor a duration."""


def parse_when(text: str, option: str, now: float) -> float:
    """Unix time of ``text``: a duration counts back from ``now``; an ISO time without
    a zone is UTC."""
    if match := _DURATION.fullmatch(text.strip()):
        return now - float(match[1]) * _UNIT_S[match[2]]
    try:
        moment = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise WhenError(f"{option} {text!r}: expected {WHEN_HELP}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def row_line(row: AuditRow) -> bytes:
    """One export line: the row's fields (``AuditRow``: arguments only as their hash),
    and its time also as ISO 8601 UTC; ``replica`` only when a replica wrote it."""
    at = datetime.datetime.fromtimestamp(row.at, datetime.UTC).isoformat(timespec="microseconds")
    fields = {"time": at.replace("+00:00", "Z"), **attrs.asdict(row)}
    if row.replica is None:
        del fields["replica"]
    return orjson.dumps(fields, option=orjson.OPT_APPEND_NEWLINE)


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], config_help: str) -> None:
    """``audit export`` and ``audit purge`` under ``commands``."""
    audit = commands.add_parser(
        "audit", help="export or purge the audit trail (offline, on the state directory)"
    )
    actions = audit.add_subparsers(dest="audit_command", required=True, metavar="ACTION")
    export = actions.add_parser("export", help="write audit rows as JSON lines on stdout (for a SIEM)")
    export.add_argument("--since", required=True, help=f"the oldest rows: {WHEN_HELP}")
    export.add_argument("--until", help="rows before this (default: now), as --since")
    export.add_argument("--person", help="only this person's rows")
    purge = actions.add_parser("purge", help="delete every audit row of one person (the service stopped)")
    purge.add_argument(
        "--person", required=True, help="whose rows (a static-token caller's: its tenant name)"
    )
    for action in (export, purge):
        action.add_argument("--config", help=config_help)
        action.add_argument(
            "--state-dir",
            help=STATE_DIR_HELP,
        )


def run(args: argparse.Namespace) -> int:
    """The chosen action; 2 for a bad option, 3 for a state directory it cannot use."""
    config = load_config(args.config)
    chosen = Path(args.state_dir or config.state_dir or default_state_dir()).expanduser()
    if not (chosen / DB_FILENAME).is_file():  # never a new, empty store for a mistyped path
        hint = "name the state directory a supervisor ran with (--state-dir, or the config's state_dir)"
        raise StateError(chosen, f"no audit here (no {DB_FILENAME})", hint)
    path = resolve_state_dir(config, chosen)
    if args.audit_command == "export":
        now = time.time()
        try:
            since = parse_when(args.since, "--since", now)
            until = math.inf if args.until is None else parse_when(args.until, "--until", now)
        except WhenError as exc:
            print(f"mcp-supervisor audit export: {exc}", file=sys.stderr)
            return 2
        with open_store(path, config) as store, state_errors(store.path):
            _write(store.audit_between(since, until, args.person))
        return 0
    if problem := _busy(path):
        raise StateError(path, problem[0], problem[1])
    with open_store(path, config) as store, state_errors(store.path):
        purged = store.purge_audit(person=args.person)
    print(f"mcp-supervisor: purged {purged} audit rows of person {args.person!r}", file=sys.stderr)
    return 0


def _write(rows: Iterable[AuditRow]) -> None:
    out = sys.stdout.buffer
    for row in rows:
        out.write(row_line(row))
    out.flush()


def _busy(state: Path) -> tuple[str, str] | None:
    """Why a purge must wait (problem, hint), or None."""
    try:
        locks = sorted(entry.name.removesuffix(".lock") for entry in instances_dir(state).iterdir())
    except FileNotFoundError:
        locks = []
    live = [instance for instance in locks if instance_is_live(state, instance)]
    if live:
        return (
            f"a supervisor is running on this state directory (instance {live[0]})",
            "stop it (its journal would write the rows back), then purge again",
        )
    if journals(state):
        return (
            "an audit journal of an earlier run is not folded in yet",
            "start the service once and stop it (that folds it in), then purge again",
        )
    return None
