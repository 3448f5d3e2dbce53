"""Two filesystem servers that publish the same-looking URIs: the URI rule against
real processes, through the embedding API.

``@modelcontextprotocol/server-filesystem`` (npm, installed by ``.ci/setup``) serves
files through tools only and publishes no resources, so the resource half uses
``tests/servers/fs_resources_server.py`` (built on the official ``mcp`` SDK): each
publishes its directory at ``file:///projects/…``, the way a filesystem server in a
container sees its mount, so two of them publish the very same URIs.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import trio

from actors.router.uris import qualify
from actors.spec import ServerSpec
from supervisor import Supervisor
from supervisor.settings.model import Config, ToolSearchSettings
from tests.end_to_end.test_real_peers import ROOT, needs_module

FILESYSTEM = ROOT / ".venv" / "node" / "node_modules" / ".bin" / "mcp-server-filesystem"
FS_RESOURCES = ROOT / "tests" / "servers" / "fs_resources_server.py"
NOTES = "file:///projects/notes.txt"


def _two_directories(tmp_path: Path) -> tuple[Path, Path]:
    one, two = tmp_path / "one", tmp_path / "two"
    for directory, text in ((one, "notes of one"), (two, "notes of two")):
        directory.mkdir()
        (directory / "notes.txt").write_text(text)
    (one / "only-in-one.txt").write_text("alone")
    return one, two


async def test_the_same_uri_from_two_servers_is_read_through_the_qualified_form(tmp_path: Path) -> None:
    needs_module("mcp")
    one, two = _two_directories(tmp_path)
    specs = tuple(
        ServerSpec(name=name, command=(sys.executable, str(FS_RESOURCES), "--root", str(directory)))
        for name, directory in (("docs1", one), ("docs2", two))
    )
    config = Config(servers=specs, tool_search=ToolSearchSettings(enabled=False))
    async with Supervisor.open(config, state_dir=tmp_path / "state") as sup, sup.session() as session:
        with trio.fail_after(30):
            turn = await session.begin_turn()
        shown = {(entry.server, entry.server_uri): entry.uri for entry in turn.resources()}
        # Published by both: qualified for both. Published by one: as it is.
        assert shown[("docs1", NOTES)] == qualify("docs1", NOTES) == "mcp-supervisor://docs1/" + NOTES
        assert shown[("docs2", NOTES)] == qualify("docs2", NOTES)
        assert shown[("docs1", "file:///projects/only-in-one.txt")] == "file:///projects/only-in-one.txt"

        first = await turn.read_resource(qualify("docs1", NOTES))
        second = await turn.read_resource(qualify("docs2", NOTES))
        assert (first.ok, first.text, second.ok, second.text) == (True, "notes of one", True, "notes of two")
        alone = await turn.read_resource("file:///projects/only-in-one.txt")
        assert alone.ok and alone.text == "alone"
        by_server = await turn.read_resource(NOTES, server="docs2")
        assert by_server.ok and by_server.text == "notes of two"
        ambiguous = await turn.read_resource(NOTES)
        assert ambiguous.error is not None and ambiguous.error.code == "unknown_resource"
        assert qualify("docs1", NOTES) in ambiguous.error.message
        assert qualify("docs2", NOTES) in ambiguous.error.message


async def test_two_filesystem_servers_each_serve_their_own_directory(tmp_path: Path) -> None:
    if not FILESYSTEM.exists():
        reason = "npm is not on PATH" if shutil.which("npm") is None else ".ci/setup could not install it"
        pytest.skip(f"@modelcontextprotocol/server-filesystem is not installed: {reason}")
    one, two = _two_directories(tmp_path)
    specs = tuple(
        ServerSpec(name=name, command=(str(FILESYSTEM), str(directory)))
        for name, directory in (("fs1", one), ("fs2", two))
    )
    config = Config(servers=specs, tool_search=ToolSearchSettings(enabled=False))
    async with Supervisor.open(config, state_dir=tmp_path / "state") as sup, sup.session() as session:
        with trio.fail_after(30):
            turn = await session.begin_turn()
        ids = {tool.id for tool in turn.tools}
        assert {"fs1_read_text_file", "fs2_read_text_file"} <= ids
        assert turn.resources() == ()  # it publishes none
        for server, directory, text in (("fs1", one, "notes of one"), ("fs2", two, "notes of two")):
            read = await turn.call(f"{server}_read_text_file", {"path": str(directory / "notes.txt")})
            assert read.ok and read.text == text, read
        outside = await turn.call("fs1_read_text_file", {"path": str(two / "notes.txt")})
        assert not outside.ok and outside.error is not None and outside.error.code == "tool_error", outside
