"""``mcp-supervisor status | tools | search | call`` against a fake admin API.

The client commands talk to a running service (``--url``, ``--token`` or
``$MCP_SUPERVISOR_TOKEN``, ``--json``); human output is an aligned table with the
retry countdown; ``call`` streams the call (SSE) and shows progress on a terminal;
``--json`` prints machine output only. The fake is a real HTTP server on a loopback
port (stdlib ``ThreadingHTTPServer``) that answers the admin API's routes with canned JSON and
chunked SSE and records every request, so the tests see what went over the wire.
"""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from supervisor.cli import client
from supervisor.cli import commands as cli_client
from supervisor.cli import main as cli
from supervisor.cli import text as cli_text
from tests.support.paths import REPO

TOKEN = "tok-planted-4f9a1c"
OK_ENVELOPE: dict[str, Any] = {
    "ok": True,
    "tool": "time_get_current_time",
    "text": "2025-01-01T12:00:00+00:00",
    "content": [{"type": "text", "text": "2025-01-01T12:00:00+00:00"}],
    "structured": None,
    "truncated": False,
    "duration_ms": 3,
}
FAILED_ENVELOPE: dict[str, Any] = {
    "ok": False,
    "tool": "github_create_issue",
    "error": {"code": "unavailable", "message": "mcp server github is unavailable"},
}
LONG_ERROR = "process exited with status 1: Traceback (most recent call last): " + "x" * 200
SERVERS: list[dict[str, Any]] = [
    {
        "name": "time",
        "state": "steady",
        "since": "2025-01-01T11:00:00Z",
        "attempt": 0,
        "next_retry_at": None,
        "retry_in_s": None,
        "last_error": None,
        "protocol_version": "2026-07-28",
        "available": True,
        "reconnects": 0,
        "tools": 2,
    },
    {
        "name": "flaky-enterprise",
        "state": "backoff",
        "since": "2025-01-01T11:59:50Z",
        "attempt": 3,
        "next_retry_at": 1234.5,
        "retry_in_s": 11.2,
        "last_error": LONG_ERROR,
        "last_error_age_s": 4.7,
        "available": False,
        "reconnects": 2,
        "tools": 1,
    },
]
TOOLS: list[dict[str, Any]] = [
    {
        "id": "time_get_current_time",
        "server": "time",
        "description": "Get the current time in a time zone",
        "available": True,
        "stale": False,
    },
    {
        "id": "flaky-enterprise_echo",
        "server": "flaky-enterprise",
        "description": "Echo " + "y" * 300,
        "available": False,
        "stale": True,
    },
]
MATCHES: list[dict[str, Any]] = [
    {
        "id": "time_convert_time",
        "description": "Convert a time between time zones",
        "server_state": "steady",
        "stale": False,
    },
    {"id": "flaky-enterprise_echo", "description": "Echo text", "server_state": "idle", "stale": True},
]
PROGRESS_EVENTS: list[tuple[str, Any]] = [
    ("request_received", {"request_id": "r-1"}),
    ("progress", {"progress": 1, "total": 5, "message": "starting"}),
    ("progress", {"progress": 2, "total": 5, "message": "halfway"}),
    ("result", OK_ENVELOPE),
    ("done", {}),
]


