"""``POST /mcp`` (``supervisor/gateway/http_app.py``) against the real server: what it
refuses and with which status (no token, a wrong one, a role without ``use_sessions``,
a foreign Origin, Host or target authority, a body over ``gateway.max_message_bytes``,
a content type the gateway does not look at, malformed JSON), what a body nested too
deeply and a version no one speaks are told, and a session's flow. The bytes of each
refusal are pinned by ``tests/golden/mcp_refusals.txt``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from actors.protocol.messages import META_PROTOCOL_VERSION, UNSUPPORTED_PROTOCOL_VERSION
from supervisor.gateway.results import PARSE_ERROR
from supervisor.settings.model import GatewaySettings, TokenGrant
from supervisor.web.roles import Role
from tests.gateway.test_gateway_stateless import meta
from tests.support.admin import ALICE, Http, Reply, admin_running, config_of, mini_spec
from tests.support.gateway_http import ACCEPT_BOTH, PROTOCOL, initialize, request
from tests.support.golden_config import DEEP

PEER = "peer-token-0123456789abc"
BOUND = 4096
LISTING = request(1, "tools/list")
PLAIN_LISTING = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
Case = Callable[[Http], Awaitable[Reply]]


def post(
    http: Http,
    body: Any = LISTING,
    headers: dict[str, str] | None = None,
    target: str = "/mcp",
    **how: Any,
) -> Awaitable[Reply]:
    raw = body if isinstance(body, bytes) else None
    return http.request(
        "POST",
        target,
        json=None if raw is not None else body,
        body=raw,
        headers={"Accept": ACCEPT_BOTH, **(headers or {})},
        **how,
    )


CASES: dict[str, tuple[int, Case]] = {
    "no token": (401, lambda http: post(http.as_(None))),
    "a wrong token": (401, lambda http: post(http.as_("not-a-token-at-all"))),
    "a control character in the token": (400, lambda http: post(http.as_("bad\x01token"))),
    "a role without use_sessions": (403, lambda http: post(http.as_(PEER))),
    "a foreign Origin": (403, lambda http: post(http, headers={"Origin": "http://evil.example"})),
    "Origin null": (403, lambda http: post(http, headers={"Origin": "null"})),
    "a foreign Host": (403, lambda http: post(http, host="evil.example")),
    "a foreign authority in the target": (403, lambda http: post(http, target="http://evil.example/mcp")),
    "a loopback authority in the target": (
        400,
        lambda http: post(http, target=f"http://{http.authority}/mcp"),
    ),
    "a body over the bound, by Content-Length": (413, lambda http: post(http, b"x" * (BOUND + 1))),
    "a body over the bound, chunked": (
        413,
        lambda http: post(http, b"{" + b" " * (BOUND + 10) + b"}", headers={"Transfer-Encoding": "chunked"}),
    ),
    "a content type the gateway does not read": (
        400,
        lambda http: post(http, PLAIN_LISTING, {"Content-Type": "text/plain"}),
    ),
    "malformed JSON": (400, lambda http: post(http, b'{"jsonrpc": ')),
    "JSON nested past the parser": (
        400,
        lambda http: post(http, b'{"jsonrpc": "2.0", "id": 1, "params": ' + DEEP + b"}"),
    ),
    "a batch": (400, lambda http: post(http, [LISTING])),
    "an unknown session": (404, lambda http: post(http, headers={"Mcp-Session-Id": "nope"})),
}


def config() -> Any:
    tokens: dict[str, TokenGrant | str] = {ALICE: "alice", PEER: TokenGrant("p", Role.PEER)}
    base = config_of(mini_spec("m"), tokens=tokens)
    return attrs.evolve(base, gateway=GatewaySettings(max_message_bytes=BOUND))


async def test_each_refusal_has_its_status(tmp_path: Path) -> None:
    async with admin_running(config(), tmp_path) as api:
        http = api.http(ALICE)
        with trio.fail_after(30):
            replies = {name: await case(http) for name, (_, case) in CASES.items()}
    for name, (status, _) in CASES.items():
        assert replies[name].status == status, (name, replies[name])
    assert replies["no token"].headers["www-authenticate"] == "Bearer"
    assert replies["no token"].json()["error"]["data"] == {"code": "unauthorized"}
    assert "roles" in replies["a role without use_sessions"].json()["error"]["data"]


async def test_a_session_runs_from_initialize_to_delete(tmp_path: Path) -> None:
    """initialize, initialized, a listing and a call, then DELETE, and the id is gone."""
    async with admin_running(config(), tmp_path) as api:
        http = api.http(ALICE)
        with trio.fail_after(20):
            opened = await post(http, initialize(0))
            assert (opened.status, opened.json()["result"]["protocolVersion"]) == (200, PROTOCOL)
            session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": PROTOCOL}
            notified = await post(http, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
            assert (notified.status, notified.body) == (202, b"")
            listed = await post(http, LISTING, session)
            assert "m_echo" in [tool["name"] for tool in listed.json()["result"]["tools"]]
            echo = request(2, "tools/call", {"name": "m_echo", "arguments": {"text": "hi"}})
            called = await post(http, echo, {**session, "Accept": "application/json"})
            assert called.headers["content-type"] == "application/json"
            assert called.json()["result"]["content"] == [{"type": "text", "text": "hi"}]
            assert (await http.request("DELETE", "/mcp", headers=session)).status == 204
            assert (await post(http, LISTING, session)).status == 404


async def test_a_body_nested_past_the_parser_is_told_so_not_that_it_is_not_json(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("m"), tokens={ALICE: "alice"}), tmp_path) as api:
        with trio.fail_after(20):
            deep = b"[" * 100_000 + b"]" * 100_000
            body = (
                b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": ' + deep + b"}}"
            )
            reply = await post(api.http(ALICE), body)
    error = reply.json()["error"]
    assert reply.status == 400 and error["code"] == PARSE_ERROR
    assert error["message"].startswith("the body is nested deeper than 1024 levels"), error


async def test_a_version_no_one_speaks_without_a_session_is_told_the_versions_we_speak(
    tmp_path: Path,
) -> None:
    """Not that it lacks a session: -32022, as the 2026-07-28 era answers it."""
    async with admin_running(config_of(mini_spec("m"), tokens={ALICE: "alice"}), tmp_path) as api:
        http = api.http(ALICE)
        with trio.fail_after(20):
            future = {**meta(), META_PROTOCOL_VERSION: "2027-01-01"}
            wanted = {"supported": ["2026-07-28"], "requested": "2027-01-01"}
            for params in ({"_meta": future}, None):  # in both, and in the header alone
                message = request(2, "tools/list", params)
                headers = {"MCP-Protocol-Version": "2027-01-01", "Mcp-Method": "tools/list"}
                reply = await post(http, message, headers)
                error = reply.json()["error"]
                assert reply.status == 400 and error["code"] == UNSUPPORTED_PROTOCOL_VERSION, reply
                assert error["data"] == wanted and "2026-07-28" in error["message"]
            # A version of the handshake era without a session: it needs one.
            lost = await post(http, LISTING, {"MCP-Protocol-Version": PROTOCOL})
            assert lost.status == 400 and "Mcp-Session-Id is missing" in lost.json()["error"]["message"]
