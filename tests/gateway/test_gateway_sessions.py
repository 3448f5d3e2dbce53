"""The registry of ``/mcp`` sessions (``supervisor/gateway/http_sessions.py``), in
virtual time: idle expiry (never with a call in flight), the per-tenant bound,
the open/close events and the listing; and the SSE streams' ids, replay and takeover."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from supervisor import Supervisor
from supervisor.admin.app import create_app
from supervisor.admin.hosted import HostedSessions
from supervisor.gateway.http_app import McpApp
from supervisor.gateway.http_front import McpFront
from supervisor.gateway.http_sessions import (
    GatewaySession,
    GatewaySessions,
    TooManyGatewaySessions,
    session_item,
)
from supervisor.gateway.listing import GatewayListing
from supervisor.gateway.outlet import Outlet
from supervisor.gateway.sse_events import EventStream, parse_event_id
from supervisor.settings.model import GatewaySettings
from supervisor.web.guard import Guard
from supervisor.web.scrubber import SecretScrubber
from tests.support.admin import config_of
from tests.support.asgi import asgi_request
from tests.support.gateway_http import initialize, parse_sse, request

IDLE_S = 600.0


@asynccontextmanager
async def registry(tmp_path: Path, **gateway: Any) -> AsyncIterator[tuple[Supervisor, GatewaySessions]]:
    config = attrs.evolve(config_of(), gateway=GatewaySettings(session_idle_s=IDLE_S, **gateway))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, trio.open_nursery() as nursery:
        sessions = GatewaySessions(sup, version="9")
        await nursery.start(sessions.run)
        yield sup, sessions
        nursery.cancel_scope.cancel()


async def test_an_idle_session_expires_but_never_with_a_call_in_flight(
    tmp_path: Path, thread_safe_clock: trio.testing.MockClock
) -> None:
    async with registry(tmp_path) as (sup, sessions):
        with sup.events.subscribe() as events:
            record = await sessions.open("alice")
            answer = await record.peer.receive(initialize(), record.outlet())
            assert answer is not None and answer["result"]["serverInfo"] == {
                "name": "mcp-supervisor",
                "version": "9",
            }
            sessions.announce(record)
            opened = await events.events.receive()
            assert opened["type"] == "gateway_session_opened" and opened["tenant"] == "alice"
            assert opened["client"] == {"name": "raw-test", "version": "1"}

            await trio.sleep(IDLE_S - 1)
            record.touch()  # a request: the clock starts again
            await trio.sleep(IDLE_S - 1)
            assert sessions.get(record.id, "alice") is record

            record.peer.core.in_flight = 1  # a call that outlasts the idle time
            await trio.sleep(IDLE_S * 3)
            assert sessions.get(record.id, "alice") is record
            record.peer.core.in_flight = 0
            record.touch()  # its answer
            began = trio.current_time()
            with trio.fail_after(IDLE_S * 2):
                await record.closed.wait()
            assert trio.current_time() - began == pytest.approx(IDLE_S, abs=1)
            assert sessions.get(record.id, None) is None and len(sessions) == 0
            closed = await events.events.receive()
            assert closed == {"type": "gateway_session_closed", "tenant": "alice", "session": record.id}


async def test_the_per_tenant_bound_refuses_the_session_over_it_naming_the_bound(
    tmp_path: Path, thread_safe_clock: trio.testing.MockClock
) -> None:
    async with registry(tmp_path, max_sessions_per_tenant=2) as (_sup, sessions):
        first = await sessions.open("alice")
        await sessions.open("alice")
        with pytest.raises(TooManyGatewaySessions, match=r"2 MCP sessions.*gateway\.max_sessions_per_tenant"):
            await sessions.open("alice")
        await sessions.open("bob")  # another tenant's bound is its own
        assert await sessions.close(first.id, "bob") is False  # not bob's
        assert await sessions.close(first.id, "alice") is True
        await sessions.open("alice")  # room again
        assert [r.tenant for r in sessions.listing(None)].count("alice") == 2
        assert len(sessions.listing("bob")) == 1
        item = session_item(sessions.listing("bob")[0])
        assert item["tenant"] == "bob" and item["era"] == "handshake" and item["in_flight"] == 0
        assert item["turns"] == 0 and item["protocol_version"] is None


async def test_a_stream_numbers_its_events_replays_after_an_id_and_ends_with_its_response(
    autojump_clock: trio.testing.MockClock,
) -> None:
    stream = EventStream("3")
    stream.publish({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
    stream.publish({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 2}})
    stream.publish({"jsonrpc": "2.0", "id": 7, "result": {}}, response=True)
    assert stream.related == 2 and stream.response == {"jsonrpc": "2.0", "id": 7, "result": {}}
    body = b"".join([chunk async for chunk in stream.follow(1)])
    events = parse_sse(body)
    assert events[0].id == "3-1" and events[0].data is None and events[0].retry == 1000
    assert [(e.id, e.data.get("id")) for e in events[1:]] == [("3-2", None), ("3-3", 7)]
    assert parse_event_id("3-2") == ("3", 2) and parse_event_id("x") is None and parse_event_id("-1") is None


async def test_the_standalone_stream_keeps_what_no_get_took_and_a_newer_get_takes_over(
    autojump_clock: trio.testing.MockClock,
) -> None:
    stream = EventStream("0")
    stream.publish({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    first = stream.follow(stream.delivered, stream.take_over())
    assert (await first.__anext__()).startswith(b"id: 0-0\nretry:")
    assert b"list_changed" in await first.__anext__()
    second = stream.follow(stream.delivered, stream.take_over())
    assert (await second.__anext__()).startswith(b"id: 0-1\n")  # nothing replayed twice
    with pytest.raises(StopAsyncIteration):
        await first.__anext__()  # taken over: the old GET ends
    stream.publish({"jsonrpc": "2.0", "method": "notifications/resources/list_changed"})
    assert b"0-2" in await second.__anext__()
    stream.finish()
    with pytest.raises(StopAsyncIteration):
        await second.__anext__()


async def test_a_response_published_while_the_follower_waits_at_a_yield_is_still_sent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    stream = EventStream("1")
    stream.publish({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
    body = stream.follow(0)
    await body.__anext__()  # priming
    assert b"progress" in await body.__anext__()  # the body waits here for the client to read
    stream.publish({"jsonrpc": "2.0", "id": 7, "result": {}}, response=True)
    assert b'"id":7' in await body.__anext__()


class Discoverer:
    """A stand-in ``NewEraHandler``: reports progress on the request's outlet, then answers."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def receive(
        self,
        message: Mapping[str, Any],
        outlet: Outlet,
        tenant: str,
        arrival: object = None,
        person: str | None = None,
    ) -> dict[str, Any] | None:
        self.seen.append((str(message.get("method")), tenant))
        if "id" not in message:
            return None
        await outlet.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
        return {"jsonrpc": "2.0", "id": message["id"], "result": {"supportedVersions": ["2026-07-28"]}}

    async def check_headers(
        self,
        message: Mapping[str, Any],
        param_headers: Mapping[str, str],
        tenant: str,
        person: str | None = None,
    ) -> dict[str, Any] | None:
        return None


