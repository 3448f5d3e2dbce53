"""A single process (no ``store.url``) says nothing of replicas: its events, log lines,
audit rows, audit export and metrics are as they were; ``/v1/replicas`` says it is not
clustered, and ``/v1/ready`` is 200 until its drain begins. A replica's lines and
export rows do name it."""

from __future__ import annotations

import logging
from pathlib import Path

import attrs
import orjson
import trio

from actors.redaction import Redactor
from supervisor.admin.app import admin_api, create_app
from supervisor.admin.hosted import HostedSessions
from supervisor.cli.audit_trail import row_line
from supervisor.runtime.logs import StructuredFormatter, stamp_replica
from supervisor.store import AuditRow
from tests.support.admin import conforms
from tests.support.replica_configs import OPS, received, replica_config, replica_running


async def test_a_single_process_names_no_replica_anywhere(tmp_path: Path) -> None:
    async with replica_running(replica_config(None, "r1"), tmp_path) as one:
        sup = one.sup
        assert sup.replica is None and sup.heartbeats is None
        with sup.events.subscribe() as feed:
            async with sup.session() as session:
                assert (await (await session.begin_turn()).call("fake_echo", {"text": "hi"})).ok
            events = received(feed)
        assert events and not any("replica" in event for event in events)
        with trio.fail_after(5):  # the store actor writes rows in batches, behind the answers
            while True:
                rows = await sup.store.read(lambda store: store.audit_rows())
                if rows:
                    break
                await trio.sleep(0.02)
        assert rows and {row.replica for row in rows} == {None}
        ops = one.http(OPS)
        metrics = (await ops.request("GET", "/metrics")).body.decode()
        assert "replica" not in metrics
        replicas = await ops.request("GET", "/v1/replicas")
        assert replicas.json() == {"clustered": False, "replicas": []}
        conforms("list_replicas", replicas)
        assert (await one.http().request("GET", "/v1/ready")).json() == {"ready": True}
        app = create_app(sup, HostedSessions(sup))
        admin_api(app).draining = True  # what serve's drain sets first
        refused = await app.test_client().get("/v1/ready", headers={"Host": "127.0.0.1"})
        assert refused.status_code == 503
        assert (await refused.get_json())["reason"] == "draining: this process is stopping"


def test_log_lines_and_export_rows_name_the_replica_only_when_there_is_one() -> None:
    record = logging.LogRecord("supervisor", logging.INFO, __file__, 1, "started", None, None)
    record.fields = {"servers": 1}
    plain = StructuredFormatter(Redactor(()))
    as_json = StructuredFormatter(Redactor(()), json_lines=True)
    assert plain.format(record).endswith("started servers=1")
    assert "replica" not in orjson.loads(as_json.format(record))
    stamp_replica("r1")
    try:
        assert plain.format(record).endswith("started servers=1 replica=r1")
        assert orjson.loads(as_json.format(record))["replica"] == "r1"
    finally:
        stamp_replica(None)
    assert "replica" not in plain.format(record)

    row = AuditRow(1700000000.5, "t1", "s1", "time_now", "time", "allow", "ok", 7, "ff", 3, 0)
    assert "replica" not in orjson.loads(row_line(row))
    assert orjson.loads(row_line(attrs.evolve(row, replica="r1")))["replica"] == "r1"
