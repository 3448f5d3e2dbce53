"""Two replicas on one PostgreSQL database, each with its admin API: their heartbeat
rows, ``GET /v1/replicas`` with a config that differs, readiness while draining, and
the replica id in events, audit rows and metrics."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import attrs
import psycopg
import pytest
import trio

from supervisor.cluster.heartbeats import Heartbeats
from supervisor.cluster.replica import events_for, identity_for
from supervisor.server.serving import serve
from supervisor.service import Supervisor
from supervisor.store.postgres import open_postgres
from tests.support.admin import ALICE, conforms, until, wait_for
from tests.support.fakes import FakeServer
from tests.support.replica_configs import OPS, TOOL, received, replica_config, replica_running


def audit_replicas(url: str) -> list[str | None]:
    with psycopg.connect(url) as connection:
        return [row[0] for row in connection.execute("SELECT replica FROM audit").fetchall()]


async def test_two_replicas_see_each_other_and_a_config_that_differs(
    tmp_path: Path, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "supervisor.cluster")
    one_config = replica_config(postgres_url, "r1")
    two_config = replica_config(postgres_url, "r2", approval_timeout_s=5)  # another config
    async with replica_running(one_config, tmp_path / "one") as one:
        assert one.sup.heartbeats is not None and one.sup.replica is not None
        with one.sup.events.subscribe() as feed:
            async with replica_running(two_config, tmp_path / "two") as two:
                ops = one.http(OPS)
                body = await wait_for(
                    ops, "/v1/replicas", lambda b: [bool(r["address"]) for r in b["replicas"]] == [True, True]
                )
                conforms("list_replicas", await ops.request("GET", "/v1/replicas"))
                assert body["clustered"] is True
                mine, other = body["replicas"]
                assert (mine["id"], mine["self"], mine["config_matches"], mine["alive"]) == (
                    "r1",
                    True,
                    True,
                    True,
                )
                assert (other["id"], other["self"], other["config_matches"]) == ("r2", False, False)
                assert mine["address"] == one.url and other["address"] == two.url
                assert mine["incarnation"] == one.sup.replica.incarnation and mine["state"] == "serving"
                assert 0 <= mine["heartbeat_age_s"] < 1 and mine["config_digest"] == one.sup.heartbeats.digest
                # the tenant role reads it too, as it reads /v1/servers
                assert (await one.http(ALICE).request("GET", "/v1/replicas")).status == 200

                # one warning and one event about r2's config, however many beats follow
                await until(lambda: any("replica config differs" in r.getMessage() for r in caplog.records))
                await trio.sleep(0.6)
                warned = [r for r in caplog.records if "replica config differs" in r.getMessage()]
                assert len(warned) == 2  # r1 about r2, and r2 about r1
                events = received(feed)
                assert {event["replica"] for event in events} == {"r1"}  # every event names its replica
                differs = [event for event in events if event["type"] == "replica_config_differs"]
                assert differs == [
                    {
                        "type": "replica_config_differs",
                        "peer": "r2",
                        "peer_digest": two.sup.heartbeats.digest,  # type: ignore[union-attr]
                        "config_digest": one.sup.heartbeats.digest,
                        "replica": "r1",
                    }
                ]

                # a call's audit row names the replica that answered it
                async with two.sup.session() as session:
                    assert (await (await session.begin_turn()).call("fake_echo", {"text": "hi"})).ok
                await until(lambda: audit_replicas(postgres_url) == ["r2"])

                metrics = (await two.http(OPS).request("GET", "/metrics")).body.decode()
                incarnation = two.sup.replica.incarnation  # type: ignore[union-attr]
                assert f'mcp_supervisor_replica_info{{replica="r2",incarnation="{incarnation}"}} 1' in metrics
                assert "mcp_supervisor_replica_draining 0" in metrics

            # r2 stopped cleanly: its row is gone at once, not after its TTL
            after = (await ops.request("GET", "/v1/replicas")).json()["replicas"]
            assert [r["id"] for r in after] == ["r1"]


async def test_readiness_turns_503_while_draining_and_the_row_says_so(
    tmp_path: Path, postgres_url: str
) -> None:
    async with replica_running(replica_config(postgres_url, "r1"), tmp_path) as one:
        anyone = one.http()  # no token: a load balancer's health check
        ready = await anyone.request("GET", "/v1/ready")
        assert (ready.status, ready.json()) == (200, {"ready": True})
        conforms("ready", ready)
        heartbeats = one.sup.heartbeats
        assert heartbeats is not None
        await heartbeats.drain_written()
        refused = await anyone.request("GET", "/v1/ready")
        assert refused.status == 503 and refused.json()["ready"] is False
        assert refused.json()["reason"] == "draining: this replica is stopping"
        conforms("ready", refused)
        with open_postgres(postgres_url) as store:
            (row,) = store.replicas()
        assert (row.id, row.state, row.alive) == ("r1", "draining", True)


async def test_a_replica_whose_heartbeat_cannot_be_written_is_not_ready(
    tmp_path: Path, postgres_url: str
) -> None:
    async with replica_running(replica_config(postgres_url, "r1"), tmp_path) as one:
        heartbeats = one.sup.heartbeats
        assert heartbeats is not None
        with psycopg.connect(postgres_url, autocommit=True) as admin:  # the table goes away
            admin.execute("ALTER TABLE replicas RENAME TO replicas_gone")
            try:
                with trio.fail_after(5):
                    while True:
                        reply = await one.http().request("GET", "/v1/ready")
                        if reply.status != 200:
                            break
                        await trio.sleep(0.05)
                assert reply.json()["reason"].startswith("heartbeat stale")
                assert not heartbeats.fresh and heartbeats.failures >= 3
            finally:
                admin.execute("ALTER TABLE replicas_gone RENAME TO replicas")
        await until(lambda: heartbeats.fresh, timeout_s=5)
        assert (await one.http().request("GET", "/v1/ready")).status == 200


async def test_serve_marks_the_row_draining_before_its_listener_closes(
    tmp_path: Path, postgres_url: str
) -> None:
    seen: list[tuple[str, bool]] = []
    server = FakeServer([TOOL])
    config = replica_config(postgres_url, "r1")
    async with Supervisor.open(config, state_dir=tmp_path, connector=server.connector) as sup:
        heartbeats = sup.heartbeats
        assert heartbeats is not None
        real_open = heartbeats._open

        def spying_open() -> object:
            store = real_open()
            beat = store.beat

            def spied(*args: object, **row: object) -> None:
                beat(*args, **row)  # type: ignore[arg-type]
                if heartbeats.address is not None:
                    host, port = heartbeats.address.removeprefix("http://").split(":")
                    try:
                        socket.create_connection((host, int(port)), timeout=1).close()
                        listening = True
                    except OSError:
                        listening = False
                    seen.append((str(row["state"]), listening))

            store.beat = spied  # type: ignore[method-assign]
            return store

        heartbeats._open = spying_open  # type: ignore[assignment,method-assign]
        heartbeats._store = None  # the next beat opens through the spy
        async with trio.open_nursery() as nursery:
            await nursery.start(serve, sup, "127.0.0.1:0")
            await until(lambda: bool(seen))
            nursery.cancel_scope.cancel()  # as SIGTERM does
    assert ("serving", True) in seen
    assert ("draining", True) in seen  # written while the listener still took connections
    assert seen.index(("draining", True)) > seen.index(("serving", True))


def test_a_replica_identity_without_a_cluster_section_beats_with_the_defaults() -> None:
    config = attrs.evolve(replica_config("postgresql://u@127.0.0.1:1/d", "r1"), cluster=None)
    replica = identity_for(config)
    heartbeats = Heartbeats.of(replica, config, events_for(replica))
    assert heartbeats is not None and (heartbeats.heartbeat_s, heartbeats.ttl_s) == (0.25, 1.0)
    assert heartbeats.address is None
