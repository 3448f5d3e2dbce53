"""The OpenAPI document matches what is served, and no request gets a 500.

The fuzz test runs the real server in a thread of its own and lets hypothesis throw
requests at it with ``http.client``: methods (also ones no route has), paths built
from the route table with real, random and hostile ids, JSON bodies shaped like the
real ones, random JSON, random bytes, and random Accept / Content-Type / Origin /
Authorization / Host headers. Every answer must be below 500 and, when it says
JSON, be JSON; an error must have the ``{"error": {"code", "message"}}`` shape.
"""

from __future__ import annotations

import http.client
import json
import re
import string
import urllib.parse
from collections import Counter
from pathlib import Path
from typing import Any

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.admin.openapi import document
from supervisor.server.apps import compose
from supervisor.server.apps import served as routes_of
from supervisor.service import Supervisor
from supervisor.web.routes import ROUTES, Route
from tests.support.admin import (
    ALICE,
    BOB,
    OPERATIONS,
    TOKENS,
    admin_in_thread,
    admin_running,
    config_of,
    mini_spec,
    path_of,
)


def test_route_table_has_no_duplicates_and_documents_every_route() -> None:
    keys = [(route.method, route.path) for route in ROUTES]
    assert len(keys) == len(set(keys))
    assert len({route.operation for route in ROUTES}) == len(ROUTES)
    paths = document()["paths"]
    assert {(method.upper(), path) for path, ops in paths.items() for method in ops} == set(keys)
    for route in ROUTES:
        operation = paths[route.path][route.method.lower()]
        parameters = operation.get("parameters", [])
        assert [p["name"] for p in parameters if p["in"] == "path"] == list(route.parameters)
        assert [p["name"] for p in parameters if p["in"] == "query"] == list(route.query)
        assert str(route.status) in operation["responses"]
    assert all(
        route.path.startswith(("/v1/", "/.well-known/")) or route.path in ("/metrics", "/mcp")
        for route in ROUTES
    )


async def test_every_served_route_is_documented_and_every_documented_one_served(tmp_path: Path) -> None:
    async with Supervisor.open(config_of(), state_dir=tmp_path) as sup:
        served = routes_of(compose(sup, bind_is_loopback=True))
    documented = {(route.method, route.rule): route.operation for route in ROUTES}
    assert dict(served) == documented


async def test_every_documented_operation_answers_on_the_wire(tmp_path: Path) -> None:
    """Not a routing 404 or a 405 for any documented method and path."""
    async with admin_running(config_of(mini_spec("mini")), tmp_path) as api:
        http = api.http()
        ids = {"sid": "s", "tid": "t", "approval_id": "a", "rid": "r", "name": "mini"}
        with trio.fail_after(15):
            for route in ROUTES:
                if route.operation == "events":
                    reply = await http.request("HEAD", route.path)  # the stream itself never ends
                else:
                    body = {"tool": "mini_echo", "query": "x", "decision": "deny"}
                    reply = await http.request(route.method, path_of(route.operation, **ids), json=body)
                assert reply.status != 405, route
                if route.path == "/mcp":  # no session here: refused, saying why, as JSON-RPC
                    assert reply.status == 400 and reply.json()["error"]["message"], reply
                elif reply.status == 404:
                    assert reply.json()["error"]["message"].startswith("no "), (route, reply)
                elif route.operation == "reload_config":  # its config was built here, not read
                    assert reply.json()["error"]["code"] == "no_config_file", reply
                elif route.operation == "oauth_callback":  # no sign-in waits for this state: a page says so
                    assert reply.status == 400 and "unknown, used already" in reply.body.decode(), reply
                elif route.operation == "forget_remembered":  # no ?permission=: a 400 saying so
                    assert reply.status == 400 and "permission" in reply.json()["error"]["message"], reply
                elif route.websocket:  # plain HTTP to a WebSocket: 426, saying so
                    assert reply.status == 426 and reply.json()["error"]["code"] == "upgrade_required", reply
                else:
                    assert reply.status < 300, (route, reply)


# ----------------------------------------------------------------------- fuzz


def _dumps(value: Any) -> bytes:
    # The stdlib: it also writes integers beyond 64 bits, which orjson refuses to.
    return json.dumps(value).encode()


