"""``POST /mcp`` on the lean path (``admin/fast_mcp.py``) answers exactly as Quart's
route does: the same refusals (no token, a wrong one, a role without ``use_sessions``,
a foreign Origin, Host or target authority, a body over ``gateway.max_message_bytes``, a content type
the gateway does not look at, malformed JSON), byte for byte with the same headers,
and the same session flow. Each case runs against the real admin server twice, once
with the lean path and once with Quart serving ``/mcp`` (the server's wrapper
replaced by the identity), and the two answers are compared."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from supervisor.admin import fast_mcp, server
from supervisor.settings.model import GatewaySettings, TokenGrant
from supervisor.web.roles import Role
from tests.support.admin import ALICE, Http, Reply, admin_running, config_of, mini_spec
from tests.support.gateway_http import ACCEPT_BOTH, PROTOCOL, initialize, request

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
    "a batch": (400, lambda http: post(http, [LISTING])),
    "an unknown session": (404, lambda http: post(http, headers={"Mcp-Session-Id": "nope"})),
}


def comparable(reply: Reply) -> tuple[int, dict[str, str], bytes]:
    headers = {name: value for name, value in reply.headers.items() if name != "date"}
    return reply.status, headers, reply.body


@attrs.define
class QuartCalls:
    """Counts the ``POST /mcp`` that reached the Quart app behind the lean path."""

    count: int = 0


def serve_with(monkeypatch: pytest.MonkeyPatch, lean: bool, calls: QuartCalls) -> None:
    def wrap(app: Any) -> Any:
        if not lean:
            return app
        wrapped = fast_mcp.lean_mcp(app)
        quart = wrapped.app

        async def counted(scope: Any, receive: Any, send: Any) -> None:
            calls.count += (
                scope["type"] == "http" and scope["method"] == "POST" and scope["path"].endswith("/mcp")
            )
            await quart(scope, receive, send)

        wrapped.app = counted  # type: ignore[assignment]
        return wrapped

    monkeypatch.setattr(server, "lean_mcp", wrap)


def config() -> Any:
    tokens: dict[str, TokenGrant | str] = {ALICE: "alice", PEER: TokenGrant("p", Role.PEER)}
    base = config_of(mini_spec("m"), tokens=tokens)
    return attrs.evolve(base, gateway=GatewaySettings(max_message_bytes=BOUND))


async def answers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, lean: bool
) -> tuple[dict[str, Reply], int]:
    calls = QuartCalls()
    serve_with(monkeypatch, lean, calls)
    async with admin_running(config(), tmp_path / ("lean" if lean else "quart")) as api:
        http = api.http(ALICE)
        replies = {name: await case(http) for name, (_, case) in CASES.items()}
        assert (await http.request("GET", "/v1/health")).status == 200  # through Quart either way
    return replies, calls.count


async def test_the_lean_path_refuses_exactly_what_quarts_route_refuses(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with trio.fail_after(30):
        quart, _ = await answers(monkeypatch, tmp_path, lean=False)
        lean, reached_quart = await answers(monkeypatch, tmp_path, lean=True)
    for name, (status, _) in CASES.items():
        assert quart[name].status == status, (name, quart[name])
        assert comparable(lean[name]) == comparable(quart[name]), name
    assert quart["no token"].headers["www-authenticate"] == "Bearer"
    assert quart["no token"].json()["error"]["data"] == {"code": "unauthorized"}
    assert "roles" in quart["a role without use_sessions"].json()["error"]["data"]
    assert reached_quart == 2  # only the absolute-form targets: Quart routes those


async def session_flow(http: Http) -> list[tuple[int, Any]]:
    """initialize, initialized, a listing and a call (JSON and SSE), then DELETE."""
    opened = await post(http, initialize(0))
    sid = opened.headers["mcp-session-id"]
    session = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": PROTOCOL}
    steps = [(opened.status, opened.json()["result"]["protocolVersion"])]
    notified = await post(http, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    steps.append((notified.status, notified.body))
    listed = await post(http, LISTING, session)
    steps.append((listed.status, sorted(tool["name"] for tool in listed.json()["result"]["tools"])))
    echo = request(2, "tools/call", {"name": "m_echo", "arguments": {"text": "hi"}})
    for accept in ("application/json", ACCEPT_BOTH):
        called = await post(http, echo, {**session, "Accept": accept})
        steps.append((called.status, called.headers["content-type"], called.json()["result"]["content"]))
    ended = await http.request("DELETE", "/mcp", headers=session)
    steps.append((ended.status, (await post(http, LISTING, session)).status))
    return steps


async def test_a_session_runs_the_same_on_both_paths(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    runs = []
    for lean in (False, True):
        calls = QuartCalls()
        serve_with(monkeypatch, lean, calls)
        async with admin_running(config(), tmp_path / str(lean)) as api:
            with trio.fail_after(20):
                runs.append(await session_flow(api.http(ALICE)))
        assert calls.count == 0
    assert runs[0] == runs[1]
    assert runs[0][-1] == (204, 404)
