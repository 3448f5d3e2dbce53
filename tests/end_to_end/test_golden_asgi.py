"""Golden ASGI messages of the web tier, for what no HTTP client can show.

``serve`` never sets a ``root_path``, and a body that never ends is waited for (the
server's body timeout, 30 s, on every app), so these cases call the ASGI app ``serve``
runs directly (built by ``tests/support/golden_front.served_front``),
on virtual time (the ``thread_safe_clock`` fixture: the timeouts are the app's own,
the seconds do not pass; the config has no servers, so no process runs on it). Each
case records the scope, what ``receive`` gives, and every message the app sends (in
the cases that wait, with its virtual time): ``tests/golden/asgi_front.txt``.
Re-record on purpose with

    MCP_SUPERVISOR_UPDATE_GOLDENS=1 .venv/bin/python -m pytest tests/end_to_end/test_golden_asgi.py
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trio
import trio.testing
from hypercorn.typing import ASGIFramework

from tests.support.golden_config import ALICE, write_config
from tests.support.golden_files import Golden, Masker, show
from tests.support.golden_front import served_front
from tests.support.golden_http import ACCEPT_BOTH
from tests.support.golden_messages import INITIALIZE, PROTOCOL, rpc

HOST = "127.0.0.1:8765"  # what the scopes say; the app is called directly, on no port
LIMIT_S = 40.0  # virtual: past the body timeout (30 s), for the cases that wait
HANG_S = 600.0  # virtual: the others answer at once; this only ends a hang
Message = dict[str, Any]


def scope_of(
    kind: str,
    method: str,
    path: str,
    *,
    root_path: str = "",
    http_version: str = "1.1",
    headers: Sequence[tuple[str, str]] = (),
) -> Message:
    """A scope as Hypercorn makes it (``kind``: http or websocket)."""
    sent = [("host", HOST), ("authorization", f"Bearer {ALICE}"), *headers]
    scope: Message = {
        "type": kind,
        "asgi": {"spec_version": "2.3", "version": "3.0"},
        "http_version": http_version,
        "scheme": "http" if kind == "http" else "ws",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": root_path,
        "headers": [(name.encode(), value.encode()) for name, value in sent],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8765),
        "extensions": {},
    }
    if kind == "http":
        scope["method"] = method
    else:
        scope["subprotocols"] = []
    return scope


def body_of(message: Any) -> list[Message]:
    return [{"type": "http.request", "body": json.dumps(message).encode(), "more_body": False}]


def show_message(message: Mapping[str, Any], at: float | None = None) -> str:
    """One ASGI message: its time (if given), type, fields; headers one a line (but
    ``date``)."""
    lines = [message["type"] if at is None else f"at {at:.1f} s: {message['type']}"]
    for key in sorted(message):
        value = message[key]
        if key == "type":
            continue
        if key == "headers":
            lines += [
                f"  {n.decode('latin-1')}: {v.decode('latin-1')}" for n, v in value if n.lower() != b"date"
            ]
        elif isinstance(value, bytes):
            lines.append(f"  {key} ({len(value)} bytes): {show(value)}")
        else:
            lines.append(f"  {key}: {value!r}")
    return "\n".join(lines)


def show_scope(scope: Mapping[str, Any]) -> str:
    fields = ("type", "http_version", "method", "path", "root_path", "query_string")
    head = ", ".join(f"{key}={scope[key]!r}" for key in fields if key in scope)
    return head + "".join(f"\n  {n.decode()}: {v.decode()}" for n, v in scope["headers"])


class Front:
    """Calls to the app, each recorded in ``golden``."""

    def __init__(self, app: ASGIFramework, golden: Golden) -> None:
        self.app = app
        self.golden = golden

    async def call(
        self,
        title: str,
        scope: Message,
        given: Sequence[Message],
        *,
        then: Message | None = None,
        leave_after: int = 0,
        timed: bool = False,
    ) -> list[Message]:
        """``given`` to ``receive``, then ``then`` (None: nothing more, ever), once the
        app has sent ``leave_after`` messages; the app's messages until it returns.
        ``timed``: a case that waits, given ``LIMIT_S``, its messages shown with their
        (virtual) times; the clock may jump while any case waits for a thread, so only
        a case that waits on the app's own timers shows them."""
        pending = list(given)
        sent: list[tuple[float, Message]] = []
        start = trio.current_time()
        leave = trio.Event()

        async def receive() -> Any:
            if pending:
                return pending.pop(0)
            if then is None:
                await trio.sleep_forever()
            await leave.wait()
            return then

        async def send(message: Any) -> None:
            sent.append((trio.current_time() - start, dict(message)))
            if len(sent) >= leave_after:
                leave.set()

        if leave_after == 0:
            leave.set()

        with trio.move_on_after(LIMIT_S if timed else HANG_S) as limit:
            await self.app(scope, receive, send)  # type: ignore[arg-type]  # plain dicts, not TypedDicts
        ending = "returned"
        if limit.cancelled_caught:
            assert timed, f"{title}: no answer in {HANG_S} s"
            ending = f"still running after {LIMIT_S:.0f} s"
        messages = [message for _, message in sent]
        sid = session_of(messages)
        if sid is not None:
            self.golden.masker.name(sid, "session")
        received = [*given, *([then] if then is not None else [])]
        self.golden.case(
            title,
            (">>> scope", show_scope(scope)),
            (">>> receive", "\n".join(show_message(m) for m in received)),
            ("<<< sent", "\n".join(show_message(m, at if timed else None) for at, m in sent) or "(nothing)"),
            ("--- the app", ending),
        )
        return messages