SAFE = string.ascii_letters + string.digits + "-._~"
TOOLS = ("mini_echo", "mini_add", "mini_fail", "mini_image", "mini_nope", "tool_search", "")
METHODS = ["GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _either(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A field value: mostly a good one, sometimes any JSON at all."""
    return st.one_of(good, good, json_values)


# Bodies shaped like each route's real ones, with fields of the right and wrong types.
SHAPES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "create_session": st.fixed_dictionaries(
        {},
        optional={
            "host_tools": _either(st.integers(-2, 100)),
            "pinned": _either(st.lists(st.sampled_from(TOOLS), max_size=3)),
        },
    ),
    "call_tool": st.fixed_dictionaries(
        {"tool": _either(st.sampled_from(TOOLS))},
        optional={
            "arguments": _either(
                st.fixed_dictionaries(
                    {}, optional={k: _either(st.integers(0, 9)) for k in ("a", "b", "text", "query")}
                )
            ),
            "request_id": _either(st.text(SAFE, min_size=1, max_size=10)),
        },
    ),
    "tool_search": st.fixed_dictionaries({"query": _either(st.text(max_size=20))}),
    "answer_approval": st.fixed_dictionaries(
        {"decision": _either(st.sampled_from(["allow", "deny"]))},
        optional={"remember": _either(st.sampled_from(["once", "session", "always"]))},
    ),
}
any_body = st.one_of(
    st.none(),
    json_values.map(_dumps),
    st.binary(max_size=300),
    st.sampled_from([b"{", b"[]", b"null", b'{"tool": "mini_echo"', b"\xff\xfe", b"{}" * 50]),
)

# Most requests pass the gates, so that the fuzz reaches the handlers; some do not.
GATES: dict[str, dict[str, str]] = {
    "alice": {"Authorization": f"Bearer {ALICE}"},
    "bob": {"Authorization": f"Bearer {BOB}"},
    "anonymous": {},
    "wrong token": {"Authorization": "Bearer nope"},
    "not bearer": {"Authorization": f"Basic {ALICE}"},
    "evil origin": {"Authorization": f"Bearer {ALICE}", "Origin": "http://evil.example"},
    "null origin": {"Authorization": f"Bearer {ALICE}", "Origin": "null"},
    "loopback origin": {"Authorization": f"Bearer {ALICE}", "Origin": "http://localhost:3000"},
    "evil host": {"Authorization": f"Bearer {ALICE}", "Host": "evil.example"},
}
gates = st.sampled_from(["alice"] * 12 + list(GATES))
extra_headers = st.fixed_dictionaries(
    {},
    optional={
        "Accept": st.sampled_from(
            ["application/json", "text/event-stream", "*/*", "text/event-stream;q=0", "x/y"]
        ),
        "Content-Type": st.sampled_from(["application/json", "text/plain", "multipart/form-data", "x"]),
        "X-Anything": st.text(SAFE + " ", max_size=20),
    },
)


def _id(name: str, real: list[tuple[str, str]]) -> st.SearchStrategy[str]:
    """A value for path parameter ``name``: mostly one that exists, sometimes not."""
    known = {
        "sid": st.sampled_from([sid for sid, _ in real]),
        "tid": st.sampled_from([tid for _, tid in real]),
        "name": st.just("mini"),
    }.get(name, st.sampled_from(["apr-1", "req-1"]))
    hostile = st.sampled_from(["..", "%2e%2e", "a" * 300, "\u00e9", " ", "mini", "0"])
    return st.one_of(known, known, known, hostile, st.text(SAFE, max_size=12))


def _requests(real: list[tuple[str, str]]) -> st.SearchStrategy[tuple[str, str, bytes | None]]:
    """(method, path, body): mostly a route of the table with its own method, real or
    hostile ids and a body shaped like its real one; sometimes another method, a body
    of anything, or a path that is no route at all."""
    turns = dict(real)

    @st.composite
    def from_table(draw: st.DrawFn) -> tuple[str, str, bytes | None]:
        route = draw(st.sampled_from([r for r in ROUTES if r.operation != "events"]))
        ids = {name: draw(_id(name, real)) for name in route.parameters}
        if "tid" in ids and ids["sid"] in turns:  # mostly the turn of that session
            ids["tid"] = draw(st.sampled_from([turns[ids["sid"]], ids["tid"]]))
        method = draw(st.sampled_from([route.method] * 6 + METHODS))
        shape = SHAPES.get(route.operation)
        body = draw(any_body if shape is None else st.one_of(shape.map(_dumps), shape.map(_dumps), any_body))
        return method, path_of(route.operation, **ids), body

    junk = st.tuples(
        st.sampled_from(METHODS),
        st.lists(st.text(SAFE + "%", max_size=10), max_size=5).map(lambda parts: "/" + "/".join(parts))
        | st.sampled_from(["/v1/", "/v1//servers", "/", "*", "/v1/events/x"]),
        any_body,
    )
    return st.one_of(from_table(), from_table(), from_table(), junk)


