"""The audit's retention (``audit.keep_days``, ``supervisor/runtime/retention.py``):
rows older than the bound go at start and every hour after, each purge counted in a
log line; without the key nothing is purged. On Trio's MockClock; the rows' own times
are unix times, so the old ones are written old."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio
import trio.testing

from actors.log_events import event_name, record_fields
from supervisor import Supervisor
from supervisor.runtime.retention import DAY_S, PURGE_EVERY_S, keep_audit
from supervisor.settings.loader import ConfigError, load_config
from supervisor.settings.model import AuditSettings, Config
from supervisor.store import DB_FILENAME, AuditRow, Store, StoreActor
from tests.support.admin import until


def aged(days: float, n: int) -> AuditRow:
    at = time.time() - days * DAY_S
    return AuditRow(at, "t", "s", f"tool_{n}", "srv", "allow", "ok", 1, "0" * 64, 2, 3, f"r{n}", None, "ada")


async def test_old_rows_go_at_start_and_every_hour_each_purge_counted(
    tmp_path: Path, thread_safe_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO")
    with Store.open(tmp_path / "db.sqlite") as store:
        store.add_audit([aged(100, 1), aged(91, 2), aged(89, 3), aged(0, 4)])
        actor = StoreActor(store)
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            await nursery.start(keep_audit, actor, 90.0)
            await trio.sleep(1)
            assert sorted(row.tool for row in store.audit_rows()) == ["tool_3", "tool_4"]
            store.add_audit([aged(95, 5)])  # as if it had aged past the bound meanwhile
            await trio.sleep(PURGE_EVERY_S - 2)
            assert len(store.audit_rows()) == 3  # not yet: the next purge is an hour after the first
            await trio.sleep(2)
            assert sorted(row.tool for row in store.audit_rows()) == ["tool_3", "tool_4"]
            nursery.cancel_scope.cancel()
    counted = [record_fields(r) for r in caplog.records if event_name(r).startswith("audit rows purged")]
    assert [fields["rows"] for fields in counted] == [2, 1]
    assert all(fields["keep_days"] == 90.0 for fields in counted)


def test_keep_days_is_read_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"servers": {}}')
    assert load_config(path).audit.keep_days is None  # the default: keep every row
    path.write_text('{"servers": {}, "audit": {"keep_days": 90}}')
    assert load_config(path).audit.keep_days == 90.0
    path.write_text('{"servers": {}, "audit": {"keep_days": null}}')
    assert load_config(path).audit.keep_days is None
    for bad, says in (("0", "expected a number greater than 0"), ('"90d"', "expected a number, got")):
        path.write_text(f'{{"servers": {{}}, "audit": {{"keep_days": {bad}}}}}')
        with pytest.raises(ConfigError, match=rf"\$\.audit\.keep_days: {says}"):
            load_config(path)
    path.write_text('{"servers": {}, "audit": {"keep": 90}}')
    with pytest.raises(ConfigError, match=r"\$\.audit"):
        load_config(path)


async def test_a_supervisor_with_keep_days_purges_at_start(tmp_path: Path) -> None:
    with Store.open(tmp_path / DB_FILENAME) as store:
        store.add_audit([aged(40, 1), aged(1, 2)])
    config = Config(audit=AuditSettings(keep_days=30))
    async with Supervisor.open(config, state_dir=tmp_path) as sup:
        await until(lambda: len(sup.store.store.audit_rows()) == 1, timeout_s=5)
        assert [row.tool for row in sup.store.store.audit_rows()] == ["tool_2"]