# ------------------------------------------------------------------ the fake admin API


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeAdmin:
    """State and canned answers of the fake service; tests change them before a run."""

    url: str = ""
    token: str | None = None
    servers: Any = field(default_factory=lambda: SERVERS)
    tools: Any = field(default_factory=lambda: TOOLS)
    matches: list[dict[str, Any]] = field(default_factory=lambda: MATCHES)
    turn_tools: list[Any] = field(default_factory=lambda: ["time_get_current_time"])
    search_enabled: bool = False
    call_events: list[tuple[str, Any]] = field(default_factory=lambda: list(PROGRESS_EVENTS))
    call_json: dict[str, Any] | None = None  # answer the call as plain JSON instead
    hold_stream: bool = False  # keep the stream open after the events (until teardown)
    pause_before_result_s: float = 0.0
    stall: set[str] = field(default_factory=set)  # paths answered only at teardown
    errors: dict[tuple[str, str], tuple[int, Any]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)
    released: threading.Event = field(default_factory=threading.Event)
    _next: int = 0

    def paths(self, method: str | None = None) -> list[str]:
        return [r.path for r in self.requests if method is None or r.method == method]

    def new_session(self) -> str:
        self._next += 1
        sid = f"s-{self._next}"
        self.sessions.add(sid)
        return sid


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    admin: FakeAdmin

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _json(self, status: int, body: Any) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _stream(self, events: list[tuple[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._chunk(b": keep-alive\n\n")
        for name, data in events:
            if name == "result":
                self.admin.released.wait(self.admin.pause_before_result_s)
            self._chunk(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        if self.admin.hold_stream:
            self.admin.released.wait(20)
        self._chunk(b"")

    def _handle(self) -> None:
        admin = self.admin
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        path = self.path
        admin.requests.append(
            Recorded(self.command, path, {k.lower(): v for k, v in self.headers.items()}, body)
        )
        if path in admin.stall:
            admin.released.wait(20)
        if admin.token is not None and self.headers.get("Authorization") != f"Bearer {admin.token}":
            self._json(401, {"error": {"code": "unauthorized", "message": "missing or unknown token"}})
            return
        if (self.command, path) in admin.errors:
            self._json(*admin.errors[self.command, path])
            return
        session = re.fullmatch(r"/v1/sessions/([^/]+)(/.*)?", path)
        if session and session[1] not in admin.sessions:
            self._json(404, {"error": {"code": "not_found", "message": "no such session"}})
            return
        rest = session[2] if session else None
        if self.command == "GET" and path == "/v1/servers":
            self._json(200, admin.servers)
        elif self.command == "GET" and path == "/v1/tools":
            self._json(200, admin.tools)
        elif self.command == "POST" and path == "/v1/sessions":
            self._json(201, {"session_id": admin.new_session()})
        elif session and self.command == "DELETE" and rest is None:
            admin.sessions.discard(session[1])
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif session and self.command == "POST" and rest == "/turns":
            self._json(
                201,
                {
                    "turn_id": "t-1",
                    "epoch": 7,
                    "tools": admin.turn_tools,
                    "search_enabled": admin.search_enabled,
                },
            )
        elif session and self.command == "POST" and rest == "/tool_search":
            self._json(200, {"matches": admin.matches})
        elif session and self.command == "POST" and rest == "/turns/t-1/calls":
            if admin.call_json is not None or "text/event-stream" not in self.headers.get("Accept", ""):
                self._json(200, admin.call_json or OK_ENVELOPE)
            else:
                self._stream(admin.call_events)
        elif self.command == "POST" and re.fullmatch(r"/v1/requests/[^/]+/cancel", path):
            self._json(200, {"cancelled": True})
        else:
            self._json(404, {"error": {"code": "not_found", "message": f"no route {path}"}})


class QuietServer(ThreadingHTTPServer):
    """The fake's server, minus socketserver's traceback on stderr (which capsys would
    take for the CLI's own output) when the CLI hangs up on a stream it is done with."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionResetError | BrokenPipeError):
            return
        super().handle_error(request, client_address)


@pytest.fixture
def fake() -> Iterator[FakeAdmin]:
    admin = FakeAdmin()
    handler = type("BoundHandler", (Handler,), {"admin": admin})
    server = QuietServer(("127.0.0.1", 0), handler)
    admin.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield admin
    finally:
        admin.released.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No URL or token from the developer's shell; a fixed 100-column terminal."""
    monkeypatch.delenv("MCP_SUPERVISOR_URL", raising=False)
    monkeypatch.delenv("MCP_SUPERVISOR_TOKEN", raising=False)
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("LINES", "40")
    monkeypatch.setattr(cli_text, "is_terminal", lambda stream: True)  # stdout is captured


def run(fake: FakeAdmin, *args: str) -> int:
    return cli.main([*args, "--url", fake.url])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def tty(monkeypatch: pytest.MonkeyPatch, value: bool = True) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: value)


# ------------------------------------------------------------------ status


def test_status_names_the_store_its_service_reports_under_the_table(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    health = {"status": "ok", "servers": 2, "epoch": 1, "store": "postgresql://db.internal:5432/mcp"}
    fake.errors[("GET", "/v1/health")] = (200, health)
    assert run(fake, "status") == 0
    out, err = capsys.readouterr()
    assert err == "" and out.splitlines()[0].startswith("SERVER")
    assert out.splitlines()[-1] == "store: postgresql://db.internal:5432/mcp"
    fake.servers = {"servers": []}
    assert run(fake, "status") == 0
    assert capsys.readouterr().out.splitlines() == ["no servers configured", f"store: {health['store']}"]


def test_status_prints_an_aligned_table_with_countdown_and_cut_error(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(fake, "status") == 0
    out, err = capsys.readouterr()
    assert err == ""
    header, *rows = out.splitlines()
    assert header.split("  ")[0] == "SERVER"
    columns = ["SERVER", "STATE", "PROTOCOL", "AVAILABLE", "TOOLS", "RETRY", "ATTEMPT", "LAST ERROR"]
    starts = [header.index(name) for name in columns]
    assert starts == sorted(starts)
    expected = [
        ["time", "steady", "2026-07-28", "yes", "2", "-", "-", "-"],
        ["flaky-enterprise", "backoff", "-", "no", "1", "in 12s", "3", "process exited"],
    ]
    assert len(rows) == len(expected)
    for row, cells in zip(rows, expected, strict=True):
        for start, cell in zip(starts, cells, strict=True):
            assert row[start:].startswith(cell), (row, cell)
            assert start == 0 or row[start - 2 : start] == "  ", (row, cell)
    flaky = rows[1]
    assert len(flaky) == 100
    assert flaky.endswith("... (4s ago)"), "the age survives the cut"
    assert LONG_ERROR[: 100 - starts[-1] - len("... (4s ago)")] in flaky


def test_status_shows_how_old_the_last_error_is(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server that came back keeps its last error: its age says it is history.
    monkeypatch.setenv("COLUMNS", "200")
    fake.servers = [
        {**SERVERS[0], "last_error": "mcp server time closed the connection", "last_error_age_s": 7512.9},
        {**SERVERS[0], "name": "old-service", "last_error": "died"},  # no age: as it was
    ]
    assert run(fake, "status") == 0
    _, steady, old = capsys.readouterr().out.splitlines()
    assert steady.startswith("time ") and "steady" in steady
    assert steady.endswith("  mcp server time closed the connection (2h05m ago)")
    assert old.endswith("  died")


def test_status_last_error_follows_the_terminal_width(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    assert run(fake, "status") == 0
    rows = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in rows) == 160


@pytest.mark.parametrize("where", ["before", "after"])
def test_json_goes_before_or_after_the_command(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    args = (
        ["--json", "status", "--url", fake.url]
        if where == "before"
        else ["status", "--json", "--url", fake.url]
    )
    assert cli.main(args) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert [server["name"] for server in json.loads(out)] == ["time", "flaky-enterprise"]


def test_json_before_a_command_without_json_output_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--json", "check"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"--json applies to {', '.join(cli_client.COMMANDS)}, not check" in err


def test_status_into_a_pipe_cuts_nothing(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No terminal: whole lines, as `ps | cat` gives them, whatever $COLUMNS says.
    monkeypatch.setattr(cli_text, "is_terminal", lambda stream: False)
    assert run(fake, "status") == 0
    flaky = capsys.readouterr().out.splitlines()[2]
    assert flaky.endswith(f"{LONG_ERROR} (4s ago)")


def test_status_wide_cuts_nothing_even_on_a_narrow_terminal(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    assert run(fake, "status", "--wide") == 0
    assert capsys.readouterr().out.splitlines()[2].endswith(f"{LONG_ERROR} (4s ago)")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return 1


def test_a_table_on_a_terminal_is_cut_to_its_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # the real is_terminal, and no $COLUMNS
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(cli_text.os, "get_terminal_size", lambda fd: os.terminal_size((123, 40)))
    assert cli_text.table_width(Terminal()) == 123
    assert cli_text.table_width(Terminal(), wide=True) is None
    monkeypatch.setenv("COLUMNS", "70")
    assert cli_text.table_width(Terminal()) == 70
    assert cli_text.table_width(io.StringIO()) is None  # $COLUMNS alone is no terminal


@pytest.mark.parametrize(
    ("state", "retry_in_s", "text"),
    [
        ("backoff", 11.2, "in 12s"),
        ("backoff", 12, "in 12s"),
        ("backoff", 0.01, "in 1s"),
        ("backoff", 0, "now"),
        ("backoff", 75, "in 1m15s"),
        ("backoff", 3725, "in 1h02m"),
        ("backoff", None, "-"),
        ("steady", 5.0, "-"),
        ("backoff", True, "-"),
    ],
)
def test_retry_countdown_text(state: str, retry_in_s: object, text: str) -> None:
    assert cli_text.format_retry(state, retry_in_s) == text


@pytest.mark.parametrize(
    ("error", "age_s", "text"),
    [
        ("died", 0.4, "died (0s ago)"),
        ("died", 59.9, "died (59s ago)"),
        ("died", 75, "died (1m15s ago)"),
        ("died", 3725, "died (1h02m ago)"),
        ("died", 2 * 86400 + 3 * 3600 + 59, "died (2d03h ago)"),
        ("died", None, "died"),
        ("died", True, "died"),
        (None, 5, "-"),
    ],
)
def test_last_error_text_says_how_long_ago(error: object, age_s: object, text: str) -> None:
    assert cli_text.format_error(error, age_s) == text


def test_a_cut_keeps_the_tail_of_a_tailed_cell_while_it_fits() -> None:
    cell = cli_text.Tailed("mcp server flaky closed the connection", "(3s ago)")
    assert cli_text.cut(cell, 30) == "mcp server flaky c... (3s ago)"
    assert cli_text.cut(cell, 12) == "mcp serve..."  # too narrow for both: the text first
    assert cli_text.cut(cell, 100) == "mcp server flaky closed the connection (3s ago)"


def test_status_json_prints_the_server_list_as_served_and_nothing_else(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(fake, "status", "--json") == 0
    out, err = capsys.readouterr()
    assert out == json.dumps(SERVERS) + "\n"
    assert json.loads(out) == SERVERS
    assert err == ""


def test_wrapped_lists_as_the_admin_api_serves_them(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    """The admin API wraps its lists (``{"servers": [...]}``, ``{"epoch", "tools"}``);
    tables read either form and ``--json`` keeps the document as served."""
    fake.servers = {"servers": SERVERS}
    fake.tools = {"epoch": 4, "tools": TOOLS}
    assert run(fake, "status") == 0
    assert "in 12s" in capsys.readouterr().out.splitlines()[2]
    assert run(fake, "tools") == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:3] == ["time_get_current_time", "time", "yes"]
    assert run(fake, "tools", "--json") == 0
    assert json.loads(capsys.readouterr().out) == {"epoch": 4, "tools": TOOLS}


def test_status_shows_a_server_waiting_for_auth_login(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    waiting = {**SERVERS[1], "condition": "needs_auth", "retry_in_s": None, "next_retry_at": None,
               "last_error": "mcp server docs: authentication failed: it needs consent first"}  # fmt: skip
    fake.servers = [SERVERS[0], waiting]
    assert run(fake, "status") == 0
    row = capsys.readouterr().out.splitlines()[2]
    assert row.split()[:7] == ["flaky-enterprise", "backoff", "(needs_auth)", "-", "no", "1", "auth"]
    assert "auth login" in row and "mcp serve" in row  # cut to the terminal width


def test_status_with_no_servers_says_so(fake: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    fake.servers = []
    assert run(fake, "status") == 0
    assert capsys.readouterr().out == "no servers configured\n"


def test_status_replaces_terminal_control_characters_from_servers(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.servers = [
        {**SERVERS[1], "last_error": "boom\x1b]0;owned\x07\nsecond line", "last_error_age_s": None}
    ]
    assert run(fake, "status") == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "\x07" not in out
    assert "boom?]0;owned? second line" in out


# ------------------------------------------------------------------ connection, token, errors


def test_token_is_sent_as_bearer_and_never_printed(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.token = TOKEN
    assert run(fake, "call", "time_get_current_time", "--token", TOKEN) == 0
    out, err = capsys.readouterr()
    assert len(fake.requests) == 4  # session, turn, call, delete
    assert {r.headers["authorization"] for r in fake.requests} == {f"Bearer {TOKEN}"}
    assert TOKEN not in out + err


def test_token_comes_from_the_environment(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.token = TOKEN
    monkeypatch.setenv("MCP_SUPERVISOR_TOKEN", TOKEN + "\n")
    assert run(fake, "tools") == 0
    assert fake.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in "".join(capsys.readouterr())


def test_url_comes_from_the_environment(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_SUPERVISOR_URL", fake.url)
    assert cli.main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == SERVERS


def test_no_authorization_header_without_a_token(fake: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(fake, "status") == 0
    assert "authorization" not in fake.requests[0].headers


def test_unreachable_service_exits_1_with_a_clear_message(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert cli.main(["status", "--url", url, "--token", TOKEN]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"mcp-supervisor: cannot reach the supervisor at {url}: connection refused; "
        'is "mcp-supervisor serve" running?\n'
    )


def test_user_info_in_the_url_is_not_printed(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    assert cli.main(["tools", "--url", f"http://admin:pw-planted@127.0.0.1:{port}/"]) == 1
    err = capsys.readouterr().err
    assert f"cannot reach the supervisor at http://127.0.0.1:{port}:" in err
    assert "pw-planted" not in err


def test_401_names_the_token_options(fake: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    fake.token = TOKEN
    wrong = "wrong-planted-token"
    assert run(fake, "status", "--token", wrong) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "(401)" in err
    assert "--token" in err
    assert "$MCP_SUPERVISOR_TOKEN" in err
    assert "not accepted" in err
    assert wrong not in err


def test_401_without_a_token_says_one_is_required(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.token = TOKEN
    assert run(fake, "tools", "--json") == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "a token is required; pass one with --token or $MCP_SUPERVISOR_TOKEN" in err


def test_an_api_error_is_reported_with_its_message(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.errors["GET", "/v1/tools"] = (500, {"error": {"code": "internal", "message": "store is gone"}})
    assert run(fake, "tools") == 1
    assert capsys.readouterr().err == "mcp-supervisor: store is gone (HTTP 500, internal)\n"


def test_a_token_echoed_by_the_service_is_blanked(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.errors["GET", "/v1/servers"] = (
        403,
        {"error": {"code": "forbidden", "message": f"bad Bearer {TOKEN}"}},
    )
    assert run(fake, "status", "--token", TOKEN) == 1
    err = capsys.readouterr().err
    assert "bad Bearer ***" in err
    assert TOKEN not in err


def test_an_answer_that_is_not_json_is_reported(fake: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    fake.errors["GET", "/v1/servers"] = (200, "not json")  # a JSON string: not a list
    assert run(fake, "status") == 1
    assert "not a list of servers" in capsys.readouterr().err


def test_a_slow_service_hits_the_timeout(fake: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    fake.stall.add("/v1/servers")
    assert run(fake, "status", "--timeout", "0.2") == 1
    assert (
        capsys.readouterr().err
        == f"mcp-supervisor: no answer from the supervisor at {fake.url} within 0.2s\n"
    )


@pytest.mark.parametrize("url", ["ftp://127.0.0.1:1", "127.0.0.1:8765", "http://127.0.0.1:99999"])
def test_a_bad_url_is_a_usage_error(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", "--url", url]) == 2
    assert "--url" in capsys.readouterr().err


def test_a_token_that_cannot_be_a_header_is_refused_without_quoting_it(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(fake, "status", "--token", "abc\r\nX-Evil: planted") == 2
    err = capsys.readouterr().err
    assert "token" in err
    assert "planted" not in err
    assert fake.requests == []


# ------------------------------------------------------------------ tools and search


def test_tools_table(fake: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(fake, "tools") == 0
    header, first, second = capsys.readouterr().out.splitlines()
    starts = [header.index(name) for name in ("ID", "SERVER", "AVAILABLE", "DESCRIPTION")]
    assert [first[s:].split("  ")[0] for s in starts] == [
        "time_get_current_time",
        "time",
        "yes",
        "Get the current time in a time zone",
    ]
    assert [second[s:].split("  ")[0] for s in starts[:3]] == [
        "flaky-enterprise_echo",
        "flaky-enterprise",
        "no (stale)",
    ]
    assert len(second) == 100
    assert second.endswith("y...")


def test_tools_json(fake: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(fake, "tools", "--json") == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == TOOLS
    assert err == ""


def test_search_opens_a_session_searches_and_deletes_it(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(fake, "search", "convert", "time") == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert fake.paths() == ["/v1/sessions", "/v1/sessions/s-1/tool_search", "/v1/sessions/s-1"]
    assert fake.requests[1].body == {"query": "convert time"}
    assert fake.requests[2].method == "DELETE"
    assert fake.sessions == set()
    header, first, second = out.splitlines()
    state = header.index("STATE")
    description = header.index("DESCRIPTION")
    assert first.startswith("time_convert_time")
    assert first[state:].startswith("steady")
    assert first[description:] == "Convert a time between time zones"
    assert second[state:].startswith("idle (stale)")


def test_search_json_prints_the_matches_only(fake: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(fake, "search", "--json", "echo") == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"matches": MATCHES}
    assert err == ""
    assert fake.sessions == set()


def test_search_without_matches(fake: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    fake.matches = []
    assert run(fake, "search", "nothing") == 0
    assert capsys.readouterr().out == "no tools match 'nothing'\n"


def test_search_deletes_the_session_when_the_search_fails(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.errors["POST", "/v1/sessions/s-1/tool_search"] = (
        400,
        {"error": {"code": "bad_request", "message": "query must not be empty"}},
    )
    assert run(fake, "search", " ") == 1
    assert "query must not be empty" in capsys.readouterr().err
    assert fake.paths("DELETE") == ["/v1/sessions/s-1"]
    assert fake.sessions == set()


# ------------------------------------------------------------------ call


def call_request(fake: FakeAdmin) -> Recorded:
    [request] = [r for r in fake.requests if r.path.endswith("/calls")]
    return request


def test_call_streams_progress_on_a_terminal_and_prints_the_text(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tty(monkeypatch)
    assert run(fake, "call", "time_get_current_time", '{"timezone": "UTC"}') == 0
    out, err = capsys.readouterr()
    assert out == OK_ENVELOPE["text"] + "\n"
    assert "\r\x1b[Kcalling time_get_current_time ..." in err
    assert "\r\x1b[Kprogress 1/5: starting" in err
    assert "\r\x1b[Kprogress 2/5: halfway" in err
    assert err.index("1/5") < err.index("2/5")
    assert "\n" not in err  # redrawn in place, never scrolled
    assert err.endswith("\r\x1b[K")  # and wiped before the result
    request = call_request(fake)
    assert request.path == "/v1/sessions/s-1/turns/t-1/calls"
    assert request.body == {"tool": "time_get_current_time", "arguments": {"timezone": "UTC"}}
    assert "text/event-stream" in request.headers["accept"]
    assert fake.paths() == [
        "/v1/sessions",
        "/v1/sessions/s-1/turns",
        "/v1/sessions/s-1/turns/t-1/calls",
        "/v1/sessions/s-1",
    ]
    assert fake.requests[-1].method == "DELETE"
    assert fake.sessions == set()


def test_call_shows_no_progress_when_stderr_is_not_a_terminal(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tty(monkeypatch, False)
    assert run(fake, "call", "time_get_current_time") == 0
    out, err = capsys.readouterr()
    assert out == OK_ENVELOPE["text"] + "\n"
    assert err == ""
    assert call_request(fake).body == {"tool": "time_get_current_time", "arguments": {}}


def test_call_json_prints_the_envelope_only(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tty(monkeypatch)
    assert run(fake, "call", "--json", "time_get_current_time", "{}") == 0
    out, err = capsys.readouterr()
    assert out == json.dumps(OK_ENVELOPE) + "\n"
    assert json.loads(out) == OK_ENVELOPE
    assert "progress 2/5" in err  # stderr, a terminal: progress still shows there


def test_call_progress_without_total_or_message(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tty(monkeypatch)
    fake.call_events = [
        ("progress", {"progress": 0.5, "total": None, "message": None}),
        ("progress", {"progress": 3.0}),
        ("result", OK_ENVELOPE),
        ("done", {}),
    ]
    assert run(fake, "call", "time_get_current_time") == 0
    err = capsys.readouterr().err
    assert "\r\x1b[Kprogress 0.5\r" in err
    assert "\r\x1b[Kprogress 3\r" in err


def test_call_progress_messages_cannot_drive_the_terminal(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tty(monkeypatch)
    fake.call_events = [
        ("progress", {"progress": 1, "total": 2, "message": "\x1b]0;owned\x07\x1b[2J"}),
        ("result", OK_ENVELOPE),
        ("done", {}),
    ]
    assert run(fake, "call", "time_get_current_time") == 0
    err = capsys.readouterr().err
    assert "progress 1/2: ?]0;owned??[2J" in err
    assert err.replace("\r\x1b[K", "").isprintable()


def test_a_call_may_run_longer_than_the_request_timeout(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --timeout, a call waits for the service's own call timeout: the short
    default timeout bounds connecting and the JSON requests, not a running call."""
    monkeypatch.setattr(cli_client, "DEFAULT_TIMEOUT_S", 0.2)
    fake.pause_before_result_s = 0.6
    assert run(fake, "call", "time_get_current_time") == 0
    assert capsys.readouterr().out == OK_ENVELOPE["text"] + "\n"


def test_call_timeout_bounds_each_wait_for_news(fake: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    fake.pause_before_result_s = 5
    assert run(fake, "call", "--timeout", "0.3", "time_get_current_time") == 1
    assert capsys.readouterr().err == (
        f"mcp-supervisor: no news from the supervisor at {fake.url} for 0.3s during the call\n"
    )
    assert fake.sessions == set()


def test_invalid_json_arguments_exit_2_before_any_request(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(fake, "call", "time_get_current_time", "{timezone: UTC}") == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("mcp-supervisor: invalid JSON arguments: Expecting property name")
    assert fake.requests == []


def test_arguments_must_be_an_object(fake: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(fake, "call", "time_get_current_time", "[1, 2]") == 2
    assert "must be a JSON object, not list" in capsys.readouterr().err
    assert fake.requests == []


def test_arguments_from_stdin(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"timezone": "Europe/Paris"}\n'))
    assert run(fake, "call", "time_get_current_time", "-") == 0
    assert call_request(fake).body["arguments"] == {"timezone": "Europe/Paris"}


def test_a_failed_envelope_exits_1_with_its_error(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.call_events = [("request_received", {}), ("result", FAILED_ENVELOPE), ("done", {})]
    assert run(fake, "call", "github_create_issue", '{"title": "x"}') == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "error unavailable: mcp server github is unavailable\n"
    assert fake.paths("DELETE") == ["/v1/sessions/s-1"]
    assert fake.sessions == set()


def test_a_failed_envelope_with_json_still_exits_1(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.call_events = [("result", FAILED_ENVELOPE), ("done", {})]
    assert run(fake, "call", "--json", "github_create_issue") == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == FAILED_ENVELOPE
    assert err == "error unavailable: mcp server github is unavailable\n"


def test_a_plain_json_answer_is_accepted(fake: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    fake.call_json = {**OK_ENVELOPE, "text": "", "structured": {"hour": 12}}
    assert run(fake, "call", "time_get_current_time") == 0
    assert json.loads(capsys.readouterr().out) == {"hour": 12}


def test_a_stream_without_result_is_an_error(fake: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    fake.call_events = [("request_received", {"request_id": "r-1"}), ("done", {})]
    assert run(fake, "call", "time_get_current_time") == 1
    assert "without a result" in capsys.readouterr().err
    assert fake.sessions == set()


def test_an_over_long_stream_event_is_an_error_not_unbounded_memory(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client, "MAX_CALL_EVENT_CHARS", 100)
    fake.call_events = [("progress", {"progress": 1, "message": "m" * 200}), *PROGRESS_EVENTS[3:]]
    assert run(fake, "call", "time_get_current_time") == 1
    err = capsys.readouterr().err
    assert "event stream from" in err and "longer than 100 characters" in err
    assert fake.sessions == set()


def test_an_unknown_session_is_reported(fake: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    fake.errors["POST", "/v1/sessions/s-1/turns"] = (
        404,
        {"error": {"code": "not_found", "message": "no such session"}},
    )
    assert run(fake, "call", "time_get_current_time") == 1
    assert capsys.readouterr().err == "mcp-supervisor: no such session (HTTP 404, not_found)\n"
    assert fake.paths("DELETE") == ["/v1/sessions/s-1"]


def test_call_activates_an_unlisted_tool_when_search_is_on(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.search_enabled = True
    fake.turn_tools = [{"id": "tool_search"}]
    assert run(fake, "call", "time_convert_time") == 0
    assert fake.paths() == [
        "/v1/sessions",
        "/v1/sessions/s-1/turns",
        "/v1/sessions/s-1/tool_search",
        "/v1/sessions/s-1/turns/t-1/calls",
        "/v1/sessions/s-1",
    ]
    assert fake.requests[2].body == {"query": "time_convert_time"}


def test_call_does_not_search_for_a_listed_tool(fake: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    fake.search_enabled = True
    fake.turn_tools = [{"id": "tool_search"}, {"id": "time_get_current_time", "description": "…"}]
    assert run(fake, "call", "time_get_current_time") == 0
    assert not any(path.endswith("/tool_search") for path in fake.paths())


def test_ctrl_c_cancels_the_request_and_deletes_the_session(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tty(monkeypatch)
    fake.call_events = PROGRESS_EVENTS[:2]
    fake.hold_stream = True
    shown: list[str] = []

    def show(self: cli_text.Progress, line: str) -> None:
        shown.append(line)
        if line.startswith("progress"):
            raise KeyboardInterrupt

    monkeypatch.setattr(cli_text.Progress, "show", show)
    assert run(fake, "call", "time_get_current_time") == 130
    assert shown == ["calling time_get_current_time ...", "progress 1/5: starting"]
    assert capsys.readouterr().err.endswith("mcp-supervisor: interrupted\n")
    assert fake.paths()[-2:] == ["/v1/requests/r-1/cancel", "/v1/sessions/s-1"]
    assert fake.requests[-1].method == "DELETE"
    assert fake.sessions == set()


def test_a_closed_pipe_ends_quietly(fake: FakeAdmin) -> None:
    fake.tools = [
        {"id": f"big_tool_{i}", "server": "big", "description": "d" * 100, "available": True, "stale": False}
        for i in range(3000)
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "supervisor.cli", "tools", "--url", fake.url],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "80"},
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"ID")
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(20) == 1
    assert b"Traceback" not in err
    assert b"BrokenPipe" not in err