def _check(
    connection: http.client.HTTPConnection, method: str, path: str, body: bytes | None, sent: dict[str, str]
) -> int:
    """Send one request; check the answer's status and shape; return the status."""
    connection.putrequest(method, path, skip_host="Host" in sent, skip_accept_encoding=True)
    for name, value in sent.items():
        connection.putheader(name, value)
    if body is not None:
        connection.putheader("Content-Length", str(len(body)))
    connection.endheaders(body)
    reply = connection.getresponse()
    status = reply.status
    media = (reply.getheader("Content-Type") or "").split(";")[0]
    assert status < 500, (method, path, sent, body, status, reply.read()[:300])
    if method == "HEAD" or path == "/v1/events":
        return status  # no body, or one that never ends
    data = reply.read()
    if media == "application/json" and data:
        decoded = json.loads(data)
        if status >= 400 and path.split("?")[0] == "/mcp":  # a JSON-RPC error object
            assert set(decoded) == {"jsonrpc", "id", "error"} and decoded["error"]["message"], decoded
        elif status >= 400:
            assert set(decoded) == {"error"}, decoded
            assert {"code", "message"} <= set(decoded["error"]) <= {"code", "message", "roles"}, decoded
    elif media == "text/event-stream":  # a streamed call: its order holds whatever happened
        names = re.findall(rb"^event: (\S+)$", data, re.MULTILINE)
        assert names[0] == b"request_received" and names[-2:] == [b"result", b"done"], names
    elif path.split("?")[0] == "/v1/oauth/callback":  # the sign-in callback's page, for a browser
        assert media == "text/html" and data.startswith(b"<!doctype html>"), (status, media, data)
    elif status >= 400:
        raise AssertionError(f"a non-JSON error: {status} {media} {data[:200]!r}")
    return status


def _send(authority: str, method: str, path: str, body: bytes | None, sent: dict[str, str]) -> int:
    connection = http.client.HTTPConnection(authority, timeout=15)
    try:
        return _check(connection, method, path, body, sent)
    finally:
        connection.close()


def _fuzz_route(
    authority: str,
    route: Route,
    ids: dict[str, str],
    shape: st.SearchStrategy[dict[str, Any]],
    statuses: Counter[int],
) -> None:
    path = path_of(route.operation, **{k: v for k, v in ids.items() if k in route.parameters})

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(body=st.one_of(shape.map(_dumps), shape.map(_dumps), any_body), extra=extra_headers)
    def route_request(body: bytes | None, extra: dict[str, str]) -> None:
        statuses[_send(authority, route.method, path, body, {**extra, **GATES["alice"]})] += 1

    route_request()


def test_fuzzed_requests_never_get_a_server_error(tmp_path: Path) -> None:
    config = config_of(mini_spec("mini"), tokens=TOKENS, approval_timeout_s=0.2)
    with admin_in_thread(config, tmp_path) as url:
        authority = urllib.parse.urlsplit(url).netloc
        setup = http.client.HTTPConnection(authority, timeout=10)
        auth = {"Authorization": f"Bearer {ALICE}", "Content-Type": "application/json"}
        real: list[tuple[str, str]] = []  # (session, turn); several, as the fuzz deletes some
        for _ in range(5):
            setup.request("POST", "/v1/sessions", body=b"{}", headers=auth)
            sid = json.loads(setup.getresponse().read())["session_id"]
            setup.request("POST", f"/v1/sessions/{sid}/turns", headers=auth)
            real.append((sid, json.loads(setup.getresponse().read())["turn_id"]))
        setup.close()
        statuses: Counter[int] = Counter()

        @settings(
            max_examples=250,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        )
        @given(request=_requests(real), gate=gates, extra=extra_headers)
        def any_request(request: tuple[str, str, bytes | None], gate: str, extra: dict[str, str]) -> None:
            method, path, body = request
            statuses[_send(authority, method, path, body, {**extra, **GATES[gate]})] += 1

        any_request()

        # Then each route that takes a body, with its own method and a valid token, so
        # that the bodies reach its handler rather than bounce off the gates.
        ids = {"sid": real[-1][0], "tid": real[-1][1], "approval_id": "apr-1"}
        for operation, shape in SHAPES.items():
            _fuzz_route(authority, OPERATIONS[operation], ids, shape, statuses)

        # The fuzz got past every gate and into the handlers, not only bounced off them.
        assert {200, 400, 401, 403, 404, 405} <= set(statuses), statuses
        assert statuses[201] + statuses[202] + statuses[204] > 0, statuses
