"""Who may use the admin API and what it never reveals, through the real server.

Bearer tokens and tenants (another tenant's objects are 404s, its call events never
reach my stream), the Origin and Host gates, body bounds and malformed JSON, the
non-loopback refusal of ``serve``, the CLI wiring, and a planted secret that must
appear in no answer, header, event or log line.
"""

from __future__ import annotations

import http.client
import io
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.redaction import Redactor
from supervisor.runtime.logs import StructuredFormatter
from supervisor.server import BindError, serve
from supervisor.service import Supervisor
from supervisor.settings.loader import CONFIG_ENV_VAR, load_config
from supervisor.web.routes import ROUTES
from tests.support.admin import (
    ALICE,
    BOB,
    MINI,
    TOKENS,
    Http,
    Sse,
    admin_running,
    config_of,
    conforms,
    error_code,
    mini_spec,
    path_of,
    until,
    wait_for,
)

DUMMY_IDS = {"sid": "s", "tid": "t", "approval_id": "a", "rid": "r", "name": "mini"}


async def test_every_endpoint_but_the_public_ones_needs_a_valid_token(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini"), tokens=TOKENS), tmp_path) as api:
        anonymous, wrong, alice = api.http(), api.http("not-a-real-token-at-all"), api.http(ALICE)
        with trio.fail_after(15):
            for route in ROUTES:
                path = path_of(route.operation, **DUMMY_IDS)
                for client, challenge in ((anonymous, "Bearer"), (wrong, 'Bearer error="invalid_token"')):
                    reply = await client.request(route.method, path)
                    if route.public:  # metadata: none while sign-in is off; the callback: no state
                        expected = 404 if "well-known" in route.path else 200
                        expected = 400 if route.operation == "oauth_callback" else expected
                        assert reply.status == expected, (route, reply)
                        continue
                    assert reply.status == 401, (route, reply)
                    assert reply.headers["www-authenticate"] == challenge
                    assert error_code(reply) == "unauthorized"
                    conforms(route.operation, reply)
            assert (await alice.request("GET", "/v1/servers")).status == 200
            # The scheme is case-insensitive; anything but a bearer token is not one.
            lower = await anonymous.request("GET", "/v1/tools", headers={"Authorization": f"bearer {BOB}"})
            assert lower.status == 200
            basic = await anonymous.request("GET", "/v1/tools", headers={"Authorization": f"Basic {ALICE}"})
            assert basic.status == 401
            # An unknown route is not revealed to anonymous callers either.
            assert (await anonymous.request("GET", "/v1/secret-route")).status == 401
            assert (await alice.request("GET", "/v1/secret-route")).status == 404


async def test_tenants_see_only_their_own_objects(tmp_path: Path) -> None:
    calls_log = tmp_path / "calls.log"
    config = config_of(
        mini_spec("mini", "--calls-log", str(calls_log)), mini_spec("wild", trusted=False), tokens=TOKENS
    )
    async with admin_running(config, tmp_path) as api:
        alice, bob = api.http(ALICE), api.http(BOB)
        with trio.fail_after(25):
            sid = await alice.session()
            tid = (await alice.turn(sid))["turn_id"]
            bob_sid = await bob.session()
            bob_tid = (await bob.turn(bob_sid))["turn_id"]
            # Bob cannot touch Alice's session or turn: 404, exactly as if it did not exist.
            for method, path, body in (
                ("POST", f"/v1/sessions/{sid}/turns", None),
                (
                    "POST",
                    f"/v1/sessions/{sid}/turns/{tid}/calls",
                    {"tool": "mini_echo", "arguments": {"text": "x"}},
                ),
                ("POST", f"/v1/sessions/{bob_sid}/turns/{tid}/calls", {"tool": "mini_echo"}),
                ("POST", f"/v1/sessions/{sid}/tool_search", {"query": "echo"}),
                ("DELETE", f"/v1/sessions/{sid}", None),
            ):
                reply = await bob.request(method, path, json=body)
                assert reply.status == 404 and reply.json()["error"]["code"] == "not_found", (path, reply)

            async with (
                alice.stream("GET", "/v1/events") as alice_events,
                bob.stream("GET", "/v1/events") as bob_events,
            ):
                assert (await alice_events.next()) is not None and (await bob_events.next()) is not None
                slow: list[Any] = []
                approved: list[Any] = []

                async def sleep_call() -> None:
                    slow.append(
                        await alice.call(sid, tid, "mini_sleep", {"seconds": 30}, request_id="alice-1")
                    )

                async def write_call() -> None:
                    approved.append(await alice.call(sid, tid, "wild_add_tool", {"name": "x"}))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(sleep_call)
                    nursery.start_soon(write_call)
                    await until(calls_log.exists)
                    pending = await wait_for(alice, "/v1/approvals", lambda d: len(d["approvals"]) == 1)
                    approval_id = pending["approvals"][0]["id"]
                    # Bob sees neither the approval nor the request, and cannot answer or cancel them.
                    assert (await bob.request("GET", "/v1/approvals")).json() == {"approvals": []}
                    answer = await bob.request(
                        "POST", f"/v1/approvals/{approval_id}", json={"decision": "allow"}
                    )
                    assert answer.status == 404
                    assert (await bob.request("POST", "/v1/requests/alice-1/cancel")).status == 404
                    # Alice can.
                    allow = await alice.request(
                        "POST", f"/v1/approvals/{approval_id}", json={"decision": "deny"}
                    )
                    assert allow.status == 204
                    assert (await alice.request("POST", "/v1/requests/alice-1/cancel")).status == 202
                assert slow[0].json()["error"]["code"] == "cancelled"
                assert approved[0].json()["error"]["code"] == "denied"

                def own_call(tool: str) -> Any:
                    return lambda e: e.event == "call" and e.data["tool"] == tool

                alice_seen = await alice_events.until(own_call("mini_sleep"))
                if not any(e.event == "approval" and e.data["status"] == "deny" for e in alice_seen):
                    alice_seen += await alice_events.until(
                        lambda e: e.event == "approval" and e.data["status"] == "deny"
                    )
                # Bob's own call is published after all of Alice's: once it reached Bob,
                # anything of Alice's would have reached him too.
                assert (await bob.call(bob_sid, bob_tid, "mini_echo", {"text": "bob"})).json()["ok"]
                bob_seen = await bob_events.until(own_call("mini_echo"))
            assert {e.data["tenant"] for e in alice_seen if e.event in ("call", "approval")} == {"alice"}
            assert [
                e for e in bob_seen if e.event in ("call", "approval") and e.data["tenant"] != "bob"
            ] == []
            assert any(e.event == "approval" for e in alice_seen)


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        ("http://127.0.0.1:5173", 200),
        ("http://localhost", 200),
        ("http://[::1]:8080", 200),
        ("https://localhost:8443", 200),
        ("null", 403),
        ("http://evil.example", 403),
        ("http://127.0.0.1.evil.example", 403),
        ("http://127.0.0.1@evil.example", 403),
        ("http://localhost:8765/path", 403),
        ("file://", 403),
    ],
)
async def test_origin_must_be_loopback(tmp_path: Path, origin: str, status: int) -> None:
    async with admin_running(config_of(), tmp_path) as api:
        with trio.fail_after(10):
            for path in ("/v1/health", "/v1/servers"):
                reply = await api.http().request("GET", path, headers={"Origin": origin})
                assert reply.status == status, (path, reply)
                if status == 403:
                    assert reply.json()["error"]["code"] == "forbidden"
                    assert "access-control-allow-origin" not in reply.headers


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("localhost:8765", 200),
        ("127.0.0.1", 200),
        ("[::1]:1", 200),
        ("evil.example", 403),
        ("evil.example:8765", 403),
        ("127.0.0.1.evil.example", 403),
        ("127.0.0.1@evil.example", 403),
        ("10.0.0.1:8765", 403),
    ],
)
async def test_host_must_be_loopback_when_bound_to_loopback(tmp_path: Path, host: str, status: int) -> None:
    async with admin_running(config_of(), tmp_path) as api:
        with trio.fail_after(10):
            reply = await api.http().request("GET", "/v1/health", host=host)
            assert reply.status == status, reply
            if status == 403:
                assert "loopback" in reply.json()["error"]["message"]


