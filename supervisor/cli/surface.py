"""``mcp-supervisor resources | read URI [--server S] | prompts``: the surface beyond
tools, over the admin API of a running service.

Like ``call``, each opens a session and begins a turn (the listing is the turn's
frozen surface), and deletes the session when done. ``resources`` shows each
resource's URI as the turn shows it (``mcp-supervisor://<server>/<uri>`` when several
servers publish it), then the templates; ``read`` prints the text of what it read,
and names each binary part instead of printing it (``[blob <uri> (<mime>)]``);
``prompts`` shows each prompt's id and arguments (required ones marked ``*``). A
read's text is the payload the user asked for and is printed as it is, like
``call``'s; everything else that comes from servers is made printable. The output
rules, exit statuses and the ``--json`` contract are those of ``commands.py``.
"""

from __future__ import annotations

import argparse
import sys
import urllib.parse
from collections.abc import Callable
from typing import Any

from supervisor.cli.client import AdminClient, ClientError, Reply
from supervisor.cli.output import EXIT_OK, envelope_status, items, out, raw, warn_not_deleted
from supervisor.cli.text import cell, render_table, table_width

COMMANDS = ("resources", "read", "prompts")


def add_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    table: argparse.ArgumentParser,
) -> None:
    """Register ``resources``, ``read`` and ``prompts`` (with the client commands' options)."""
    commands.add_parser(
        "resources", parents=[common, table], help="list the resources and resource templates of every server"
    )
    read = commands.add_parser("read", parents=[common], help="read a resource and print its text")
    read.add_argument(
        "uri", metavar="URI", help="the URI as 'resources' shows it (or the server's own, with --server)"
    )
    read.add_argument("--server", metavar="SERVER", help="the server to read it from")
    commands.add_parser("prompts", parents=[common, table], help="list the prompts of every server")


def _in_turn(client: AdminClient, route: str, body: object | None = None) -> Reply:
    """One request to ``/v1/sessions/{sid}/turns/{tid}/<route>`` in a fresh session and turn."""
    with client.session(on_delete_error=warn_not_deleted) as sid:
        turn = client.begin_turn(sid)
        path = f"/v1/sessions/{_quote(sid)}/turns/{_quote(turn.turn_id)}/{route}"
        return client.request("GET" if body is None else "POST", path, body)


def _quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


def _table(headers: list[str], rows: list[list[str]], wide: bool) -> None:
    for line in render_table(headers, rows, table_width(sys.stdout, wide)):
        out(line)


def _listing(client: AdminClient, args: argparse.Namespace, route: str) -> Reply | None:
    """A turn's listing at ``route``; None when ``--json`` has printed it already."""
    reply = _in_turn(client, route)
    if args.json:
        raw(reply.text)
        return None
    return reply


def cmd_resources(client: AdminClient, args: argparse.Namespace) -> int:
    reply = _listing(client, args, "resources")
    if reply is None:
        return EXIT_OK
    resources = items(reply, "resources", "resources", client.url)
    templates = items(reply, "templates", "templates", client.url)
    if not resources and not templates:
        out("no resources")
        return EXIT_OK
    rows = [
        [cell(r.get("uri")), cell(r.get("server")), cell(r.get("name")), cell(r.get("mimeType"))]
        for r in resources
    ]
    rows += [
        [cell(t.get("uriTemplate")), cell(t.get("server")), cell(t.get("name")), "template"]
        for t in templates
    ]
    _table(["URI", "SERVER", "NAME", "MIME"], rows, args.wide)
    return EXIT_OK


def cmd_prompts(client: AdminClient, args: argparse.Namespace) -> int:
    reply = _listing(client, args, "prompts")
    if reply is None:
        return EXIT_OK
    prompts = items(reply, "prompts", "prompts", client.url)
    if not prompts:
        out("no prompts")
        return EXIT_OK
    rows = [[cell(p.get("id")), cell(p.get("server")), cell(_arguments(p.get("arguments")))] for p in prompts]
    _table(["ID", "SERVER", "ARGUMENTS"], rows, args.wide)
    return EXIT_OK


def _arguments(arguments: object) -> str:
    """``topic*, style``: each argument's name, ``*`` when it is required."""
    if not isinstance(arguments, list):
        return ""
    names = [
        f"{argument.get('name')}{'*' if argument.get('required') is True else ''}"
        for argument in arguments
        if isinstance(argument, dict)
    ]
    return ", ".join(names)


def cmd_read(client: AdminClient, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"uri": args.uri}
    if args.server:
        body["server"] = args.server
    reply = _in_turn(client, "resources/read", body)
    envelope = reply.data
    if not isinstance(envelope, dict) or not isinstance(envelope.get("ok"), bool):
        raise ClientError(f"the supervisor at {client.url} answered the read without a result envelope")
    if args.json:
        raw(reply.text)
    elif envelope["ok"]:
        for line in read_lines(envelope):
            out(line)
    return envelope_status(envelope, "the read")


def read_lines(envelope: dict[str, Any]) -> list[str]:
    """What a read's envelope shows: each text part as it is, each binary part named."""
    content = envelope.get("content")
    if not isinstance(content, list) or not content:
        text = envelope.get("text")
        return [text] if isinstance(text, str) and text else []
    lines = []
    for item in content:
        part = item.get("resource") if isinstance(item, dict) and item.get("type") == "resource" else item
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            lines.append(part["text"])
            continue
        mime = part.get("mimeType")
        name = cell(part.get("uri") or part.get("name") or part.get("type"))
        lines.append(f"[blob {name}{f' ({cell(mime)})' if isinstance(mime, str) else ''}]")
    return lines


HANDLERS: dict[str, Callable[[AdminClient, argparse.Namespace], int]] = {
    "resources": cmd_resources,
    "read": cmd_read,
    "prompts": cmd_prompts,
}