async def test_new_era_messages_go_to_the_handler_with_the_tokens_tenant(tmp_path: Path) -> None:
    handler = Discoverer()
    async with registry(tmp_path) as (sup, sessions):
        scrubber = SecretScrubber(())
        guard = Guard(lambda: sup.config, bind_is_loopback=True, scrubber=scrubber)
        app = McpApp(McpFront(sup, sessions, handler, scrubber.scrub), guard)
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}
        with trio.fail_after(10):
            discover = {**headers, "Mcp-Method": "server/discover"}
            reply = await asgi_request(
                app, "POST", "/mcp", json=request(1, "server/discover"), headers=discover
            )
            assert reply.status == 200 and reply.headers["content-type"] == "text/event-stream"
            events = parse_sse(reply.body)
            assert [e.data for e in events[1:]] == [
                {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}},
                {"jsonrpc": "2.0", "id": 1, "result": {"supportedVersions": ["2026-07-28"]}},
            ]
            note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
            taken = await asgi_request(app, "POST", "/mcp", json=note, headers=headers)
            assert taken.status == 202
    assert handler.seen == [("server/discover", "default"), ("notifications/cancelled", "default")]


async def test_a_session_task_runs_with_each_session_and_its_messages_go_to_the_get_stream(
    tmp_path: Path, thread_safe_clock: trio.testing.MockClock
) -> None:
    ran: list[str] = []

    async def notices(record: GatewaySession) -> None:
        ran.append(record.id)
        try:
            await record.outlet().send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            await trio.sleep_forever()
        finally:
            ran.append(f"ended {record.id}")

    async with registry(tmp_path) as (_sup, sessions):
        sessions.session_tasks.append(notices)
        record = await sessions.open("alice")
        await trio.sleep(1)
        assert ran == [record.id]
        [(_, frame)] = record.standalone.after(0)
        assert b"list_changed" in frame and frame.startswith(b"id: 0-1\n")
        assert await sessions.close(record.id, "alice")
        assert ran == [record.id, f"ended {record.id}"]


async def test_the_metrics_count_sessions_by_outcome_and_what_is_open(
    tmp_path: Path, thread_safe_clock: trio.testing.MockClock
) -> None:
    async with registry(tmp_path, max_sessions_per_tenant=1) as (sup, sessions):
        listing = GatewayListing(sessions, None)
        client = create_app(sup, HostedSessions(sup), gateway=listing).test_client()

        async def metrics() -> dict[str, float]:
            reply = await client.get("/metrics", headers={"Host": "127.0.0.1"})
            assert reply.status_code == 200
            lines = (await reply.get_data()).decode().splitlines()
            ours = (line.rsplit(" ", 1) for line in lines if line.startswith("mcp_supervisor_gateway"))
            return {name: float(value) for name, value in ours}

        first = await sessions.open("alice")
        await first.peer.receive(initialize(), first.outlet())
        sessions.announce(first)
        with pytest.raises(TooManyGatewaySessions):
            await sessions.open("alice")
        first.peer.core.in_flight = 2
        seen = await metrics()
        assert seen["mcp_supervisor_gateway_sessions"] == 1
        assert seen["mcp_supervisor_gateway_requests_in_flight"] == 2
        assert seen['mcp_supervisor_gateway_sessions_total{outcome="opened"}'] == 1
        assert seen['mcp_supervisor_gateway_sessions_total{outcome="refused"}'] == 1
        assert seen['mcp_supervisor_gateway_sessions_total{outcome="closed"}'] == 0
        first.peer.core.in_flight = 0
        assert await sessions.close(first.id, "alice")

        second = await sessions.open("alice")
        await second.peer.receive(initialize(), second.outlet())
        sessions.announce(second)
        with trio.fail_after(IDLE_S * 2):
            await second.closed.wait()  # idle
        seen = await metrics()
        assert seen["mcp_supervisor_gateway_sessions"] == 0
        assert seen['mcp_supervisor_gateway_sessions_total{outcome="opened"}'] == 2
        assert seen['mcp_supervisor_gateway_sessions_total{outcome="closed"}'] == 2
        assert seen['mcp_supervisor_gateway_sessions_total{outcome="expired"}'] == 1
