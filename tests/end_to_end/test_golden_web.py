"""Golden answers of the web tier over HTTP, byte for byte, before it is rewritten.

One real ``mcp-supervisor serve`` (``golden_serve.Serve``) answers requests
written on a socket exactly as a client sends them; each answer (status line, every
header but ``Date``, the body) is recorded, masked (``golden_files.Masker``)
and compared with a file under ``tests/golden/``:

- ``mcp_handshake.txt``: a handshake-era session on ``/mcp``, POST, GET and DELETE;
- ``mcp_new_era.txt``: 2026-07-28 requests (no session; ``Mcp-Method``/``Mcp-Name``);
- ``mcp_refusals.txt``: the cases of ``tests/gateway/test_gateway_http_refusals.py``;
- ``mcp_edges.txt``: what a rewrite most likely breaks (HTTP/1.0, absolute-form
  targets, other methods and paths, upgrades, content types, bodies over the bound);
- ``admin_targets.txt``: the cases of ``tests/server/test_admin_targets.py`` and the
  refusals made before the app runs.

A rewrite must reproduce them; a change meant to alter what users see re-records on
purpose and the diff is reviewed with it:

    MCP_SUPERVISOR_UPDATE_GOLDENS=1 .venv/bin/python -m pytest tests/end_to_end/test_golden_web.py

Nothing here imports ``supervisor``: every module of it is going to move.
"""

from __future__ import annotations

from typing import Any

from tests.support.golden_config import ALICE, BOUND, DEEP, PEER
from tests.support.golden_files import Golden
from tests.support.golden_http import ACCEPT_BOTH, UPGRADE, Answer, Recorder, http_request, mcp_post
from tests.support.golden_messages import CLIENT_INFO, INITIALIZE, INITIALIZED, NEW_ERA, PROTOCOL, rpc
from tests.support.golden_serve import Serve, serve

__all__ = ["serve"]  # the module's fixture

RERECORD = "tests/end_to_end/test_golden_web.py"


