"""A reload of ``exposure`` and ``limits`` against a real subprocess server: the lists
apply from the next turn, in a new epoch (a turn begun before keeps what it showed);
a rate limit's bucket keeps its tokens when its entry is kept, and a changed rate
or burst applies at once; a gateway client whose view changed is told."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from supervisor import Supervisor
from supervisor.gateway.core import GatewayCore, RequestContext
from supervisor.gateway.notices import ViewWatch
from supervisor.settings.loader import load_config
from tests.service.test_reload import server, write
from tests.service.test_runtime_servers import BOUND_S, steady

ECHO = "mini_echo"


def limits(per_s: float, burst: int) -> list[dict[str, Any]]:
    return [{"tenant": "alice", "tool": "echo", "per_s": per_s, "burst": burst}]


async def test_a_reload_applies_exposure_from_the_next_epoch_and_keeps_a_buckets_tokens(
    tmp_path: Path,
) -> None:
    file = write(tmp_path / "config.json", {"mini": server()}, limits=limits(0.001, 1))
    async with (
        Supervisor.open(load_config(file), state_dir=tmp_path / "s") as sup,
        sup.session(tenant="alice") as alice,
    ):
        with trio.fail_after(BOUND_S):
            await sup.router.cell.wait_until(steady("mini"))
            before = await alice.begin_turn()
            assert "mini_add" in before.catalog.tools
            assert (await before.call(ECHO, {"text": "1"})).ok
            assert (await before.call(ECHO, {"text": "2"})).error.code == "rate_limited"  # type: ignore[union-attr]

            # a bigger burst, the same entry: the bucket is kept, still empty
            hide_add = [{"tenant": "alice", "tools": {"deny": ["add"]}}]
            write(file, {"mini": server()}, limits=limits(0.001, 5), exposure=hide_add)
            plan = await sup.reload()
            assert plan.report()["applied_live"]["settings"] == ["limits", "exposure"]
            after = await alice.begin_turn()
            assert after.epoch > before.epoch
            assert "mini_add" not in after.catalog.tools and "mini_add" in before.catalog.tools
            assert (await after.call("mini_add", {"a": 1, "b": 2})).error.code == "unknown_tool"  # type: ignore[union-attr]
            assert (await before.call("mini_add", {"a": 1, "b": 2})).text == "3"  # its own epoch's view
            refused = await after.call(ECHO, {"text": "3"})
            assert refused.error is not None and refused.error.code == "rate_limited"
            assert refused.error.retry_after_ms is not None and refused.error.retry_after_ms > 100_000

            # a faster rate applies at once: the next token is a millisecond away
            write(file, {"mini": server()}, limits=limits(1000, 5), exposure=hide_add)
            assert (await sup.reload()).report()["applied_live"]["settings"] == ["limits"]
            refused = await after.call(ECHO, {"text": "4"})
            assert refused.ok or (refused.error is not None and (refused.error.retry_after_ms or 0) <= 1)
            await trio.sleep(0.01)
            assert (await after.call(ECHO, {"text": "5"})).ok


async def test_a_gateway_client_whose_view_a_reload_changed_is_owed_list_changed(tmp_path: Path) -> None:
    file = write(tmp_path / "config.json", {"mini": server()})
    async with Supervisor.open(load_config(file), state_dir=tmp_path / "s") as sup, sup.session() as session:
        with trio.fail_after(BOUND_S):
            await sup.router.cell.wait_until(steady("mini"))
            core = GatewayCore(session)
            listed = await core.handle("tools/list", {}, RequestContext())
            assert "mini_add" in [tool["name"] for tool in listed["tools"]]
            watch = ViewWatch(core)
            assert watch.owed() == []
            write(file, {"mini": server()}, exposure=[{"tenant": "default", "tools": {"deny": ["add"]}}])
            await sup.reload()
            assert watch.owed() == ["notifications/tools/list_changed"]
            listed = await core.handle("tools/list", {}, RequestContext())
            assert "mini_add" not in [tool["name"] for tool in listed["tools"]]