async def test_bodies_are_bounded_and_malformed_json_is_a_400(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini")), tmp_path) as api:
        http = api.http()
        with trio.fail_after(15):
            sid = await http.session()
            tid = (await http.turn(sid))["turn_id"]
            calls = f"/v1/sessions/{sid}/turns/{tid}/calls"
            huge = b'{"tool": "mini_echo", "arguments": {"text": "' + b"x" * (2 << 20) + b'"}}'
            too_large = await http.request("POST", calls, body=huge)
            assert too_large.status == 413 and too_large.json()["error"]["code"] == "too_large"
            # Without a declared length the bound holds too.
            chunks = await http.request("POST", calls, body=huge, headers={"Transfer-Encoding": "chunked"})
            assert chunks.status == 413 and chunks.json()["error"]["code"] == "too_large"
            chunked = await http.request(
                "POST", "/v1/sessions", body=None, headers={"Transfer-Encoding": "chunked"}
            )
            assert chunked.status == 201  # an empty chunked body is an empty body
            for body in (b"{bad", b"[1, 2]", b'"text"', b"\xff\xfe{}", b"{}" + b" " * 10 + b"x", b"null"):
                for path in ("/v1/sessions", calls, f"/v1/sessions/{sid}/tool_search", "/v1/approvals/x"):
                    reply = await http.request("POST", path, body=body)
                    assert reply.status == 400, (path, body, reply)
                    assert reply.headers["content-type"] == "application/json"
                    assert reply.json()["error"]["code"] == "bad_request"
            # Just under the bound is fine.
            text = "y" * ((1 << 20) - 200)
            fits = await http.call(sid, tid, "mini_echo", {"text": text})
            assert fits.status == 200 and fits.json()["ok"] is True


def _serve(*args: str, **env: str) -> subprocess.Popen[str]:
    environment = {k: v for k, v in os.environ.items() if k != CONFIG_ENV_VAR}
    environment.update(env)
    return subprocess.Popen(
        [sys.executable, "-m", "supervisor.cli", "serve", *args],
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_serve_refuses_a_non_loopback_bind_without_the_flag(tmp_path: Path) -> None:
    proc = _serve("--bind", "0.0.0.0:0", "--state-dir", str(tmp_path / "state"))
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 2
    assert "refusing to bind 0.0.0.0:0" in err and "--allow-non-loopback" in err


def test_serve_starts_the_admin_api_and_stops_on_sigterm(tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    config.write_text(
        json.dumps({"servers": {"mini": {"command": [sys.executable, MINI], "start": "eager"}}})
    )
    proc = _serve("--config", str(config), "--bind", "127.0.0.1:0", "--state-dir", str(tmp_path / "state"))
    try:
        assert proc.stderr is not None
        lines = []
        deadline = time.monotonic() + 15
        url = None
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line, f"serve exited early: {lines}"
            lines.append(line)
            if match := re.search(r" admin api listening url=(http://127\.0\.0\.1:(\d+))$", line.rstrip()):
                url = match[1]
        assert url is not None and not url.endswith(":0"), lines
        connection = http.client.HTTPConnection(url.removeprefix("http://"), timeout=10)
        connection.request("GET", "/v1/health")
        health = connection.getresponse()
        assert health.status == 200 and json.loads(health.read())["status"] == "ok"
        connection.close()
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=20)
        assert proc.returncode == 0
        tail = rest.splitlines()
        assert any(" admin api stopped" in line for line in tail) and " supervisor stopped" in tail[-1], tail
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


PLANTED = "pl4nted-s3cret-value-7788"
PLANTED_TOKEN = "pl4nted-admin-token-4455"
LEAKY_SERVER = """\
import os, sys
sys.stderr.write(os.environ["API_TOKEN"] + "\\n")
sys.stderr.write("admin " + os.environ["ADMIN_TOKEN"] + "\\n")
sys.stderr.flush()
sys.exit(1)
"""


class _Capture(logging.Handler):
    """Every record, raw (message and fields) and as ``serve`` would print it."""

    def __init__(self, formatter: logging.Formatter) -> None:
        super().__init__(logging.DEBUG)
        self.raw: list[str] = []
        self.printed = io.StringIO()
        self.setFormatter(formatter)

    def emit(self, record: logging.LogRecord) -> None:
        self.raw.append(f"{record.getMessage()} {getattr(record, 'fields', '')} {record.exc_text or ''}")
        self.printed.write(self.format(record) + "\n")


@pytest.fixture
def captured_logs() -> Iterator[list[_Capture]]:
    root = logging.getLogger()
    holder: list[_Capture] = []
    level = root.level
    yield holder
    for handler in holder:
        root.removeHandler(handler)
    root.setLevel(level)


async def test_a_planted_secret_appears_in_no_answer_event_or_log_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, captured_logs: list[_Capture]
) -> None:
    monkeypatch.setenv("PLANTED", PLANTED)
    monkeypatch.setenv("ADMIN_TOKEN", PLANTED_TOKEN)
    script = tmp_path / "leaky.py"
    script.write_text(LEAKY_SERVER)
    config_file = tmp_path / "c.json"
    config_file.write_text(
        json.dumps(
            {
                "servers": {
                    "leaky": {
                        "command": [sys.executable, str(script)],
                        "env": {"API_TOKEN": "${env:PLANTED}"},
                        "start": "eager",
                        "reconnect_schedule_s": [0.1],
                    },
                    "mini": {
                        "command": [sys.executable, MINI],
                        "trusted": True,
                        "env": {"K": "${env:PLANTED}"},
                    },
                },
                "admin": {"tokens": {"${env:ADMIN_TOKEN}": "alice"}},
            }
        )
    )
    config = load_config(str(config_file))
    capture = _Capture(StructuredFormatter(Redactor(config.secrets)))
    captured_logs.append(capture)
    root = logging.getLogger()
    root.addHandler(capture)
    root.setLevel(logging.DEBUG)

    seen: list[bytes] = []
    async with admin_running(config, tmp_path / "state") as api:
        http = api.http(PLANTED_TOKEN)
        with trio.fail_after(30):
            async with http.stream("GET", "/v1/events") as events:
                while True:  # a detail with the crash in its stderr tail (bounded by fail_after)
                    detail = await http.request("GET", "/v1/servers/leaky")
                    data = detail.json()
                    if data["reconnects"] >= 2 and data["stderr_tail"]:
                        break
                    await trio.sleep(0.01)
                assert "***" in (data["last_error"] or "") and any(
                    "***" in line for line in data["stderr_tail"]
                )
                sid = await http.session()
                tid = (await http.turn(sid))["turn_id"]
                # A tool that hands the secret back: the answer masks it.
                echoed = await http.call(
                    sid, tid, "mini_echo", {"text": f"value {PLANTED} and {PLANTED_TOKEN}"}
                )
                assert echoed.json()["text"] == "value *** and ***"
                path = f"/v1/sessions/{sid}/turns/{tid}/calls"
                async with http.stream(
                    "POST", path, json={"tool": "mini_echo", "arguments": {"text": PLANTED}}
                ) as s:
                    streamed = await s.rest()
                    seen.append(s.raw)
                assert streamed[1] == Sse("result", {**streamed[1].data, "text": "***"})
                replies = [detail, echoed]
                ids = {"sid": sid, "tid": tid, "approval_id": "a", "rid": "r", "name": "leaky"}
                for route in ROUTES:
                    if route.operation not in ("events", "delete_session"):
                        body = {"tool": "mini_echo", "arguments": {"text": PLANTED}, "query": PLANTED}
                        replies.append(
                            await http.request(route.method, path_of(route.operation, **ids), json=body)
                        )
                replies.append(await api.http("wrong-token-xyz").request("GET", "/v1/servers"))
                replies.append(await api.http(PLANTED_TOKEN + "x").request("GET", "/v1/servers"))
                replies.append(await http.request("DELETE", f"/v1/sessions/{sid}"))
                await events.until(lambda e: e.event == "state" and e.data["state"] == "backoff")
                await events.until(lambda e: e.event == "call" and e.data["tool"] == "mini_echo")
                seen.append(events.raw)
            seen += [reply.raw for reply in replies]
    everything = b"\n".join(seen).decode()
    assert "backoff" in everything and "mini_echo" in everything  # the greps below looked at real output
    logs = capture.printed.getvalue() + "\n".join(capture.raw)
    assert "leaky" in logs and "***" in logs
    for secret in (PLANTED, PLANTED_TOKEN):
        assert secret not in everything
        assert secret not in logs
        assert secret[:12] not in everything + logs  # not even a fragment


async def test_an_address_in_use_is_one_clear_error(tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        async with Supervisor.open(config_of(), state_dir=tmp_path) as sup, trio.open_nursery() as nursery:
            with trio.fail_after(10), pytest.raises(BindError) as caught:
                await nursery.start(serve, sup, f"127.0.0.1:{port}")
            assert f"cannot listen on 127.0.0.1:{port}" in str(caught.value)
            assert "--bind" in str(caught.value)
            assert not sup.approvals.remote  # restored: nobody would answer an operator request
    finally:
        taken.close()


@pytest.mark.parametrize("bind", ["localhost:0", "[::1]:0"])
async def test_other_loopback_binds_serve_with_their_own_host(tmp_path: Path, bind: str) -> None:
    async with Supervisor.open(config_of(), state_dir=tmp_path) as sup, trio.open_nursery() as nursery:
        with trio.fail_after(10):
            url = await nursery.start(serve, sup, bind)
            assert not url.endswith(":0"), url
            http = Http(url)
            assert (await http.request("GET", "/v1/health")).status == 200  # Host: the URL's authority
            assert (await http.request("GET", "/v1/health", host="evil.example")).status == 403
        nursery.cancel_scope.cancel()
