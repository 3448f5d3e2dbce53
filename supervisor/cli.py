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
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

import attrs
import trio

from supervisor import cli_client, client
from supervisor.logs import configure
from supervisor.net import bind_is_loopback, parse_bind
from supervisor.one_for_one import SupervisorGaveUp
from supervisor.reload_plan import ReloadRefused
from supervisor.service import Supervisor, open_service
from supervisor.settings.loader import CONFIG_ENV_VAR, ConfigError, describe_config, load_config
from supervisor.settings.model import Config
from supervisor.state_dir import StateError, check_state_dir

log = logging.getLogger("supervisor.cli")

E = TypeVar("E", bound=BaseException)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-supervisor", description="Keep MCP server connections alive, honest and safe."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    config_help = f"config file (default: ${CONFIG_ENV_VAR}; none means no servers)"

    check = commands.add_parser("check", help="validate a config file and list its servers")
    check.add_argument("--config", help=config_help)

    serve = commands.add_parser("serve", help="run the supervisor until SIGINT/SIGTERM")
    serve.add_argument("--config", help=config_help)
    serve.add_argument("--bind", help="admin API address HOST:PORT (default: from config, 127.0.0.1:8765)")
    serve.add_argument("--state-dir", help="state directory (default: ~/.local/state/mcp-supervisor)")
    serve.add_argument(
        "--allow-non-loopback",
        action="store_true",
        help="allow a non-loopback --bind (requires admin tokens in the config)",
    )
    serve.add_argument("--log-format", choices=("text", "json"), default="text")
    serve.add_argument("--verbose", "-v", action="store_true", help="debug logging")

    auth = commands.add_parser("auth", help="authorize a remote server (OAuth)")
    auth_commands = auth.add_subparsers(dest="auth_command", required=True, metavar="ACTION")
    login = auth_commands.add_parser(
        "login", help="authorize SERVER in a browser and store its tokens for `serve`"
    )
    login.add_argument("server", metavar="SERVER", help="the remote server's name in the config")
    login.add_argument("--config", help=config_help)
    login.add_argument("--state-dir", help="state directory (default: ~/.local/state/mcp-supervisor)")
    login.add_argument(
        "--url",
        help=f"a running service to restart SERVER in afterwards (default: ${client.URL_ENV_VAR}, "
        f"else {client.DEFAULT_URL})",
    )
    login.add_argument(
        "--token", help=f"its admin token, of the operator role (default: ${client.TOKEN_ENV_VAR})"
    )
    login.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the browser")

    cli_client.add_commands(commands)
    return parser


def check_bind(bind: str, config: Config, allow_non_loopback: bool) -> str | None:
    """Why ``bind`` is refused, or None. Loopback by default; anything else needs both
    ``--allow-non-loopback`` and admin tokens."""
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
    if not config.admin.tokens:
        return f"refusing to bind {bind}: a non-loopback bind requires admin tokens in the config"
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


async def _serve(config: Config, state_dir: str | None, reread: Callable[[], Config] | None = None) -> None:
    # Imported here: the client commands need neither Quart nor Hypercorn.
    from supervisor.admin import serve_admin

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        async with open_service(config, state_dir, "serve", reread) as sup, trio.open_nursery() as nursery:
            url = await nursery.start(serve_admin, sup, config.admin.bind)
            log.info("admin api listening", extra={"fields": {"url": url}})
            async for signum in signals:
                if signum == signal.SIGHUP:  # reload the config (serve only: never in a host)
                    nursery.start_soon(_reload, sup)
                    continue
                log.info("stopping", extra={"fields": {"signal": signal.Signals(signum).name}})
                break
            nursery.cancel_scope.cancel()  # the admin API drains before the supervisor stops


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
    log.info(
        "starting",
        extra={
            "fields": {"config": config.source or "none", "servers": len(config.servers), "pid": os.getpid()}
        },
    )
    try:
        trio.run(_serve, config, args.state_dir, _rereader(args.config, args.bind))
    except (SupervisorGaveUp, BaseExceptionGroup) as exc:
        bad_state = _find(exc, StateError)
        if bad_state is not None:
            raise bad_state from None  # main() prints it
        gave_up = _find(exc, SupervisorGaveUp)
        if gave_up is not None:
            log.error("supervisor gave up", extra={"fields": {"reason": str(gave_up)}})
            return 1
        from supervisor.admin import AdminBindError

        cannot_bind = _find(exc, AdminBindError)
        if cannot_bind is None:
            raise
        print(f"mcp-supervisor: {cannot_bind}", file=sys.stderr)
        return 1
    return 0


def cmd_auth_login(args: argparse.Namespace) -> int:
    from supervisor import auth_login  # the OAuth code (and httpx2) only when needed

    config = _load(args.config)
    _print_warnings(config)
    url = args.url or os.environ.get(client.URL_ENV_VAR) or client.DEFAULT_URL
    return auth_login.run(config, args.server, args.state_dir, url, args.token, args.timeout)


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
    args = _parser().parse_args(argv)
    if args.command in cli_client.COMMANDS:
        return cli_client.run(args)
    try:
        if args.command == "check":
            return cmd_check(args)
        if args.command == "auth":
            return cmd_auth_login(args)
        return cmd_serve(args)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    except StateError as exc:
        print(exc, file=sys.stderr)
        return 3


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
