"""The shipped config/examples/nginx.conf, run by a real nginx over three fake replicas.

Each fake replica is a small HTTP server of this test that answers with its own name and
records every request it got, so a test sees where nginx sent each one and how often.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import h11
import orjson
import trio

from tests.cluster.conftest import StartNginx
from tests.support.admin import Http
from tests.support.nginx import EXAMPLE, TEMPLATE_REPLICAS, command, routing, sandboxed

REPLICAS = ("r1", "r2", "r3")


@attrs.frozen
class Seen:
    """One request as a replica got it."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@attrs.define
class Replica:
    """A fake replica: its port, what it got, and a switch to stop it."""

    name: str
    port: int
    scope: trio.CancelScope
    seen: list[Seen] = attrs.Factory(list)
    release: trio.Event = attrs.Factory(trio.Event)  # ends the /sse answer

    def stop(self) -> None:
        """Close the listener and every connection: the replica is gone."""
        self.scope.cancel()


async def _read_request(conn: h11.Connection, stream: trio.SocketStream) -> Seen | None:
    request, body = None, b""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(65536)
            conn.receive_data(data)
            if not data and request is None:
                return None
        elif isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += bytes(event.data)
        elif isinstance(event, h11.EndOfMessage):
            assert request is not None
            headers = {k.decode().lower(): v.decode() for k, v in request.headers}
            return Seen(request.method.decode(), request.target.decode(), headers, body)
        elif isinstance(event, h11.ConnectionClosed):
            return None


async def _answer(replica: Replica, seen: Seen, conn: h11.Connection, stream: trio.SocketStream) -> bool:
    """Answer one request; False when the connection is to be dropped unanswered."""
    if seen.target == "/drop":
        return False
    if seen.target == "/sse":
        head = [("content-type", "text/event-stream"), ("transfer-encoding", "chunked")]
        await stream.send_all(conn.send(h11.Response(status_code=200, headers=head)))
        await stream.send_all(conn.send(h11.Data(data=b'data: {"n": 1}\n\n')))
        await replica.release.wait()
        await stream.send_all(conn.send(h11.Data(data=b'data: {"n": 2}\n\n')))
    else:
        body = orjson.dumps({"replica": replica.name})
        head = [("content-type", "application/json"), ("content-length", str(len(body)))]
        await stream.send_all(conn.send(h11.Response(status_code=200, headers=head)))
        await stream.send_all(conn.send(h11.Data(data=body)))
    await stream.send_all(conn.send(h11.EndOfMessage()))
    return True


async def _connection(replica: Replica, stream: trio.SocketStream) -> None:
    """Requests on one connection: the shipped file keeps none alive (nginx sends
    ``Connection: close``), but a kept one would be served too."""
    conn = h11.Connection(h11.SERVER)
    async with stream:
        while (seen := await _read_request(conn, stream)) is not None:
            replica.seen.append(seen)
            if not await _answer(replica, seen, conn, stream) or conn.our_state is h11.MUST_CLOSE:
                return
            conn.start_next_cycle()


async def _run_replica(name: str, task_status: trio.TaskStatus[Replica] = trio.TASK_STATUS_IGNORED) -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    replica = Replica(name, listeners[0].socket.getsockname()[1], trio.CancelScope())
    try:
        with replica.scope:
            task_status.started(replica)
            await trio.serve_listeners(functools.partial(_connection, replica), listeners)
    finally:
        for listener in listeners:
            await listener.aclose()


@asynccontextmanager
async def three_replicas(nginx_for: StartNginx) -> AsyncIterator[tuple[dict[str, Replica], Http]]:
    """r1, r2, r3 and nginx in front of them; a client of nginx."""
    async with trio.open_nursery() as nursery:
        replicas = {name: await nursery.start(_run_replica, name) for name in REPLICAS}
        nginx = await nginx_for({name: r.port for name, r in replicas.items()})
        yield replicas, Http(nginx.url)
        nursery.cancel_scope.cancel()


def _bodies(replicas: dict[str, Replica]) -> list[tuple[str, bytes]]:
    return [(name, seen.body) for name, r in replicas.items() for seen in r.seen]


async def test_a_session_reaches_its_own_replica_with_the_forwarded_headers(nginx_for: StartNginx) -> None:
    async with three_replicas(nginx_for) as (replicas, http):
        for name in ("r2", "r3", "r1", "r2", "r2"):
            reply = await http.request(
                "POST", "/mcp", json={"to": name}, headers={"Mcp-Session-Id": f"{name}.xxx.yyy"}
            )
            assert (reply.status, reply.json()) == (200, {"replica": name})
        assert [len(r.seen) for r in replicas.values()] == [1, 3, 1]
        got = replicas["r2"].seen[0]
        assert got.headers["mcp-session-id"] == "r2.xxx.yyy"
        assert got.headers["host"] == "127.0.0.1"  # the client's, so a loopback replica serves it
        assert got.headers["x-forwarded-for"] == "127.0.0.1"
        assert got.headers["x-forwarded-proto"] == "http"
        assert got.body == b'{"to":"r2"}'
        # A prefix that only looks like one (no dot after the id) is no session of r2's.
        for _ in range(6):
            await http.request("POST", "/mcp", json={}, headers={"Mcp-Session-Id": "r2x.yyy"})
        assert {len(r.seen) for r in replicas.values()} == {3, 5}


