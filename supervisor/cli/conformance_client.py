"""The MCP conformance suite's client under test: ``python -m supervisor.cli.conformance_client URL``.

``@modelcontextprotocol/conformance`` (npm) starts a mock server per client scenario
and runs this command with the server's URL appended as the last argument, the
scenario's name in ``MCP_CONFORMANCE_SCENARIO`` and, for auth scenarios, JSON in
``MCP_CONFORMANCE_CONTEXT``. We drive the scenario through the real supervisor: one
remote server (trusted, eager), a session, a turn, then the calls the scenario's
server publishes. Exit 0 when the scenario ran to completion, 1 with a one-line
reason when it could not, 2 on a usage error. Whether the run *conforms* is the
suite's verdict, not ours (it checks what the mock server saw).

Scenarios (releases 0.1.16 and 0.2.0-alpha.12; the full list is in docs/conformance.md):

* ``initialize``: handshake, list tools (none), done.
* ``tools_call``: every listed tool is called once with arguments made up from its
  ``inputSchema`` (``add_numbers {a, b}``).
* ``elicitation-sep1034-client-defaults``: the tool's server sends
  ``elicitation/create``; ``answer_server_request`` accepts it with the defaults.
* ``sep-2322-client-request-state`` (0.2.0): the tools answer "input required"
  (2026-07-28 era); the same handler answers the embedded ``elicitation/create`` and
  the connection retries each call with the answers and the echoed ``requestState``.
* ``sse-retry``: the tools/call answer stream closes before the answer; the transport
  must resume it with a GET carrying ``Last-Event-ID`` after the ``retry:`` delay.
* ``json-schema-2020-12-preservation`` (0.2.0): ``json_schema_echo`` is called with
  ``{"schema": …}``, the focal tool's ``input_schema`` as ``turn.listing()`` hands it
  on (the suite checks that ``$schema``, ``$defs``, ``$anchor``, ``allOf``/``anyOf``
  and ``if``/``then``/``else`` survived); the focal tool is called with arguments its
  schema accepts (``KNOWN_ARGUMENTS``), which our validation checks through its
  ``$ref``, ``allOf`` and ``if``/``then``/``else`` first.
* ``json-schema-ref-no-deref`` (0.2.0): the tool's ``inputSchema`` has a ``$ref`` to a
  network URI that must not be fetched; the tool is listed with a schema problem and
  skipped (``callable_tools``), the suite checks that nothing fetched the URI.
* ``http-custom-headers`` (0.2.0): the scenario's context (``toolCalls``) names the
  calls and their arguments (``context_calls``); the suite checks the ``Mcp-Param-*``
  headers each call carried (``actors/protocol/param_headers.py``).
* ``http-invalid-tool-headers`` (0.2.0): tools with a bad ``x-mcp-header`` are left
  out of the listing, so only ``valid_tool`` is called.
* ``auth/*``: the server has an ``oauth`` block made from ``MCP_CONFORMANCE_CONTEXT``
  (a pre-registered ``client_id``/``client_secret``, a ``private_key_pem`` for
  ``private_key_jwt``; the client-credentials flow for ``auth/client-credentials-*``) and
  our client ID metadata document URL; consent comes from a
  :class:`~actors.auth.authorizers.FollowRedirectAuthorizer` (the suite's authorization
  endpoint redirects at once, as a person's browser would after consenting).

Run ``.ci/conformance`` for the whole suite; results are in docs/conformance.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

import trio

from actors.auth.authorizers import FollowRedirectAuthorizer
from actors.connection.states import is_down
from actors.router.catalog import ToolEntry
from actors.spec import ServerSpec, Start
from supervisor.service import Supervisor
from supervisor.sessions.session import Session
from supervisor.settings.model import Config, ToolSearchSettings

SERVER = "conformance"
INIT_TIMEOUT_S = 10.0
CALL_TIMEOUT_S = 10.0
# The suite's own client timeout is 30 s; stay well inside it so we report a reason.
OVERALL_TIMEOUT_S = 25.0


# Tools that want back, as their "schema" argument, another tool's listed inputSchema.
ECHO_TOOLS = {"json_schema_echo": "json_schema_2020_12_tool"}
# Arguments for tools whose schema needs more than example_arguments makes up (its
# requirements live in allOf/anyOf and if/then/else, not in "required").
KNOWN_ARGUMENTS: dict[str, dict[str, Any]] = {
    "json_schema_2020_12_tool": {
        "name": "conformance",
        "contactMethod": "email",
        "email": "conformance@example.com",
    },
}


ToolCall: TypeAlias = tuple[str, Mapping[str, Any]]
"""A tool's name and the arguments to call it with."""


