"""Tool schemas pass through untouched: every way a tool is handed on carries its
``inputSchema`` and ``outputSchema`` exactly as the server sent them (``$schema``,
``$defs``, ``$anchor``, ``$ref`` not dereferenced, composition and conditionals, key
order and number types), also after a restart, from the store's cache.

Real supervisor, real mini_server.py publishing ``tests/support/schema_fixtures.py``'s tools,
real admin API over HTTP, the real CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from actors.protocol.errors import ProtocolError
from actors.protocol.payloads import structure_tool, tool_to_wire
from actors.router.catalog import ServerView, make_entry
from actors.router.tool_entries import entries_for as _entries
from actors.spec import Start
from supervisor.cli import main as cli
from supervisor.settings.model import Config, ToolSearchSettings
from supervisor.store.database import Store
from tests.support.admin import admin_in_thread, admin_running, config_of, conforms, mini_spec, wait_for
from tests.support.schema_fixtures import (
    RICH_INPUT,
    RICH_VALID,
    TOOLS,
    as_text,
    assert_schemas_kept,
    write_tools_file,
)

IDS = {"mini_contact": "contact", "mini_legacy": "legacy"}


def _by_id(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in items}


async def _check_every_way_out(api: Any, *, stale: bool) -> None:
    """tool_search, the turn's listing, GET /v1/tools, POST …/tool_search and POST
    …/turns all carry both schemas of both tools, byte for byte. (Search is on: a turn
    lists what was found, and a lazy server with cached tools is not started.)"""
    http = api.http()
    query = "store a contact legacy record"
    with trio.fail_after(15):
        async with api.sup.session() as session:
            turn = await session.begin_turn()
            found = _by_id(turn.search(query)["matches"])
            listing = _by_id(turn.listing())
            for tool_id, name in IDS.items():
                assert_schemas_kept(found[tool_id], name)
                assert_schemas_kept(listing[tool_id], name)
                assert found[tool_id]["stale"] is stale

        tools = await http.request("GET", "/v1/tools")
        conforms("list_tools", tools)
        assert "output_schema" not in _by_id(tools.json()["tools"])["mini_echo"]  # it declares none
        sid = await http.session()
        searched = await http.request("POST", f"/v1/sessions/{sid}/tool_search", json={"query": query})
        conforms("tool_search", searched)
        begun = await http.request("POST", f"/v1/sessions/{sid}/turns")
        conforms("begin_turn", begun)
        for items in (tools.json()["tools"], searched.json()["matches"], begun.json()["tools"]):
            by_id = _by_id(items)
            for tool_id, name in IDS.items():
                assert_schemas_kept(by_id[tool_id], name)
        assert all(t["stale"] is stale for t in tools.json()["tools"])


def _config(*flags: str, **options: Any) -> Config:
    return attrs.evolve(
        config_of(mini_spec("mini", *flags, **options)), tool_search=ToolSearchSettings(enabled=True)
    )


async def test_schemas_reach_every_way_out_unchanged_and_survive_a_restart(tmp_path: Path) -> None:
    tools_file = str(write_tools_file(tmp_path))
    state = tmp_path / "state"
    async with admin_running(_config("--tools-file", tools_file), state) as api:
        await wait_for(api.http(), "/v1/servers/mini", lambda d: d["state"] == "steady")
        await _check_every_way_out(api, stale=False)
        await api.sup.store.flush()
    # Restarted with a lazy server: its tools come from the store's last-known list.
    async with admin_running(_config("--tools-file", tools_file, start=Start.LAZY), state) as api:
        await _check_every_way_out(api, stale=True)
        assert api.sup.servers()["mini"].state.value == "idle"  # nothing started it


async def test_calls_are_validated_through_refs_anchors_and_conditionals(tmp_path: Path) -> None:
    """The schema's own draft validates, with $ref, $anchor and $dynamicRef resolved
    offline; valid arguments reach the server, invalid ones never do."""
    log = tmp_path / "calls.log"
    spec = mini_spec("mini", "--tools-file", str(write_tools_file(tmp_path)), "--calls-log", str(log))
    async with admin_running(config_of(spec), tmp_path / "state") as api, api.sup.session() as session:
        with trio.fail_after(15):
            await wait_for(api.http(), "/v1/servers/mini", lambda d: d["state"] == "steady")
            turn = await session.begin_turn()
            good = await turn.call("mini_contact", RICH_VALID)
            assert good.ok, good
            for arguments, message in (
                ({**RICH_VALID, "contactMethod": "phone"}, "$: 'phone' is a required property"),
                ({**RICH_VALID, "home": {"street": "x"}}, "$.home: 'city' is a required property"),
                ({**RICH_VALID, "tags": {"children": [1]}}, "$.tags.children[0]: 1 is not of type 'object'"),
                ({**RICH_VALID, "zz": 1}, "$: Unevaluated properties are not allowed ('zz' was unexpected)"),
            ):
                refused = await turn.call("mini_contact", arguments)
                assert refused.error is not None and refused.error.code == "invalid_arguments"
                assert refused.error.message == f"invalid arguments for mini_contact: {message}"
            legacy = await turn.call("mini_legacy", {"id": "ABC"})
            assert legacy.error is not None
            expected = "invalid arguments for mini_legacy: $.id: 'ABC' does not match '^[a-z]+$'"
            assert legacy.error.message == expected
            assert (await turn.call("mini_legacy", {"id": "abc", "list": ["a"]})).ok
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(c["name"], c["arguments"]) for c in sent] == [
        ("contact", RICH_VALID),
        ("legacy", {"id": "abc", "list": ["a"]}),
    ]


def test_the_cli_json_output_keeps_the_schemas(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = mini_spec("mini", "--tools-file", str(write_tools_file(tmp_path)))
    with admin_in_thread(config_of(spec), tmp_path / "state") as url:
        for command, key in ((["tools"], "tools"), (["search", "store", "contact"], "matches")):
            for _ in range(100):  # until the server has listed (the CLI asks once)
                assert cli.main([*command, "--url", url, "--json"]) == 0
                items = _by_id(json.loads(capsys.readouterr().out)[key])
                if "mini_contact" in items:
                    break
                trio.run(trio.sleep, 0.05)
            for tool_id, name in IDS.items():
                assert_schemas_kept(items[tool_id], name)


# -- the pieces, one at a time ------------------------------------------------------------


def test_a_tool_goes_to_the_store_and_back_unchanged(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "state.db")
    try:
        store.save_tool_list("mini", [tool_to_wire(structure_tool(tool)) for tool in TOOLS], 1.0)
        tools, _ = store.tool_lists()["mini"]
    finally:
        store.close()
    assert as_text(tools) == as_text(TOOLS)  # key order too: the store does not sort
    assert as_text([tool_to_wire(structure_tool(t)) for t in tools]) == as_text(TOOLS)


@pytest.mark.parametrize("value", [[1], "x", 3, True])
def test_an_output_schema_that_is_no_object_drops_the_tool_with_a_clear_reason(value: Any) -> None:
    with pytest.raises(ProtocolError) as raised:
        structure_tool({"name": "t", "inputSchema": {"type": "object"}, "outputSchema": value})
    assert str(raised.value) == "tool 't': outputSchema must be an object"
    assert structure_tool({"name": "t", "outputSchema": None}).output_schema is None


def test_a_relist_that_changes_only_the_output_schema_replaces_the_entry() -> None:
    send, _ = trio.open_memory_channel[Any](1)
    spec = mini_spec("mini")
    tool = structure_tool(TOOLS[0])
    old = make_entry("mini_contact", spec, tool, 200)
    view = ServerView("mini", spec, send, entries=(old,))
    changed = structure_tool({**TOOLS[0], "outputSchema": {"type": "object"}})
    (entry,) = _entries(view, [changed], {"contact": "mini_contact"}, 200)
    assert entry.output_schema == {"type": "object"} and entry != old
    assert _entries(view, [tool], {"contact": "mini_contact"}, 200) is view.entries
    assert as_text(old.schemas()["input_schema"]) == as_text(RICH_INPUT)
