"""Each tenant's view of a catalog (``supervisor/calls/exposure.py``): made once per
catalog and tenant, the catalog itself when no list applies, the lists of a reload
only from the epoch it makes; and ``tool_search``'s threshold counts the tools a
tenant sees."""

from __future__ import annotations

import rpds

from actors.connection.states import State
from actors.protocol.messages import Tool
from actors.router.catalog import Catalog, ServerView, make_entry
from actors.router.exposure import Lists, ServerRule
from actors.spec import ServerSpec
from supervisor.calls.exposure import Exposures
from supervisor.sessions.session import open_session
from supervisor.settings.model import ExposureRule, ToolSearchSettings
from tests.support.surface_fakes import FakeActor, services


def catalog_of(tools: int, epoch: int = 1) -> Catalog:
    spec = ServerSpec("many", command=("x",))
    entries = tuple(
        make_entry(f"many_tool_{i}", spec, Tool(f"tool_{i}", f"Tool {i}."), 200) for i in range(tools)
    )
    entries += (make_entry("many_admin", spec, Tool("admin", "Administer."), 200),)
    view = ServerView("many", spec, FakeActor("many").send, state=State.STEADY, generation=1, entries=entries)
    return Catalog(epoch, {"many": view}, rpds.HashTrieMap({e.id: e for e in entries}))


NO_ADMIN = ExposureRule("team-*", ServerRule("many", tools=Lists(deny=("admin",))))


def test_a_tenant_no_list_applies_to_gets_the_catalog_itself() -> None:
    catalog = catalog_of(3)
    assert Exposures().view(catalog, "team-a") is catalog
    assert Exposures((NO_ADMIN,)).view(catalog, "ops") is catalog


def test_a_view_is_made_once_per_catalog_and_tenant() -> None:
    exposures, catalog = Exposures((NO_ADMIN,)), catalog_of(3)
    mine = exposures.view(catalog, "team-a")
    assert "many_admin" not in mine.tools and "many_admin" in catalog.tools
    assert exposures.view(catalog, "team-a") is mine
    assert exposures.view(catalog, "team-b") is not mine
    assert exposures.view(catalog_of(3), "team-a") is not mine  # another epoch's catalog


def test_reloaded_lists_apply_from_the_epoch_the_reload_makes() -> None:
    old_epoch, new_epoch = catalog_of(3, epoch=4), catalog_of(3, epoch=5)
    first = Exposures((NO_ADMIN,))
    hide_tool_0 = ExposureRule("*", ServerRule("many", tools=Lists(deny=("tool_0",))))
    second = first.replaced((hide_tool_0,), from_epoch=5)
    # the epoch it was shown with keeps its lists: the same epoch, the same tools
    assert sorted(second.view(old_epoch, "team-a").tools) == ["many_tool_0", "many_tool_1", "many_tool_2"]
    assert sorted(second.view(new_epoch, "team-a").tools) == ["many_admin", "many_tool_1", "many_tool_2"]
    assert Exposures().replaced((hide_tool_0,), from_epoch=5).view(old_epoch, "x") is old_epoch


async def test_the_search_threshold_counts_the_tools_a_tenant_sees() -> None:
    """25 tools: over the threshold of 20 for one tenant, under it for a tenant that
    sees ten of them."""
    session_services, _audit = services(catalog_of(24))
    session_services.calls.tool_search = ToolSearchSettings()  # auto, 20
    few = ExposureRule("few", ServerRule("many", tools=Lists(allow=("tool_?",))))
    session_services.calls.exposure = Exposures((few,))
    async with open_session(session_services, tenant="few") as mine, open_session(session_services) as other:
        assert len(mine.catalog_now().tools) == 10 and not (await mine.begin_turn()).search_enabled
        assert len(other.catalog_now().tools) == 25 and (await other.begin_turn()).search_enabled