def call(request_id: Any, tool: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    return rpc(request_id, "tools/call", params)


class Session(Recorder):
    """Requests of one handshake-era session."""

    def __init__(self, serve: Serve, golden: Golden) -> None:
        super().__init__(serve.address, golden)
        self.authority = serve.authority
        self.id = ""

    def headers(self, *extra: tuple[str, str], version: str | None = PROTOCOL) -> list[tuple[str, str]]:
        versions = [("MCP-Protocol-Version", version)] if version is not None else []
        return [("Mcp-Session-Id", self.id), *versions, *extra]

    def post(
        self, title: str, message: Any, *, accept: str = ACCEPT_BOTH, version: str | None = PROTOCOL
    ) -> Answer:
        headers = self.headers(version=version)
        return self.send(title, mcp_post(self.authority, message, headers=headers, accept=accept))


def test_a_handshake_era_session_on_mcp(serve: Serve) -> None:
    golden = serve.golden(
        "mcp_handshake",
        "A handshake-era (2025-11-25) session on /mcp: POST, GET (streams), DELETE.",
        RERECORD,
    )
    session = Session(serve, golden)
    host = serve.authority
    opened = session.send("initialize opens a session", mcp_post(host, INITIALIZE))
    sid = opened.header("mcp-session-id")
    assert sid is not None, opened
    session.id = sid

    session.post("notifications/initialized", INITIALIZED)
    session.post("tools/list", rpc(1, "tools/list"))
    echo = call(2, "mini_echo", {"text": "hi"})
    session.post("tools/call, Accept: application/json (always JSON)", echo, accept="application/json")
    slow = call(3, "mini_sleep", {"seconds": 0.2})
    session.post("tools/call that outlasts the 50 ms window, Accept: both (SSE)", slow)
    progress = call(4, "mini_progress", {"steps": 2, "interval": 0.01}, progressToken="p-1")
    session.post("tools/call with progress, Accept: both (SSE)", progress)
    session.post("a request answered with an error", rpc(5, "no/such/method"))
    session.post("ping without MCP-Protocol-Version", rpc(6, "ping"), version=None)
    session.post("MCP-Protocol-Version 2025-03-26 reads as not said", rpc(7, "ping"), version="2025-03-26")
    session.post("another MCP-Protocol-Version", rpc(8, "ping"), version="2025-06-18")

    def get(title: str, *extra: tuple[str, str], accept: str = "text/event-stream", stream: int = 0) -> None:
        headers = [("Accept", accept), *session.headers(*extra)]
        session.send(title, http_request("GET", "/mcp", host, token=ALICE, headers=headers), stream=stream)

    get("GET /mcp opens the standalone stream (first event read, then the client hangs up)", stream=1)
    get("GET /mcp with Last-Event-ID of the slow call's stream (the rest of it)", ("Last-Event-ID", "2-0"))
    get("GET /mcp with Last-Event-ID after that stream's response", ("Last-Event-ID", "2-1"))
    get(
        "GET /mcp with Last-Event-ID of tools/list's stream (answered as JSON, kept all the same)",
        ("Last-Event-ID", "1-0"),
    )
    get("GET /mcp with Last-Event-ID naming no stream", ("Last-Event-ID", "9-0"))
    get("GET /mcp with a Last-Event-ID that is not ours", ("Last-Event-ID", "nonsense"))
    get("GET /mcp without Accept: text/event-stream", accept="application/json")
    no_session = [("Accept", "text/event-stream")]
    session.send(
        "GET /mcp without Mcp-Session-Id",
        http_request("GET", "/mcp", host, token=ALICE, headers=no_session),
    )
    session.send(
        "POST /mcp without Mcp-Session-Id, not initialize",
        mcp_post(host, rpc(9, "tools/list")),
    )
    session.send(
        "POST /mcp with an unknown Mcp-Session-Id",
        mcp_post(host, rpc(10, "tools/list"), headers=[("Mcp-Session-Id", "0123456789abcdef")]),
    )
    delete = http_request("DELETE", "/mcp", host, token=ALICE, headers=session.headers())
    session.send("DELETE /mcp ends the session", delete)
    session.send("DELETE /mcp of the same session again", delete)
    session.post("POST with the ended session's id", rpc(11, "tools/list"))
    get("GET with the ended session's id")
    golden.check()


def meta(version: str = NEW_ERA) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def new_era(
    request_id: Any,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    version: str = NEW_ERA,
    **extra: Any,
) -> dict[str, Any]:
    """A 2026-07-28 request: ``_meta`` (of ``version``, ``extra`` merged in) in its params."""
    return rpc(request_id, method, {**(params or {}), "_meta": {**meta(version), **extra}})


def test_new_era_requests_on_mcp(serve: Serve) -> None:
    out = serve.recorder(
        "mcp_new_era",
        "2026-07-28 requests on /mcp: no session; MCP-Protocol-Version, Mcp-Method and Mcp-Name.",
        RERECORD,
    )

    def post(
        title: str, message: Any, *names: str, accept: str = ACCEPT_BOTH, version: str | None = NEW_ERA
    ) -> None:
        """``names``: ``Mcp-Method`` then ``Mcp-Name`` (fewer: left out)."""
        headers = [("MCP-Protocol-Version", version)] if version is not None else []
        headers += list(zip(("Mcp-Method", "Mcp-Name"), names, strict=False))
        out.send(title, mcp_post(serve.authority, message, headers=headers, accept=accept))

    post("server/discover", new_era(1, "server/discover"), "server/discover")
    post("tools/list", new_era(2, "tools/list"), "tools/list")
    echo = new_era(3, "tools/call", {"name": "mini_echo", "arguments": {"text": "hi"}})
    post("tools/call, Accept: application/json", echo, "tools/call", "mini_echo", accept="application/json")
    post("tools/call, Accept: both (JSON: the response comes first)", echo, "tools/call", "mini_echo")
    progress = new_era(
        4,
        "tools/call",
        {"name": "mini_progress", "arguments": {"steps": 2, "interval": 0.01}},
        progressToken=7,
    )
    post("tools/call with progress, Accept: both (SSE)", progress, "tools/call", "mini_progress")
    post(
        "tools/call with progress, Accept: application/json only",
        progress,
        "tools/call",
        "mini_progress",
        accept="application/json",
    )
    unknown = new_era(5, "tools/call", {"name": "nope_nothing", "arguments": {}})
    post("tools/call of an unknown tool", unknown, "tools/call", "nope_nothing")
    post("a missing Mcp-Method", new_era(6, "tools/list"))
    post("a missing Mcp-Name", echo, "tools/call")
    post("a mismatching Mcp-Name", echo, "tools/call", "mini_add")
    post("a mismatching Mcp-Method", new_era(7, "tools/list"), "prompts/list")
    post("Mcp-Name on a method that names nothing", new_era(8, "tools/list"), "tools/list", "x")
    post("no MCP-Protocol-Version header", new_era(9, "tools/list"), "tools/list", version=None)
    versions = new_era(10, "tools/list", version="2027-01-01")
    post("MCP-Protocol-Version differs from _meta's", versions, "tools/list")
    post("a version no one speaks, in both", versions, "tools/list", version="2027-01-01")
    post("no _meta", rpc(11, "tools/list"), "tools/list")
    post("initialize, removed in this era", new_era(12, "initialize"), "initialize")
    post("an unknown method", new_era(13, "no/such/method"), "no/such/method")
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}}
    post("a notification", note, "notifications/cancelled")
    out.golden.check()


