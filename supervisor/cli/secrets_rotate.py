"""``mcp-supervisor secrets rotate``: seal every stored OAuth record with the first key.

A rotation: put the new key first in ``secrets_at_rest.keys`` and keep the old one
second (both open records), restart or reload the service, run this, then drop the
old key. Each record is rewritten in its own transaction, and only if nobody changed
it meanwhile, so it is safe while a service runs on the same state directory.
"""

from __future__ import annotations

import argparse

from supervisor.runtime.state_dir import STATE_DIR_HELP, open_store, resolve_state_dir, state_errors
from supervisor.settings.model import Config


def add_secrets_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], config_help: str
) -> None:
    """The ``secrets`` command and its ``rotate`` action."""
    secrets = commands.add_parser("secrets", help="the keys that seal stored OAuth tokens")
    actions = secrets.add_subparsers(dest="secrets_command", required=True, metavar="ACTION")
    rotate = actions.add_parser("rotate", help="seal every stored OAuth record with the first configured key")
    rotate.add_argument("--config", help=config_help)
    rotate.add_argument("--state-dir", help=STATE_DIR_HELP)


def rotate(config: Config, state_dir: str | None) -> str:
    """Reseal the records; the line to print. Raises StateError."""
    state_path = resolve_state_dir(config, state_dir)
    store = open_store(state_path, config)
    try:
        with state_errors(store.path):
            done = store.reseal_oauth()
    finally:
        store.close()
    dropped = f"; {done.dropped} no configured key opens were dropped" if done.dropped else ""
    return f"secrets rotate: {done.sealed} OAuth record(s) sealed with the first key in {store.path}{dropped}"