def session_of(sent: Sequence[Message]) -> str | None:
    """The session id an answer names (``Mcp-Session-Id``), if one does."""
    for message in sent:
        for name, value in message.get("headers", ()):
            if name.lower() == b"mcp-session-id":
                return str(value.decode())
    return None


async def test_the_asgi_front_with_a_root_path_and_bodies_that_never_end(
    tmp_path: Path, thread_safe_clock: trio.testing.MockClock
) -> None:
    golden = Golden(
        "asgi_front",
        "The ASGI app serve runs, called directly: a root_path (serve never sets one), a body\n"
        "that never ends, a client that leaves. The cases that wait show when each message\n"
        "came, in virtual seconds (the test's clock).",
        "tests/end_to_end/test_golden_asgi.py",
        Masker(),
    )
    config = write_config(tmp_path, servers=())
    disconnect: Message = {"type": "http.disconnect"}
    async with served_front(config, tmp_path / "state") as app:
        front = Front(app, golden)
        mcp = [("accept", ACCEPT_BOTH), ("content-type", "application/json")]

        def post(path: str, **how: Any) -> Message:
            return scope_of("http", "POST", path, headers=[*mcp, *how.pop("headers", ())], **how)

        opened = await front.call(
            "POST /prefix/mcp, root_path /prefix: initialize",
            post("/prefix/mcp", root_path="/prefix"),
            body_of(INITIALIZE),
        )
        await front.call(
            "POST /mcp, root_path /prefix: initialize",
            post("/mcp", root_path="/prefix"),
            body_of(INITIALIZE),
        )
        sid = session_of(opened)
        assert sid is not None, opened
        session = [("mcp-session-id", sid), ("mcp-protocol-version", PROTOCOL)]
        listing = body_of(rpc(1, "tools/list"))
        await front.call(
            "POST /prefix/mcp, root_path /prefix: tools/list",
            post("/prefix/mcp", root_path="/prefix", headers=session),
            listing,
        )
        stream = [("accept", "text/event-stream"), *session]
        await front.call(
            "GET /prefix/mcp, root_path /prefix (the first body bytes, then the client leaves)",
            scope_of("http", "GET", "/prefix/mcp", root_path="/prefix", headers=stream),
            [{"type": "http.request", "body": b"", "more_body": False}],
            then=disconnect,
            leave_after=2,
        )
        await front.call(
            "DELETE /prefix/mcp, root_path /prefix",
            scope_of("http", "DELETE", "/prefix/mcp", root_path="/prefix", headers=session),
            [{"type": "http.request", "body": b"", "more_body": False}],
        )
        await front.call(
            "GET /prefix/v1/approvals, root_path /prefix",
            scope_of("http", "GET", "/prefix/v1/approvals", root_path="/prefix"),
            [{"type": "http.request", "body": b"", "more_body": False}],
        )

        partial = [{"type": "http.request", "body": b'{"jsonrpc": "2.0", ', "more_body": True}]
        never = "a body that never ends"
        await front.call(f"POST /mcp, {never}", post("/mcp"), partial, timed=True)
        quart = post("/mcp", http_version="1.0")
        await front.call(f"HTTP/1.0 POST /mcp, {never}", quart, partial, timed=True)
        await front.call(
            f"POST /prefix/mcp, root_path /prefix, {never}",
            post("/prefix/mcp", root_path="/prefix"),
            partial,
            timed=True,
        )
        await front.call(
            f"POST /v1/sessions, {never} (the admin API, for comparison)",
            scope_of("http", "POST", "/v1/sessions", headers=[("content-type", "application/json")]),
            [{"type": "http.request", "body": b"{", "more_body": True}],
            timed=True,
        )
        left = "the client leaves mid-body"
        await front.call(f"POST /mcp, {left}", post("/mcp"), partial, then=disconnect)
        await front.call(f"HTTP/1.0 POST /mcp, {left}", quart, partial, then=disconnect)

        gone: Message = {"type": "websocket.disconnect", "code": 1000}
        connect = [{"type": "websocket.connect"}]
        for path, root in (("/prefix/v1/bridge", "/prefix"), ("/v1/bridge", "/prefix"), ("/v1/bridge", "")):
            await front.call(
                f"a WebSocket to {path}, root_path {root!r} (the client leaves after the first answer)",
                scope_of("websocket", "GET", path, root_path=root),
                connect,
                then=gone,
                leave_after=1,
            )
    golden.check()
