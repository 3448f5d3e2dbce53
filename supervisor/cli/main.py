"""``mcp-supervisor``: check a config, run the supervisor, or query a running one.

Exit status: 0 success, 1 the supervisor failed, 2 bad usage or a bad config, 3 the
state directory cannot be used (``state error: <path>: <problem>; <hint>``).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial
from typing import TypeVar

import attrs
import trio

from actors.log_events import get_logger
from supervisor.cli import audit_trail, client
from supervisor.cli import commands as client_commands
from supervisor.cli.secrets_rotate import add_secrets_command, rotate
from supervisor.runtime.logs import configure
from supervisor.runtime.one_for_one import SupervisorGaveUp
from supervisor.runtime.reload_plan import ReloadRefused
from supervisor.runtime.state_dir import STATE_DIR_HELP, StateError, check_state_dir
from supervisor.runtime.tracing import environment_problem
from supervisor.service import Supervisor, open_service
from supervisor.settings.loader import CONFIG_ENV_VAR, ConfigError, describe_config, load_config
from supervisor.settings.model import Config
from supervisor.settings.net import bind_is_loopback, parse_bind

log = get_logger("supervisor.cli")

E = TypeVar("E", bound=BaseException)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-supervisor", description="Keep MCP server connections alive, honest and safe."
    )
    # Also accepted after the command (cli_client); here for `mcp-supervisor --json status`.
    parser.add_argument(
        "--json", action="store_true", dest="json_first", help="machine output (client commands)"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    config_help = f"config file (default: ${CONFIG_ENV_VAR}; none means no servers)"

    check = commands.add_parser("check", help="validate a config file and list its servers")
    check.add_argument("--config", help=config_help)

    serve = commands.add_parser("serve", help="run the supervisor until SIGINT/SIGTERM")
    serve.add_argument("--config", help=config_help)
    serve.add_argument("--bind", help="admin API address HOST:PORT (default: from config, 127.0.0.1:8765)")
    serve.add_argument(
        "--state-dir",
        help=STATE_DIR_HELP,
    )
    serve.add_argument(
        "--allow-non-loopback",
        action="store_true",
        help="allow a non-loopback --bind (requires admin tokens in the config)",
    )
    serve.add_argument("--log-format", choices=("text", "json"), default="text")
    serve.add_argument("--verbose", "-v", action="store_true", help="debug logging")

    stdio = commands.add_parser("stdio", help="serve the gateway to one MCP client on stdin/stdout")
    stdio.add_argument("--config", help=config_help)
    stdio.add_argument(
        "--state-dir",
        help=STATE_DIR_HELP,
    )
    stdio.add_argument("--verbose", "-v", action="store_true", help="debug logging (on stderr)")

    peer = commands.add_parser("bridge", help="offer this machine's bridge: true servers to a hub (dial out)")
    peer.add_argument("--hub", required=True, help="the hub's bridge URL, ws(s)://HOST/v1/bridge")
    peer.add_argument("--token", required=True, help="a peer-role token of the hub")
    peer.add_argument("--config", help=config_help)
    peer.add_argument("--state-dir", help="state directory (default: none; no pidfiles)")

    auth = commands.add_parser("auth", help="authorize a remote server (OAuth)")
    auth_commands = auth.add_subparsers(dest="auth_command", required=True, metavar="ACTION")
    login = auth_commands.add_parser(
        "login", help="authorize SERVER in a browser and store its tokens for `serve`"
    )
    login.add_argument("server", metavar="SERVER", help="the remote server's name in the config")
    login.add_argument("--config", help=config_help)
    login.add_argument(
        "--state-dir",
        help=STATE_DIR_HELP,
    )
    login.add_argument(
        "--url",
        help=f"a running service to restart SERVER in afterwards (default: ${client.URL_ENV_VAR}, "
        f"else {client.DEFAULT_URL})",
    )
    login.add_argument(
        "--token", help=f"its admin token, of the operator role (default: ${client.TOKEN_ENV_VAR})"
    )
    login.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the browser")
    login.add_argument(
        "--user", metavar="PERSON", help='a "per_user" server: whose own sign-in this is (their tokens alone)'
    )

    add_secrets_command(commands, config_help)
    audit_trail.add_commands(commands, config_help)
    client_commands.add_commands(commands)
    return parser


def check_bind(bind: str, config: Config, allow_non_loopback: bool) -> str | None:
    """Why ``bind`` is refused, or None. Loopback by default; anything else needs both
    ``--allow-non-loopback`` and admin tokens or sign-in (every request then needs a token)."""
    parsed = parse_bind(bind)
    if parsed is None:
        return f"--bind {bind!r}: expected HOST:PORT, e.g. 127.0.0.1:8765 ([::1]:8765 for IPv6)"
    if parsed.loopback:
        return None
    if not allow_non_loopback:
        return (
            f"refusing to bind {bind}: not a loopback address; "
            "pass --allow-non-loopback (and configure admin tokens)"
        )
    if not config.admin.tokens and config.signin is None:
        problem = "a non-loopback bind requires admin tokens (or a signin section) in the config"
        return f"refusing to bind {bind}: {problem}"
    return None


def _load(path: str | None) -> Config:
    return load_config(path)


def _print_warnings(config: Config) -> None:
    """``config warning: <file>: <json path>: <problem>`` lines on stderr (``serve`` logs
    them instead, from ``Supervisor.open``)."""
    for warning in config.warnings:
        print(warning, file=sys.stderr)


def cmd_check(args: argparse.Namespace) -> int:
    config = _load(args.config)
    _print_warnings(config)
    source = config.source or "(no config file: no servers)"
    print(f"config ok: {source}")
    lines = describe_config(config)
    for line in lines:
        print(f"  {line}")
    print(f"{len(lines)} server(s)")
    return 0


async def _serve(
    config: Config, state_dir: str | None, listener: socket.socket, reread: Callable[[], Config] | None = None
) -> None:
    # Imported here: the client commands need neither Quart nor Hypercorn.
    from supervisor.gateway.peer import PASSED_ON  # /mcp passes the servers' requests on
    from supervisor.server import serve

    # The receiver outlives the service: a second Ctrl-C during the shutdown is
    # answered with a line, never a KeyboardInterrupt in the middle of a teardown.
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        control = _Signals()
        async with trio.open_nursery() as watcher:
            watcher.start_soon(control.watch, signals)
            async with (
                open_service(config, state_dir, "serve", reread=reread, client_capabilities=PASSED_ON) as sup,
                trio.open_nursery() as nursery,
            ):
                url = await nursery.start(partial(serve, sup, config.admin.bind, listener=listener))
                log.info("admin api listening", extra={"fields": {"url": url}})
                control.serving(sup, nursery)
                await control.stop.wait()
                nursery.cancel_scope.cancel()  # the admin API drains before the supervisor stops
            watcher.cancel_scope.cancel()


class _Signals:
    """``serve``'s signals, read for the service's whole life: the first SIGINT/SIGTERM
    stops it, later ones only say it is stopping; SIGHUP reloads the config (serve only:
    never in a host), once the service runs if it comes during the start."""

    def __init__(self) -> None:
        self.stop = trio.Event()
        self._service: tuple[Supervisor, trio.Nursery] | None = None
        self._reload_pending = False

    def serving(self, sup: Supervisor, nursery: trio.Nursery) -> None:
        self._service = (sup, nursery)
        if self._reload_pending:
            self._reload_pending = False
            nursery.start_soon(_reload, sup)

    async def watch(self, signals: AsyncIterator[int]) -> None:
        async for signum in signals:
            name = signal.Signals(signum).name
            if signum == signal.SIGHUP:
                if self.stop.is_set():
                    continue  # stopping: nothing to reload
                if self._service is None:
                    self._reload_pending = True
                else:
                    sup, nursery = self._service
                    nursery.start_soon(_reload, sup)
            elif not self.stop.is_set():
                log.info("stopping", extra={"fields": {"signal": name}})
                self.stop.set()
            else:
                log.info(
                    "already stopping", extra={"fields": {"signal": name, "waiting_for": "servers to stop"}}
                )


async def _reload(sup: Supervisor) -> None:
    """SIGHUP: apply the config file again; a refusal is logged by ``reload`` and the
    running config stays."""
    with contextlib.suppress(ConfigError, ReloadRefused):
        await sup.reload(trigger="SIGHUP")


def _rereader(path: str | None, bind: str | None) -> Callable[[], Config]:
    """How ``serve`` reads its config again for a reload: as at start, ``--bind`` kept."""

    def reread() -> Config:
        config = _load(path)
        return config if bind is None else attrs.evolve(config, admin=attrs.evolve(config.admin, bind=bind))

    return reread


def cmd_serve(args: argparse.Namespace) -> int:
    config = _load(args.config)
    configure(
        config.secrets,
        level=logging.DEBUG if args.verbose else logging.INFO,
        json_lines=args.log_format == "json",
    )
    bind = args.bind or config.admin.bind
    refusal = check_bind(bind, config, args.allow_non_loopback)
    if refusal:
        print(f"mcp-supervisor: {refusal}", file=sys.stderr)
        return 2
    if not bind_is_loopback(bind):
        log.warning("binding a non-loopback address", extra={"fields": {"bind": bind}})
    # --bind wins over the config file; _serve reads the address from the config.
    config = attrs.evolve(config, admin=attrs.evolve(config.admin, bind=bind))
    check_state_dir(config, args.state_dir)  # a bad one is the only line printed (exit 3)
    from supervisor.server import BindError, listen

    try:
        listener = listen(bind)  # before any server starts: a taken port costs nothing
    except BindError as exc:
        print(f"mcp-supervisor: {exc}", file=sys.stderr)
        return 1
    log.info(
        "starting",
        extra={
            "fields": {"config": config.source or "none", "servers": len(config.servers), "pid": os.getpid()}
        },
    )
    try:
        with listener:
            trio.run(_serve, config, args.state_dir, listener, _rereader(args.config, args.bind))
        # Stopped: a late Ctrl-C while the interpreter exits has nothing left to stop.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:  # before the receiver was set up, or after it closed
        return 130
    except (SupervisorGaveUp, BaseExceptionGroup) as exc:
        bad_state = _find(exc, StateError)
        if bad_state is not None:
            raise bad_state from None  # main() prints it
        gave_up = _find(exc, SupervisorGaveUp)
        if gave_up is not None:
            log.error("supervisor gave up", extra={"fields": {"reason": str(gave_up)}})
            return 1
        raise
    return 0


def cmd_stdio(args: argparse.Namespace) -> int:
    from supervisor.gateway.stdio_front import run_stdio

    config = _load(args.config)
    configure(config.secrets, level=logging.DEBUG if args.verbose else logging.INFO)
    check_state_dir(config, args.state_dir)
    try:
        run_stdio(config, args.state_dir)
    except BaseExceptionGroup as exc:
        bad_state = _find(exc, StateError)
        if bad_state is not None:
            raise bad_state from None  # main() prints it
        raise
    return 0


def cmd_bridge(args: argparse.Namespace) -> int:
    from supervisor.bridge.dialout import PeerRefused, exported, run_peer

    config = _load(args.config)
    configure(config.secrets, level=logging.INFO)
    specs = exported(config.servers)
    if not specs:
        print(
            "mcp-supervisor: the config exports no server; mark local servers with bridge: true",
            file=sys.stderr,
        )
        return 2
    if not args.hub.startswith(("ws://", "wss://")):
        print(f"mcp-supervisor: --hub {args.hub!r} must be a ws:// or wss:// URL", file=sys.stderr)
        return 2
    from pathlib import Path

    from supervisor.service import default_connector

    state = Path(args.state_dir) if args.state_dir else None
    connector = default_connector(config, state, None, None, None)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(connector.run)
            cap = config.bridge.max_processes
            await run_peer(args.hub, args.token, specs, connector, registered=_registered, max_processes=cap)

    try:
        trio.run(main)
    except BaseExceptionGroup as exc:
        refused = _find(exc, PeerRefused)
        if refused is None:
            raise
        print(f"mcp-supervisor: {refused}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    return 0


def _registered(taken: list[str]) -> None:
    log.info("registered with the hub", extra={"fields": {"servers": taken}})
    print(f"mcp-supervisor: registered with the hub: {', '.join(taken)}", file=sys.stderr, flush=True)


def cmd_auth_login(args: argparse.Namespace) -> int:
    from supervisor.cli import auth_login  # the OAuth code (and httpx2) only when needed

    config = _load(args.config)
    _print_warnings(config)
    url = args.url or os.environ.get(client.URL_ENV_VAR) or client.DEFAULT_URL
    return auth_login.run(config, args.server, args.state_dir, url, args.token, args.timeout, args.user)


def _find(exc: BaseException, kind: type[E]) -> E | None:
    """The ``kind`` error inside ``exc`` (Trio delivers errors wrapped in nursery groups)."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _find(inner, kind)
            if found is not None:
                return found
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mcp-supervisor`` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.json_first:
        if args.command not in client_commands.COMMANDS:
            parser.error(f"--json applies to {', '.join(client_commands.COMMANDS)}, not {args.command}")
        args.json = True
    if args.command in client_commands.COMMANDS:
        return client_commands.run(args)
    if (
        args.command not in ("check", "auth", "bridge", "secrets", "audit")
        and (problem := environment_problem()) is not None
    ):
        print(f"mcp-supervisor: {problem}", file=sys.stderr)  # before anything starts
        return 2
    try:
        if args.command == "check":
            return cmd_check(args)
        if args.command == "auth":
            return cmd_auth_login(args)
        if args.command == "audit":
            return audit_trail.run(args)
        if args.command == "stdio":
            return cmd_stdio(args)
        if args.command == "bridge":
            return cmd_bridge(args)
        if args.command == "secrets":
            print(rotate(_load(args.config), args.state_dir))
            return 0
        return cmd_serve(args)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    except StateError as exc:
        print(exc, file=sys.stderr)
        return 3


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
