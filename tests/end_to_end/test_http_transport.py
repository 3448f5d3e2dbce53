"""Remote servers end to end: the real connection actor (through ``Supervisor.open``)
against our Hypercorn fault-injection server on loopback. Real clock, every wait bounded."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.connection.states import State
from actors.redaction import Redactor
from actors.spec import ServerSpec, Start
from supervisor import Supervisor, load_config
from supervisor.admin.views import Clock, server_detail
from supervisor.settings.model import Config
from tests.support.paths import SERVERS

sys.path.insert(0, str(SERVERS))
from http_fault_server import FaultOptions, FaultServer, serve_fault_server

WAIT_S = 10.0
STOPPED_RESPONDING = "MCP server stopped responding during tools/call {}"


def remote(url: str, **options: Any) -> ServerSpec:
    options.setdefault("trusted", True)  # these tests are about connections, not trust
    options.setdefault("reconnect_schedule_s", (0.2,))
    options.setdefault("shutdown_grace_s", 1.0)
    return ServerSpec(name="far", type="remote", url=url, **options)


@asynccontextmanager
async def fault_server(**options: Any) -> AsyncIterator[FaultServer]:
    async with trio.open_nursery() as nursery:
        server: FaultServer = await nursery.start(serve_fault_server, FaultOptions(**options))
        yield server
        nursery.cancel_scope.cancel()


async def wait_state(sup: Supervisor, states: Sequence[State], name: str = "far") -> None:
    with trio.fail_after(WAIT_S):
        await sup.router.cell.wait_until(lambda c: c.servers[name].state in states)


async def wait_reconnected(sup: Supervisor, server: FaultServer, initializes: int = 2) -> None:
    """Wait for the ``initializes``-th handshake, then for steady (the old steady may
    still be showing right after a call failed)."""
    await server.wait_for(lambda: len(server.rpc_seen("initialize")) >= initializes)
    await wait_state(sup, [State.STEADY])


@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_handshake_list_and_call_with_session_and_version_headers(tmp_path: Path, mode: str) -> None:
    async with fault_server(mode=mode) as server:
        config = Config(servers=(remote(server.url),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            turn = await session.begin_turn()
            assert {"far_echo", "far_sleep", "far_drop"} <= {t.id for t in turn.tools}
            result = await turn.call("far_echo", {"text": "hello"})
            assert result.ok and result.text == "hello", result
            slow = await turn.call("far_sleep", {"seconds": 0.05})
            assert slow.ok and slow.text == "slept", slow
            status = await sup.connection_status("far")
            assert status is not None and status.transport == f"streamable-http {server.url}"
        session_id = server.rpc_seen("tools/list")[0].headers["mcp-session-id"]
        probe, initialize, *later = [s for s in server.seen if s.method == "POST"]
        assert probe.rpc == "server/discover"  # a handshake-era server: it falls back
        assert "mcp-session-id" not in probe.headers
        assert initialize.rpc == "initialize"
        assert "mcp-session-id" not in initialize.headers and "mcp-protocol-version" not in initialize.headers
        for seen in later:
            assert seen.headers["mcp-session-id"] == session_id
            assert seen.headers["mcp-protocol-version"] == "2025-11-25"
            assert seen.headers["accept"] == "application/json, text/event-stream"
            assert seen.headers["content-type"] == "application/json"
        gets = [s for s in server.seen if s.method == "GET"]
        assert gets and gets[0].headers["accept"] == "text/event-stream"
        assert gets[0].headers["mcp-session-id"] == session_id
        assert server.deleted == [session_id]  # DELETE on teardown


async def test_concurrent_calls_do_not_wait_for_each_other(tmp_path: Path) -> None:
    async with fault_server(mode="json") as server:
        config = Config(servers=(remote(server.url),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            turn = await session.begin_turn()
            results: list[Any] = []

            async def call() -> None:
                results.append(await turn.call("far_sleep", {"seconds": 0.6}))

            start = trio.current_time()
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(call)
            assert trio.current_time() - start < 1.5  # three 0.6 s calls ran side by side
            assert [r.text for r in results] == ["slept"] * 3


@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_dropped_stream_fails_the_call_at_once_then_reconnects(tmp_path: Path, mode: str) -> None:
    async with fault_server(mode=mode) as server:
        config = Config(servers=(remote(server.url, call_timeout_s=30.0),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            turn = await session.begin_turn()
            start = trio.current_time()
            dropped = await turn.call("far_drop", {})
            assert trio.current_time() - start < 2.0  # not the 30 s call timeout
            assert dropped.error is not None
            assert dropped.error.message == STOPPED_RESPONDING.format("drop")
            await wait_reconnected(sup, server)
            again = await (await session.begin_turn()).call("far_echo", {"text": "back"})
            assert again.ok and again.text == "back", again
            reasons = [t.reason or "" for t in sup.servers()["far"].transitions if t.state is State.BACKOFF]
            assert any(
                "connection dropped during tools/call" in r or "ended the stream" in r for r in reasons
            )
        assert len([s for s in server.seen if s.rpc == "initialize"]) == 2


@pytest.mark.parametrize("mode", ["json", "sse", "legacy"])
async def test_an_answer_that_is_not_json_breaks_the_protocol_and_reconnects(
    tmp_path: Path, mode: str
) -> None:
    # A body or an event is decoded once, by the transport: one that does not decode is
    # the codec's ProtocolError, which ends the connection, as a bad line does on stdio.
    options = {"legacy": True} if mode == "legacy" else {"mode": mode}
    transport = "sse" if mode == "legacy" else "streamable-http"
    async with fault_server(**options) as server:
        config = Config(servers=(remote(server.url, call_timeout_s=30.0, transport=transport),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            turn = await session.begin_turn()
            start = trio.current_time()
            broken = await turn.call("far_garbage", {})
            assert trio.current_time() - start < 2.0  # not the 30 s call timeout
            assert broken.error is not None
            assert broken.error.message == STOPPED_RESPONDING.format("garbage")
            await wait_reconnected(sup, server)
            reasons = [t.reason or "" for t in sup.servers()["far"].transitions if t.state is State.BACKOFF]
            what = "event" if mode != "json" else "body"
            assert len(reasons) == 1, reasons
            assert reasons[0].startswith(f"mcp server far broke the protocol: {what} is not JSON (")
            assert reasons[0].endswith("): '<html>not json</html>'")
            again = await (await session.begin_turn()).call("far_echo", {"text": "back"})
            assert again.ok and again.text == "back", again


async def test_expired_session_leads_to_a_new_session(tmp_path: Path) -> None:
    # initialized, tools/list and one call fit in a session; the next request gets 404
    async with fault_server(expire_after=3) as server:
        config = Config(servers=(remote(server.url),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            turn = await session.begin_turn()
            assert (await turn.call("far_echo", {"text": "1"})).ok
            expired = await turn.call("far_echo", {"text": "2"})
            assert expired.error is not None and expired.error.code == "unavailable"
            await wait_reconnected(sup, server)
            assert (await (await session.begin_turn()).call("far_echo", {"text": "3"})).text == "3"
            view = sup.servers()["far"]
            assert any("ended the session (HTTP 404" in (t.reason or "") for t in view.transitions)
        initializes = server.rpc_seen("initialize")
        assert len(initializes) == 2
        first, second = (s.headers.get("mcp-session-id") for s in server.rpc_seen("tools/list"))
        assert first and second and first != second
        assert all("mcp-session-id" not in s.headers for s in initializes)  # a fresh initialize


async def test_server_error_backs_off_with_the_status_in_the_reason(tmp_path: Path) -> None:
    async with fault_server(fail_status=500) as server:
        config = Config(servers=(remote(server.url, start=Start.EAGER),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup:
            await wait_state(sup, [State.BACKOFF])
            reason = sup.servers()["far"].last_error or ""
            assert "answered initialize with HTTP 500" in reason
            await server.wait_for(lambda: len(server.rpc_seen("initialize")) >= 2)  # retried on schedule


async def test_server_error_mid_session_fails_the_call_and_backs_off(tmp_path: Path) -> None:
    async with fault_server(fail_status=503, fail_after=3) as server:
        config = Config(servers=(remote(server.url, protocol="2025-11-25"),))  # counts requests: no probe
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            turn = await session.begin_turn()
            failed = await turn.call("far_echo", {"text": "x"})
            assert failed.error is not None
            assert failed.error.message == STOPPED_RESPONDING.format("echo")
            await wait_state(sup, [State.BACKOFF])
            assert "answered tools/call with HTTP 503" in (sup.servers()["far"].last_error or "")


PLANTED = "s3cret-planted"


@pytest.mark.parametrize("registered", [True, False])
async def test_unauthorized_reads_authentication_failed_and_leaks_no_header(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, registered: bool
) -> None:
    """401 after three requests; the planted credential appears nowhere we can look.

    ``registered``: the spec knows the secret (as the loader makes it) or not at all, so
    the transport itself is shown to keep header values out of its texts.
    """
    caplog.set_level(logging.DEBUG)
    async with fault_server(require_auth=f"Bearer {PLANTED}", unauthorized_after=3) as server:
        if registered:
            monkeypatch.setenv("PLANTED_TOKEN", PLANTED)
            path = tmp_path / "config.json"
            entry = {"url": server.url, "headers": {"Authorization": "Bearer ${env:PLANTED_TOKEN}"},
                     "trusted": True, "reconnect_schedule_s": [0.2], "protocol": "2025-11-25"}  # fmt: skip
            path.write_text(json.dumps({"mcpServers": {"far": entry}}))
            config = load_config(path)
            assert PLANTED in config.servers[0].secrets
        else:
            headers = {"Authorization": f"Bearer {PLANTED}"}  # counts requests: no probe
            config = Config(servers=(remote(server.url, headers=headers, protocol="2025-11-25"),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            turn = await session.begin_turn()
            failed = await turn.call("far_echo", {"text": "x"})
            assert failed.error is not None
            # the model sees the sanitized text, never the server's 401 body
            assert failed.as_dict()["error"] == {"code": "auth_failed", "message": "authentication failed"}
            await wait_state(sup, [State.BACKOFF])
            view = sup.servers()["far"]
            assert view.last_error == "mcp server far: authentication failed"
            status = await sup.connection_status("far")
            detail = server_detail(view, status, Clock.read(), Redactor(()))  # no redaction help
            assert PLANTED not in json.dumps(detail)
            assert PLANTED not in failed.as_dict().__repr__()
    assert server.seen[0].headers["authorization"] == f"Bearer {PLANTED}"  # it was on the wire
    logged = [
        (r.name, r.getMessage(), repr(getattr(r, "fields", None)), r.exc_text or "") for r in caplog.records
    ]
    assert logged and not [line for line in logged if PLANTED in repr(line)]
    assert PLANTED not in caplog.text


@pytest.mark.parametrize("transport", ["sse", "auto"])
async def test_legacy_http_sse_server(tmp_path: Path, transport: str) -> None:
    async with fault_server(legacy=True) as server:
        config = Config(servers=(remote(server.url, transport=transport),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            turn = await session.begin_turn()
            result = await turn.call("far_echo", {"text": "old"})
            assert result.ok and result.text == "old", result
            status = await sup.connection_status("far")
            assert status is not None and status.transport == f"sse {server.url}"
        posts = [(s.path, s.rpc) for s in server.seen if s.method == "POST"]
        expected = [("/messages", "initialize"), ("/messages", "notifications/initialized")]
        if transport == "auto":  # tried Streamable HTTP first (the probe too), was answered 405, fell back
            expected[:0] = [("/mcp", "server/discover"), ("/mcp", "initialize")]
        assert posts[: len(expected)] == expected


async def test_streamable_only_server_refuses_sse_config_with_a_hint(tmp_path: Path) -> None:
    async with fault_server(get_stream=False) as server:
        config = Config(servers=(remote(server.url, transport="sse", start=Start.EAGER),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup:
            await wait_state(sup, [State.BACKOFF])
            reason = sup.servers()["far"].last_error or ""
            assert "not an HTTP+SSE stream" in reason and '"transport": "streamable-http"' in reason


async def test_legacy_endpoint_on_another_origin_is_refused(tmp_path: Path) -> None:
    async with fault_server(legacy=True, legacy_endpoint="http://evil.example/messages") as server:
        config = Config(servers=(remote(server.url, transport="sse", start=Start.EAGER),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup:
            await wait_state(sup, [State.BACKOFF])
            assert "not on the server's origin" in (sup.servers()["far"].last_error or "")
        assert not [s for s in server.seen if s.method == "POST"]


async def test_get_stream_list_changed_leads_to_a_relist(tmp_path: Path) -> None:
    async with fault_server() as server:
        config = Config(servers=(remote(server.url),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            first = await session.begin_turn()
            await server.wait_for(lambda: bool(server.gets()))
            server.add_tool("fresh")
            with trio.fail_after(WAIT_S):
                await sup.router.cell.wait_until(lambda c: "far_fresh" in c.tools)
            assert "far_fresh" not in first.catalog.tools
            assert (await (await session.begin_turn()).call("far_fresh", {})).ok


async def test_the_get_stream_is_answered_before_the_tools_are_listed(tmp_path: Path) -> None:
    """A server may send a request that belongs to no call on its GET stream, and drops
    it while none is open (the TypeScript SDK does, e.g. an elicitation from a tool
    that names no related request): so the handshake waits, bounded, for the GET
    stream's answer before ``tools/list`` and the calls go out."""
    async with fault_server(get_delay_s=0.3) as server:
        config = Config(servers=(remote(server.url, start=Start.EAGER),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup:
            await wait_state(sup, [State.STEADY])
        listed = server.rpc_seen("tools/list")[0]
        assert server.get_answered_at is not None and listed.at >= server.get_answered_at, (
            listed.at,
            server.get_answered_at,
        )


async def test_get_stream_reopens_with_last_event_id_after_retry(tmp_path: Path) -> None:
    async with fault_server(resumable=True, retry_ms=400) as server:
        config = Config(servers=(remote(server.url, start=Start.EAGER),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup:
            await wait_state(sup, [State.STEADY])
            await server.wait_for(lambda: bool(server.gets()))
            closed_at = trio.current_time()
            server.close_get_streams()
            await server.wait_for(lambda: len(server.gets()) >= 2)
            first, second = [s for s in server.seen if s.method == "GET"][:2]
            assert "last-event-id" not in first.headers
            assert second.headers["last-event-id"].startswith(first.headers["mcp-session-id"])
            assert second.at - closed_at >= 0.35  # the server's retry: 400 ms was honoured
            server.add_tool("late")  # and the reopened stream still delivers
            with trio.fail_after(WAIT_S):
                await sup.router.cell.wait_until(lambda c: "far_late" in c.tools)
            await wait_state(sup, [State.STEADY])
            assert len(server.rpc_seen("initialize")) == 1  # the same connection throughout


async def test_answer_stream_closed_early_is_resumed_by_get(tmp_path: Path) -> None:
    async with fault_server(mode="sse", resumable=True, retry_ms=100) as server:
        config = Config(servers=(remote(server.url),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            turn = await session.begin_turn()
            result = await turn.call("far_hiccup", {})
            assert result.ok and result.text == "hiccup", result
            assert sup.servers()["far"].state is State.STEADY
        resumes = [s for s in server.seen if s.method == "GET" and "last-event-id" in s.headers]
        assert resumes


async def test_answer_stream_that_broke_off_is_resumed_at_once(tmp_path: Path) -> None:
    """Broken off, not ended by the server, while the server stays up: the first GET
    goes at once, not after the server's retry delay (5 s here), and gets the answer."""
    async with fault_server(mode="sse", resumable=True, retry_ms=5000) as server:
        config = Config(servers=(remote(server.url),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            turn = await session.begin_turn()
            start = trio.current_time()
            result = await turn.call("far_drop", {})
            assert result.ok and result.text == "drop", result
            assert trio.current_time() - start < 1.0
            assert sup.servers()["far"].state is State.STEADY
        resumes = [s for s in server.seen if s.method == "GET" and "last-event-id" in s.headers]
        assert len(resumes) == 1
        assert len(server.rpc_seen("initialize")) == 1


async def test_slow_answer_times_out_the_call_but_keeps_the_connection(tmp_path: Path) -> None:
    async with fault_server(delay_s=1.0) as server:
        spec = remote(server.url, call_timeout_s=0.3, init_timeout_s=10.0, ping_timeout_s=5.0)
        async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup, sup.session() as s:
            turn = await s.begin_turn()
            slow = await turn.call("far_echo", {"text": "x"})
            assert slow.error is not None and slow.error.code == "timeout"
            await trio.sleep(1.5)  # the liveness ping (slow, but answered) keeps it up
            assert sup.servers()["far"].state is State.STEADY
            assert len(server.rpc_seen("initialize")) == 1
        assert server.rpc_seen("notifications/cancelled")


async def test_delete_refused_with_405_does_not_hold_up_teardown(tmp_path: Path) -> None:
    async with fault_server(delete_status=405) as server:
        config = Config(servers=(remote(server.url, start=Start.EAGER),))
        with trio.fail_after(WAIT_S):
            async with Supervisor.open(config, state_dir=tmp_path) as sup:
                await wait_state(sup, [State.STEADY])
        assert len(server.deleted) == 1


async def test_unreachable_server_backs_off_naming_the_url(tmp_path: Path) -> None:
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp?token=abc"
    config = Config(servers=(remote(url, start=Start.EAGER),))
    async with Supervisor.open(config, state_dir=tmp_path) as sup:
        await wait_state(sup, [State.BACKOFF])
        reason = sup.servers()["far"].last_error or ""
        assert f"cannot connect to http://127.0.0.1:{port}/mcp" in reason and "abc" not in reason


@pytest.mark.parametrize(
    ("options", "transport", "path", "expected"),
    [
        ({}, "auto", "/nowhere", "speaks neither Streamable HTTP (initialize was answered HTTP 404) nor"),
        ({"legacy": True}, "streamable-http", "/mcp", 'set "transport": "sse" or "auto"'),
        (
            {"legacy": True, "require_auth": "Bearer right"},
            "auto",
            "/mcp",
            "mcp server far: authentication failed",
        ),
        (
            {"legacy": True, "require_auth": "Bearer right"},
            "sse",
            "/mcp",
            "mcp server far: authentication failed",
        ),
    ],
)
async def test_connection_failures_name_the_fix(
    tmp_path: Path, options: dict[str, Any], transport: str, path: str, expected: str
) -> None:
    async with fault_server(**options) as server:
        url = server.url.replace("/mcp", path)
        spec = remote(url, transport=transport, start=Start.EAGER, headers={"Authorization": "Bearer wrong"})
        async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup:
            await wait_state(sup, [State.BACKOFF])
            assert expected in (sup.servers()["far"].last_error or "")