class ScenarioFailed(Exception):
    """The scenario could not be completed; the message is the one-line reason."""


CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def oauth_settings(scenario: str, context: Mapping[str, Any]) -> dict[str, str] | None:
    """The ``oauth`` block for an ``auth/*`` scenario (None for the others)."""
    if not scenario.startswith("auth/"):
        return None
    settings = {"client_metadata_url": CLIENT_METADATA_URL}
    for ours, theirs in (
        ("client_id", "client_id"),
        ("client_secret", "client_secret"),
        ("private_key", "private_key_pem"),
        ("signing_algorithm", "signing_algorithm"),
        ("idp_client_id", "idp_client_id"),
        ("id_token", "idp_id_token"),
        ("idp_token_endpoint", "idp_token_endpoint"),
        ("assertion", "valid_jwt"),
    ):
        value = context.get(theirs)
        if isinstance(value, str) and value:
            settings[ours] = value
    if scenario.startswith("auth/client-credentials"):
        settings["flow"] = "client_credentials"
    elif scenario.startswith(("auth/cross-app-access", "auth/enterprise-managed-authorization")):
        settings["flow"] = "cross_app_access"
    elif scenario.startswith("auth/wif-"):
        settings["flow"] = "jwt_bearer"
    return settings


def server_spec(url: str, oauth: Mapping[str, str] | None = None) -> ServerSpec:
    """The one remote server of a conformance run."""
    return ServerSpec(
        name=SERVER,
        type="remote",
        url=url,
        transport="auto",
        trusted=True,  # the suite's tools are called without asking anyone
        start=Start.EAGER,
        init_timeout_s=INIT_TIMEOUT_S,
        call_timeout_s=CALL_TIMEOUT_S,
        reconnect_schedule_s=(0.5, 1.0),
        shutdown_grace_s=1.0,
        ping_timeout_s=2.0,
        oauth=oauth,
    )


def conformance_config(url: str, oauth: Mapping[str, str] | None = None) -> Config:
    """A Config holding only the scenario's server, with every tool listed."""
    return Config(servers=(server_spec(url, oauth),), tool_search=ToolSearchSettings(enabled=False))