async def test_a_session_of_a_stopped_replica_reaches_a_backup_and_its_body_arrives_once(
    nginx_for: StartNginx,
) -> None:
    async with three_replicas(nginx_for) as (replicas, http):
        # nginx keeps an idle connection to r2 from this one; stopping r2 closes it.
        first = await http.request("POST", "/mcp", json={"n": 0}, headers={"Mcp-Session-Id": "r2.a.b"})
        assert first.json() == {"replica": "r2"}
        replicas["r2"].stop()
        for n in range(1, 7):
            reply = await http.request("POST", "/mcp", json={"n": n}, headers={"Mcp-Session-Id": "r2.a.b"})
            assert reply.status == 200, reply.body
            assert reply.json()["replica"] in {"r1", "r3"}
        bodies = _bodies(replicas)
        assert sorted(body for _, body in bodies) == sorted(orjson.dumps({"n": n}) for n in range(7))
        assert [name for name, body in bodies if body == b'{"n":0}'] == ["r2"]


async def test_a_post_sent_to_a_replica_that_then_fails_is_not_sent_again(nginx_for: StartNginx) -> None:
    async with three_replicas(nginx_for) as (replicas, http):
        reply = await http.request("POST", "/drop", json={"once": True}, headers={"Mcp-Session-Id": "r2.a.b"})
        assert reply.status == 502
        assert _bodies(replicas) == [("r2", b'{"once":true}')]


async def test_requests_without_a_session_go_round_robin_over_every_replica(nginx_for: StartNginx) -> None:
    async with three_replicas(nginx_for) as (replicas, http):
        for n in range(6):
            reply = await http.request("POST", "/mcp", json={"n": n})
            assert reply.status == 200
        for _ in range(3):
            assert (await http.request("GET", "/v1/servers")).status == 200
        assert [len(r.seen) for r in replicas.values()] == [3, 3, 3]


async def test_an_event_stream_passes_each_event_before_the_answer_ends(nginx_for: StartNginx) -> None:
    sse = {"Mcp-Session-Id": "r3.a.b"}
    async with (
        three_replicas(nginx_for) as (replicas, http),
        http.stream("GET", "/sse", headers=sse) as events,
    ):
        with trio.fail_after(5):  # buffered, the first event would wait for the second
            first = await events.next()
        assert first is not None and first.data == {"n": 1}
        assert not replicas["r3"].release.is_set()
        replicas["r3"].release.set()
        assert [e.data for e in await events.rest()] == [{"n": 2}]


def test_nginx_accepts_the_shipped_file(tmp_path: Path) -> None:
    text = EXAMPLE.read_text()
    conf = tmp_path / "nginx.conf"
    conf.write_text(sandboxed(text, tmp_path))
    added = set(conf.read_text().splitlines()) - set(text.splitlines())
    assert all("_temp_path " in line or "access_log " in line for line in added), added
    done = subprocess.run(command(conf, tmp_path, "-t"), capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert "test is successful" in done.stderr


def test_the_harness_renders_the_shipped_file_unchanged_for_its_own_replicas() -> None:
    """So the tests' routing for any replicas is the shipped file's, not the harness's own."""
    assert routing(TEMPLATE_REPLICAS) == EXAMPLE.read_text()


async def test_a_replica_marked_down_gets_no_new_connection_and_its_sessions_go_to_a_backup(
    nginx_for: StartNginx,
) -> None:
    """The operator's step before stopping a replica (docs/deployment.md): marked down
    and reloaded, it gets nothing new, its sessions reach a backup; marked up, it is back."""
    async with trio.open_nursery() as nursery:
        replicas = {name: await nursery.start(_run_replica, name) for name in REPLICAS}
        nginx = await nginx_for({name: r.port for name, r in replicas.items()})
        http = Http(nginx.url)
        await nginx.route(down={"r2"})
        for n in range(6):
            body = {"n": n}
            answer = await http.request("POST", "/mcp", json=body, headers={"Mcp-Session-Id": "r2.a.b"})
            assert answer.json()["replica"] in {"r1", "r3"}
            spread = await http.request("POST", "/mcp", json=body)
            assert spread.json()["replica"] != "r2"
        assert not replicas["r2"].seen
        await nginx.route(down=())
        back = await http.request("POST", "/mcp", json={"n": 9}, headers={"Mcp-Session-Id": "r2.a.b"})
        assert back.json()["replica"] == "r2"
        nursery.cancel_scope.cancel()