LISTING = rpc(1, "tools/list")
PLAIN_LISTING = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'


def test_the_refusals_of_post_mcp(serve: Serve) -> None:
    """``CASES`` of ``tests/gateway/test_gateway_http_refusals.py``, sent as that test sends them (a
    raw body has no Content-Type); its session flow is ``mcp_handshake.txt``'s."""
    out = serve.recorder(
        "mcp_refusals",
        "POST /mcp refusals: the cases of tests/gateway/test_gateway_http_refusals.py (its session flow is\n"
        "in mcp_handshake.txt: initialize, initialized, tools/list, calls, DELETE, then 404).",
        RERECORD,
    )
    host = serve.authority

    def post(title: str, body: Any = LISTING, **how: Any) -> None:
        how.setdefault("content_type", None if isinstance(body, bytes) else "application/json")
        out.send(title, mcp_post(how.pop("host", host), body, **how))

    post("no token", token=None)
    post("a wrong token", token="not-a-token-at-all")
    post("a control character in the token", token="bad\x01token")
    post("a role without use_sessions", token=PEER)
    post("a foreign Origin", headers=[("Origin", "http://evil.example")])
    post("Origin null", headers=[("Origin", "null")])
    post("a foreign Host", host="evil.example")
    post("a foreign authority in the target", target="http://evil.example/mcp")
    post("a loopback authority in the target", target=f"http://{host}/mcp")
    post("a body over the bound, by Content-Length", b"x" * (BOUND + 1))
    post("a body over the bound, chunked", b"{" + b" " * (BOUND + 10) + b"}", chunked=True)
    post("a content type the gateway does not read", PLAIN_LISTING, content_type="text/plain")
    post("malformed JSON", b'{"jsonrpc": ')
    post("JSON nested past the parser", b'{"jsonrpc": "2.0", "id": 1, "params": ' + DEEP + b"}")
    post("a batch", [LISTING])
    post("an unknown session", headers=[("Mcp-Session-Id", "nope")])
    out.golden.check()