def example_value(schema: Any) -> Any:
    """A plausible value for a JSON Schema (its default, first enum member or example)."""
    if not isinstance(schema, Mapping):
        return None
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    for key in ("enum", "examples"):
        values = schema.get(key)
        if isinstance(values, list) and values:
            return values[0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "integer":
        return 1
    if kind == "number":
        return 1
    if kind == "boolean":
        return True
    if kind == "string":
        return "conformance"
    if kind == "array":
        return []
    if kind == "object" or "properties" in schema:
        return example_arguments(schema)
    return None


def example_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments for a tool: a value for every required property."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    required = schema.get("required")
    names = [n for n in required if n in properties] if isinstance(required, list) else []
    return {name: example_value(properties[name]) for name in names}


async def answer_server_request(server: str, method: str, params: Any) -> dict[str, Any] | None:
    """Elicitation: accept with each requested field's default (what the scenarios check);
    anything else is not handled (method not found)."""
    if method != "elicitation/create" or not isinstance(params, dict):
        return None
    schema = params.get("requestedSchema")
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    content = {
        name: prop["default"]
        for name, prop in properties.items()
        if isinstance(prop, dict) and "default" in prop
    }
    return {"action": "accept", "content": content}


async def _wait_ready(supervisor: Supervisor) -> None:
    """Wait (bounded) for the server to be serving; fail with its last error otherwise."""
    cell = supervisor.router.cell
    with trio.move_on_after(INIT_TIMEOUT_S):
        await cell.wait_until(
            lambda c: c.servers[SERVER].available or c.servers[SERVER].last_error is not None
        )
    view = cell.current.servers[SERVER]
    if not view.available:
        reason = view.last_error or f"not serving after {INIT_TIMEOUT_S:g} s (state {view.state.value})"
        raise ScenarioFailed(f"connect failed: {reason}")
    if is_down(view.state):
        raise ScenarioFailed(f"connect failed: server is {view.state.value}")


async def run_scenario(
    url: str,
    state_dir: str,
    only: Sequence[str] | None = None,
    oauth: Mapping[str, str] | None = None,
    calls: Sequence[ToolCall] | None = None,
) -> list[str]:
    """Drive one scenario: connect, list, call every listed tool (or those in ``only``,
    or the ``calls`` the scenario's context asks for); returns a line per step done,
    raises ScenarioFailed.

    Failures are raised only after the supervisor closed (not through its nurseries,
    which would wrap them in an exception group).
    """
    done: list[str] = []
    failure: str | None = None
    config = conformance_config(url, oauth)
    async with (
        Supervisor.open(
            config,
            state_dir=state_dir,
            server_requests=answer_server_request,
            client_capabilities={"elicitation": {}},
            authorizer=FollowRedirectAuthorizer() if oauth is not None else None,
        ) as supervisor,
        supervisor.session() as session,
    ):
        try:
            await _drive(supervisor, session, done, only, calls)
        except ScenarioFailed as failed:
            failure = str(failed)
    if failure is not None:
        raise ScenarioFailed(failure)
    return done


def callable_tools(
    tools: Sequence[ToolEntry],
) -> tuple[list[ToolEntry], list[tuple[ToolEntry, str]]]:
    """The tools to call, and those skipped with the reason: a tool whose schema has a
    problem (e.g. a ``$ref`` to a network URI, which is never fetched) stays listed but
    every call to it is refused by design, so calling it proves nothing. Scenarios that
    need a call check that it arrived (``tools_call``, ``json-schema-*``), so a schema
    wrongly found bad still fails them."""
    keep: list[ToolEntry] = []
    skipped: list[tuple[ToolEntry, str]] = []
    for entry in tools:
        problem = entry.schema.problem if entry.schema is not None else None
        if problem:
            skipped.append((entry, problem))
        else:
            keep.append(entry)
    return keep, skipped


async def _drive(
    supervisor: Supervisor,
    session: Session,
    done: list[str],
    only: Sequence[str] | None,
    calls: Sequence[ToolCall] | None = None,
) -> None:
    await _wait_ready(supervisor)
    done.append("initialized")
    turn = await session.begin_turn()
    tools: Sequence[ToolEntry] = [t for t in turn.tools if t.server == SERVER]
    done.append(f"listed {len(tools)} tool(s): {', '.join(t.name for t in tools) or '-'}")
    if only is not None:
        missing = sorted(set(only) - {t.name for t in tools})
        if missing:
            raise ScenarioFailed(f"tool(s) not listed by the server: {', '.join(missing)}")
        tools = [t for t in tools if t.name in only]
    listed = {item["id"]: item for item in turn.listing()}
    ids = {t.name: t.id for t in tools}
    tools, skipped = callable_tools(tools)
    done.extend(f"skipped {entry.name}: {problem}" for entry, problem in skipped)
    by_name = {entry.name: entry for entry in tools}
    if calls is not None:
        missing = sorted({name for name, _ in calls} - set(by_name))
        if missing:
            raise ScenarioFailed(f"the scenario calls tool(s) not listed: {', '.join(missing)}")
    planned = (
        [(by_name[name], dict(arguments)) for name, arguments in calls]
        if calls is not None
        else [(entry, _arguments_for(entry, listed, ids)) for entry in tools]
    )
    for entry, arguments in planned:
        result = await turn.call(entry.id, arguments)
        if not result.ok:
            error = result.error
            message = f"{error.code}: {error.message}" if error else "failed"
            raise ScenarioFailed(f"tools/call {entry.name} failed: {message}")
        done.append(f"called {entry.name}({json.dumps(arguments)}): {result.text[:120]!r}")


def context_calls(context: Mapping[str, Any]) -> list[ToolCall] | None:
    """The calls a scenario's context asks for (``toolCalls``: name and arguments, as
    in ``http-custom-headers``), or None when it names none. A null argument is left
    out: it stands for "not given" there, and our argument validation would refuse
    null for a parameter whose schema says boolean."""
    raw = context.get("toolCalls")
    if not isinstance(raw, list):
        return None
    calls: list[ToolCall] = []
    for call in raw:
        arguments = call.get("arguments") or {} if isinstance(call, dict) else None
        if isinstance(arguments, dict) and isinstance(call.get("name"), str):
            calls.append((call["name"], {k: v for k, v in arguments.items() if v is not None}))
    return calls


def _arguments_for(entry: ToolEntry, listed: Mapping[str, Any], ids: Mapping[str, str]) -> dict[str, Any]:
    """The arguments of one call: an echo tool gets the listed schema it asks for."""
    echoed = ECHO_TOOLS.get(entry.name)
    if echoed is not None:
        if echoed not in ids:
            raise ScenarioFailed(f"{entry.name} echoes {echoed}, which the server does not list")
        return {"schema": listed[ids[echoed]]["input_schema"]}
    return dict(KNOWN_ARGUMENTS.get(entry.name) or example_arguments(entry.input_schema))


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The suite passes only the URL; ``--call`` is for our own tests and for debugging."""
    parser = argparse.ArgumentParser(
        prog="python -m supervisor.cli.conformance_client",
        description="The MCP conformance suite's client under test (scenario in MCP_CONFORMANCE_SCENARIO).",
    )
    parser.add_argument(
        "--call",
        action="append",
        metavar="TOOL",
        help="call only this tool (repeatable; default: every tool the server lists)",
    )
    parser.add_argument("url", help="the scenario server's MCP endpoint (http:// or https://)")
    args = parser.parse_args(argv)
    if not args.url.startswith(("http://", "https://")):
        parser.error(f"not an http(s) URL: {args.url!r}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 done, 1 failed, 2 usage)."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as stop:  # argparse: usage error (2) or --help (0)
        return stop.code if isinstance(stop.code, int) else 2
    url: str = args.url
    only: list[str] | None = args.call
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "") or "(no scenario)"
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
    try:
        context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    except ValueError:
        context = {}
    context = context if isinstance(context, dict) else {}
    oauth = oauth_settings(scenario, context)
    calls = context_calls(context)

    async def run() -> list[str]:
        with tempfile.TemporaryDirectory(prefix="mcp-conformance-") as state_dir:
            with trio.move_on_after(OVERALL_TIMEOUT_S):
                return await run_scenario(url, state_dir, only, oauth, calls)
            raise ScenarioFailed(f"did not complete within {OVERALL_TIMEOUT_S:g} s")

    try:
        steps = trio.run(run)
    except ScenarioFailed as failed:
        print(f"{scenario}: {failed}", file=sys.stderr)
        return 1
    for step in steps:
        print(step)
    print(f"{scenario}: completed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
