"""``mcp-supervisor status | tools | search QUERY | call TOOL [JSON]`` (and ``resources``,
``read URI``, ``prompts``: ``surface.py``).

These commands talk to a *running* service over the admin API (``supervisor.cli.client``);
they never load a config or start servers, so they answer in milliseconds and work
from any terminal on the machine.

Output rules (the CLI contract): human output is an aligned table on stdout, cut to
the terminal width (not cut with ``--wide``, nor when stdout is no terminal);
``--json`` prints the service's JSON on stdout and nothing else there; messages,
errors and live progress go to stderr, progress only when stderr is a terminal (a log
file would otherwise fill with redraw sequences). Exit status: 0 done, 1 the service
could not be reached or said no (or the call's envelope says ``ok: false``), 2 bad
usage, 130 interrupted.

Text that comes from MCP servers (error messages, descriptions, progress messages) is
shown with control characters replaced (``cli_text.printable``): a server must not be
able to move the operator's cursor, retitle the terminal or hide lines with escape
sequences. The one exception is ``call``'s result text on stdout, which is the payload
the user asked for.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from actors.protocol.sse import ServerSentEvent
from supervisor.cli import reload as cli_reload
from supervisor.cli import surface as cli_surface
from supervisor.cli.client import (
    DEFAULT_TIMEOUT_S,
    DEFAULT_URL,
    TOKEN_ENV_VAR,
    URL_ENV_VAR,
    AdminClient,
    ClientError,
    UsageError,
)
from supervisor.cli.output import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, envelope_status
from supervisor.cli.output import err as _err
from supervisor.cli.output import items as _items
from supervisor.cli.output import out as _out
from supervisor.cli.output import raw as _raw
from supervisor.cli.output import warn_not_deleted as _warn_not_deleted
from supervisor.cli.text import (
    Progress,
    cell,
    format_error,
    format_progress,
    format_retry,
    one_line,
    printable,
    render_table,
    table_width,
)

COMMANDS = ("status", "tools", "search", "call", "reload", *cli_surface.COMMANDS)
# A short wait for the clean-up requests after Ctrl-C: the user wants their prompt back.
_CLEANUP_TIMEOUT_S = 3.0


# ---------------------------------------------------------------- argument handling


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the four client commands on ``mcp-supervisor``'s sub-command parser."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("connection and output")
    group.add_argument("--url", help=f"admin API address (default: ${URL_ENV_VAR}, else {DEFAULT_URL})")
    group.add_argument("--token", help=f"bearer token for the admin API (default: ${TOKEN_ENV_VAR})")
    group.add_argument("--json", action="store_true", help="print the service's JSON only, for scripts")
    group.add_argument(
        "--timeout",
        type=_seconds,
        metavar="SECONDS",
        help=f"wait at most this long to connect and for each answer (default {DEFAULT_TIMEOUT_S:g}); "
        "for 'call', also for each sign of life while the call runs (default: the service's call timeout)",
    )

    # Tables are cut to the terminal's width; --wide never cuts.
    table = argparse.ArgumentParser(add_help=False)
    table.add_argument(
        "--wide", action="store_true", help="never cut the last column to the terminal's width"
    )
    commands.add_parser(
        "status", parents=[common, table], help="show each server's state, tools and retry countdown"
    )
    commands.add_parser("tools", parents=[common, table], help="list the tools of every server")
    search = commands.add_parser(
        "search", parents=[common, table], help="search the tools (BM25 over id and description)"
    )
    search.add_argument("query", nargs="+", metavar="QUERY", help="words to search for")
    call = commands.add_parser("call", parents=[common], help="call a tool and print its result")
    call.add_argument("tool", metavar="TOOL", help="tool id, <server>_<tool>")
    call.add_argument(
        "arguments",
        nargs="?",
        default="{}",
        metavar="JSON",
        help="arguments as a JSON object ('-': stdin; default {})",
    )
    cli_reload.add_command(commands, common)
    cli_surface.add_commands(commands, common, table)


def parse_arguments(text: str, stdin: TextIO) -> dict[str, Any]:
    """The call's arguments; UsageError unless they are one JSON object. Checked before
    any request, so a typo costs no session on the service."""
    if text == "-":
        text = stdin.read()
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"invalid JSON arguments: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError(
            f"the arguments must be a JSON object, not {type(value).__name__}: {one_line(text, 60)}"
        )
    return value


# ---------------------------------------------------------------- answers


def _tool_count(server: dict[str, Any]) -> object:
    tools = server.get("tools", server.get("tool_count"))
    return len(tools) if isinstance(tools, list) else tools


def _with_stale(text: str, item: dict[str, Any]) -> str:
    """Mark entries served from the last-known list in the store (the server is not up)."""
    return f"{text} (stale)" if item.get("stale") else text


# ---------------------------------------------------------------- the commands


def cmd_status(client: AdminClient, args: argparse.Namespace) -> int:
    reply = client.servers()
    if args.json:
        _raw(reply.text)
        return EXIT_OK
    servers = _items(reply, "servers", "servers", client.url)
    store = _store_name(client)
    if not servers:
        _out("no servers configured")
        if store:
            _out(f"store: {store}")
        return EXIT_OK
    headers = ["SERVER", "STATE", "PROTOCOL", "AVAILABLE", "TOOLS", "RETRY", "ATTEMPT", "LAST ERROR"]
    rows = [
        [
            cell(server.get("name")),
            cell(
                f"{server.get('state')} ({server['condition']})"
                if server.get("condition")
                else server.get("state")
            ),
            cell(server.get("protocol_version")),
            cell(server.get("available")),
            cell(_tool_count(server)),
            "auth login"
            if server.get("condition") == "needs_auth"
            else format_retry(server.get("state"), server.get("retry_in_s")),
            cell(server.get("attempt") or None),
            format_error(server.get("last_error"), server.get("last_error_age_s")),
        ]
        for server in servers
    ]
    for line in render_table(headers, rows, table_width(sys.stdout, args.wide)):
        _out(line)
    if store:
        _out(f"store: {store}")
    return EXIT_OK


def _store_name(client: AdminClient) -> str | None:
    """The service's store as ``/v1/health`` names it (``sqlite``, or the PostgreSQL
    URL without credentials); None from a service too old to say."""
    try:
        data = client.request("GET", "/v1/health").data
    except ClientError:
        return None
    store = data.get("store") if isinstance(data, dict) else None
    return store if isinstance(store, str) else None


def cmd_tools(client: AdminClient, args: argparse.Namespace) -> int:
    reply = client.tools()
    if args.json:
        _raw(reply.text)
        return EXIT_OK
    tools = _items(reply, "tools", "tools", client.url)
    if not tools:
        _out("no tools")
        return EXIT_OK
    headers = ["ID", "SERVER", "AVAILABLE", "DESCRIPTION"]
    rows = [
        [
            cell(tool.get("id")),
            cell(tool.get("server")),
            _with_stale(cell(tool.get("available")), tool),
            cell(tool.get("description")),
        ]
        for tool in tools
    ]
    for line in render_table(headers, rows, table_width(sys.stdout, args.wide)):
        _out(line)
    return EXIT_OK


def cmd_search(client: AdminClient, args: argparse.Namespace) -> int:
    query = " ".join(args.query)
    with client.session(on_delete_error=_warn_not_deleted) as sid:
        reply = client.tool_search(sid, query)
    if args.json:
        _raw(reply.text)
        return EXIT_OK
    matches = _items(reply, "matches", "matches", client.url)
    if not matches:
        _out(f"no tools match {one_line(query)!r}")
        return EXIT_OK
    headers = ["ID", "STATE", "DESCRIPTION"]
    rows = [
        [
            cell(match.get("id")),
            _with_stale(cell(match.get("server_state")), match),
            cell(match.get("description")),
        ]
        for match in matches
    ]
    for line in render_table(headers, rows, table_width(sys.stdout, args.wide)):
        _out(line)
    return EXIT_OK


def cmd_call(client: AdminClient, args: argparse.Namespace) -> int:
    arguments = parse_arguments(args.arguments, sys.stdin)
    progress = Progress(sys.stderr)
    request_id: list[str] = []

    def on_event(event: ServerSentEvent) -> None:
        data: object = None
        with contextlib.suppress(ValueError):
            data = json.loads(event.data)
        if event.event == "request_received":
            rid = data.get("request_id") if isinstance(data, dict) else None
            if isinstance(rid, str) and rid:
                request_id.append(rid)
            progress.show(f"calling {one_line(args.tool)} ...")
        elif event.event == "progress":
            line = format_progress(data)
            if line is not None:
                progress.show(line)

    with client.session(on_delete_error=_warn_not_deleted) as sid:
        try:
            turn = client.begin_turn(sid)
            if turn.search_enabled and not turn.lists(args.tool):
                # With tool search on, a turn lists only activated tools; a search for
                # the id activates it (this turn included), as a model would do.
                client.tool_search(sid, args.tool)
            result = client.call(
                sid, turn.turn_id, args.tool, arguments, on_event=on_event, stream_timeout=args.timeout
            )
        except KeyboardInterrupt:
            progress.clear()
            client.timeout = min(client.timeout, _CLEANUP_TIMEOUT_S)
            if request_id:
                with contextlib.suppress(ClientError):
                    client.cancel_request(request_id[0])
            raise
        finally:
            progress.clear()

    envelope = result.envelope
    if args.json:
        _raw(result.text)
    else:
        text = envelope.get("text")
        if isinstance(text, str) and text:
            _out(text)
        elif envelope.get("ok") and envelope.get("structured") is not None:
            _out(json.dumps(envelope["structured"], ensure_ascii=False))
    return envelope_status(envelope)


_HANDLERS: dict[str, Callable[[AdminClient, argparse.Namespace], int]] = {
    "status": cmd_status,
    "tools": cmd_tools,
    "search": cmd_search,
    "call": cmd_call,
    "reload": cli_reload.cmd_reload,
    **cli_surface.HANDLERS,
}


def _quiet_stdout() -> None:
    """After a closed pipe (``... | head``): point stdout at /dev/null so the interpreter's
    final flush does not print a BrokenPipeError traceback."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def run(args: argparse.Namespace) -> int:
    """Run one client command; every failure becomes one line on stderr and an exit status."""
    url = args.url or os.environ.get(URL_ENV_VAR) or DEFAULT_URL
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV_VAR)
    try:
        client = AdminClient(url, token, args.timeout or DEFAULT_TIMEOUT_S)
        status = _HANDLERS[args.command](client, args)
        sys.stdout.flush()
        return status
    except UsageError as exc:
        _err(f"mcp-supervisor: {exc}")
        return EXIT_USAGE
    except ClientError as exc:
        _err(f"mcp-supervisor: {printable(str(exc))}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        _err("mcp-supervisor: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_FAILED