def test_the_edges_of_mcp(serve: Serve) -> None:
    out = serve.recorder(
        "mcp_edges",
        "/mcp at its edges: HTTP/1.0, absolute-form targets, other methods and paths, a query,\n"
        "WebSocket upgrades, content types, bodies at and over gateway.max_message_bytes.",
        RERECORD,
    )
    host = serve.authority

    def open_session(title: str, **how: Any) -> list[tuple[str, str]]:
        opened = out.send(title, mcp_post(host, INITIALIZE, **how))
        sid = opened.header("mcp-session-id")
        assert sid is not None, opened
        return [("Mcp-Session-Id", sid), ("MCP-Protocol-Version", PROTOCOL)]

    def listen(session: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return [("Accept", "text/event-stream"), *session]

    # HTTP/1.0: Quart's route, not the lean path.
    session = open_session("HTTP/1.0 POST initialize", version="1.0")
    out.send("HTTP/1.0 POST initialized", mcp_post(host, INITIALIZED, headers=session, version="1.0"))
    echo = call(2, "mini_echo", {"text": "1.0"})
    out.send("HTTP/1.0 POST tools/call", mcp_post(host, echo, headers=session, version="1.0"))
    out.send("HTTP/1.0 POST without Host", mcp_post(None, rpc(3, "ping"), headers=session, version="1.0"))
    out.send(
        "HTTP/1.0 GET /mcp (first event read, then the client hangs up)",
        http_request("GET", "/mcp", host, token=ALICE, headers=listen(session), version="1.0"),
        stream=1,
    )
    raw = http_request("DELETE", "/mcp", host, token=ALICE, headers=session, version="1.0")
    out.send("HTTP/1.0 DELETE /mcp", raw)
    out.send("HTTP/1.0 DELETE /mcp again", raw)
    listing = mcp_post(host, LISTING, headers=session, version="1.0")
    out.send("HTTP/1.0 POST with the deleted session", listing)

    # Absolute-form targets: Quart's route too.
    for authority in (host, f"localhost:{serve.port}"):
        target = f"http://{authority}/mcp"
        session = open_session(f"POST {target} (initialize)", target=target)
        out.send(f"POST {target} (tools/call)", mcp_post(host, echo, headers=session, target=target))
        out.send(
            f"HTTP/1.0 POST {target} (tools/call)",
            mcp_post(host, echo, headers=session, target=target, version="1.0"),
        )
        get = http_request("GET", target, host, token=ALICE, headers=listen(session))
        out.send(f"GET {target} (first event read, then the client hangs up)", get, stream=1)
        out.send(f"DELETE {target}", http_request("DELETE", target, host, token=ALICE, headers=session))
    foreign = "http://evil.example/mcp"
    out.send(f"POST {foreign}", mcp_post(host, INITIALIZE, target=foreign))
    out.send(f"GET {foreign}", http_request("GET", foreign, host, token=ALICE, headers=listen(session)))
    out.send(f"DELETE {foreign}", http_request("DELETE", foreign, host, token=ALICE, headers=session))

    # Methods /mcp does not serve, and paths next to it.
    session = open_session("a session for the rest")
    for method in ("PUT", "PATCH"):
        out.send(f"{method} /mcp", http_request(method, "/mcp", host, token=ALICE, body=PLAIN_LISTING))
    head = http_request("HEAD", "/mcp", host, token=ALICE, headers=listen(session))
    out.send("HEAD /mcp", head, head_only=True)
    out.send("OPTIONS /mcp", http_request("OPTIONS", "/mcp", host, token=ALICE))
    out.send("OPTIONS /mcp, no token", http_request("OPTIONS", "/mcp", host))
    out.send("OPTIONS * (asterisk-form)", http_request("OPTIONS", "*", host, token=ALICE))
    for target in ("/mcp/", "/mcpx", "/MCP", "//mcp", "/mcp%2F", "/%6Dcp", "/mcp?x=1", "/mcp?"):
        out.send(f"POST {target}", mcp_post(host, LISTING, target=target, headers=session))

    # WebSocket upgrades where there is no socket.
    for target in ("/mcp", "/v1/nowhere"):
        raw = http_request("GET", target, host, token=ALICE, headers=UPGRADE)
        out.send(f"a WebSocket upgrade to {target}", raw)

    # Content types and bodies, in a session (without one, every POST is refused for that).
    for content_type in ("text/plain", None, "application/json; charset=utf-8", "APPLICATION/JSON", ""):
        shown = "no Content-Type" if content_type is None else f"Content-Type {content_type!r}"
        listed = mcp_post(
            host, LISTING, content_type=content_type, headers=session, accept="application/json"
        )
        out.send(f"POST /mcp, {shown}", listed)
    out.send("an empty body", mcp_post(host, b"", headers=session))
    out.send("a body that is not UTF-8", mcp_post(host, b'{"jsonrpc": "2.0", "id": "\xff"}', headers=session))
    at_bound = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"' + b" " * BOUND
    at_bound = at_bound[: BOUND - 1] + b"}"
    out.send("a body of exactly the bound", mcp_post(host, at_bound, headers=session))
    over = at_bound + b" "
    out.send("one byte over the bound, by Content-Length", mcp_post(host, over, headers=session))
    out.send("one byte over the bound, chunked", mcp_post(host, over, headers=session, chunked=True))
    out.send("HTTP/1.0, one byte over the bound", mcp_post(host, over, headers=session, version="1.0"))
    out.send("the session lives on", mcp_post(host, rpc(9, "ping"), headers=session))
    out.send("DELETE it", http_request("DELETE", "/mcp", host, token=ALICE, headers=session))
    out.golden.check()


def get_as(serve: Serve, target: str, *headers: str, host: str | None = None) -> bytes:
    """A GET as ``tests/server/test_admin_targets.py`` writes it (``Host: 127.0.0.1`` by default)."""
    lines = [f"GET {target} HTTP/1.1", f"Host: {host or '127.0.0.1'}", *headers, "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1")


def test_request_targets_and_refusals_before_the_app(serve: Serve) -> None:
    out = serve.recorder(
        "admin_targets",
        "The admin API's request targets and Host check (tests/server/test_admin_targets.py's cases,\n"
        "with a token: this config has tokens), and what is refused before the app runs.",
        RERECORD,
    )
    bearer = f"Authorization: Bearer {ALICE}"
    targets = (
        "http://evil.example/v1/approvals",
        "http://evil.example/v1/health",  # the public route too
        "HTTP://EVIL.EXAMPLE:8765/v1/approvals",
        "http://127.0.0.1.evil.example/v1/approvals",
        "http://127.0.0.1@evil.example/v1/approvals",
        "http://evil.example?/v1/approvals",
        "https://10.0.0.1/v1/approvals",
        "http://127.0.0.1:8765/v1/approvals",
        "http://localhost/v1/approvals",
        "http://[::1]:1/v1/approvals?x=1",
        "*",
        "evil.example:443",
        "ftp://127.0.0.1/v1/approvals",
    )
    for target in targets:
        out.send(f"GET {target}", get_as(serve, target, bearer))
    out.send("a foreign target, no token", get_as(serve, "http://evil.example/v1/approvals"))
    out.send(
        "the Host header is still checked with a loopback target",
        get_as(serve, "http://127.0.0.1/v1/approvals", bearer, host="evil.example"),
    )
    out.send("a control character in a bearer token", get_as(serve, "/v1/approvals", f"{bearer}\x01"))
    refused = {
        "a NUL in the token": b"Authorization: Bearer alice-token-\x000123456789",
        "a NUL token": b"Authorization: Bearer \x00",
        "a NUL elsewhere": b"X-Other: a\x00b",
        "a bare CR in a header": b"Authorization: Bearer alice\rtoken",
        "a space before the colon": b"X-Other : a",
        "an obsolete line folding": b"X-Other: a\r\n b",
        "two different Content-Lengths": b"Content-Length: 1\r\nContent-Length: 2",
        "a header without a colon": b"X-Other",
    }
    for title, header in refused.items():
        raw = b"GET /v1/approvals HTTP/1.1\r\nHost: 127.0.0.1\r\n" + header + b"\r\n\r\n"
        out.send(title, raw)
    out.send("HTTP/1.1 without Host", b"GET /v1/approvals HTTP/1.1\r\nConnection: close\r\n\r\n")
    out.send("a request line that is not one", b"HELLO\r\n\r\n")
    approvals = get_as(serve, "/v1/approvals", bearer)
    out.send("HTTP/2.0 in the request line", approvals.replace(b"HTTP/1.1", b"HTTP/2.0", 1))
    out.send("a lower-case method", approvals.replace(b"GET", b"get", 1))
    out.send("the server still serves the next connection", approvals)
    out.golden.check()
