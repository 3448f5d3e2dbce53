"""The admin API's surface routes (resources, reads, prompts, completions,
subscriptions, ``resource_updated`` events) and the CLI's ``resources``, ``read`` and
``prompts``, against the real supervisor and admin server.

The servers behind them are fake connection actors (``tests/support/surface_fakes.py``)
joined to the real router: what a connection actor sends the server is tested with
the connection actor; here, what the API and the CLI make of a turn's surface.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from actors.connection.messages import (
    Answered,
    CallOutcome,
    CallTool,
    ResourceUpdated,
    ServerListed,
    StateChanged,
    Subscribe,
    Unsubscribe,
)
from actors.connection.states import State
from actors.protocol.messages import Prompt, Resource, ResourceTemplate
from actors.router.actor import AddServer
from actors.spec import ServerSpec
from supervisor.cli import main as cli
from tests.support.admin import ALICE, BOB, TOKENS, Running, admin_running, config_of, conforms
from tests.support.surface_fakes import EVERYTHING, FakeActor

SHARED = "file:///projects/notes.md"


def listing(
    server: str, *uris: str, templates: tuple[str, ...] = (), prompts: tuple[str, ...] = ()
) -> ServerListed:
    return ServerListed(
        server,
        1,
        (),
        resources=tuple(
            Resource(
                u, u.rsplit("/", 1)[-1], {"uri": u, "name": u.rsplit("/", 1)[-1], "mimeType": "text/markdown"}
            )
            for u in uris
        ),
        templates=tuple(ResourceTemplate(t, "files", {"uriTemplate": t, "name": "files"}) for t in templates),
        prompts=tuple(
            Prompt(
                p,
                ("topic", "style"),
                ("topic",),
                {"name": p, "arguments": [{"name": "topic", "required": True}, {"name": "style"}]},
            )
            for p in prompts
        ),
        features=EVERYTHING,
    )


@attrs.define
class Surface:
    api: Running
    actors: dict[str, FakeActor]

    def calls(self, server: str) -> list[tuple[str, Any]]:
        return [(c.method, dict(c.arguments)) for c in self.actors[server].calls()]


@asynccontextmanager
async def surface_running(tmp_path: Path, *, tokens: bool = False) -> AsyncIterator[Surface]:
    """The supervisor and admin server, with two fake servers (fs1, fs2) that both
    publish ``SHARED``, up and listed."""
    config = config_of(tokens=TOKENS if tokens else None)
    async with admin_running(config, tmp_path) as api, trio.open_nursery() as nursery:
        actors = {name: FakeActor(name) for name in ("fs1", "fs2")}
        for actor in actors.values():
            nursery.start_soon(actor.run)
            api.sup.router_mailbox.send_nowait(
                AddServer(ServerSpec(actor.name, command=("x",), trusted=True), actor.send)
            )
        api.sup.router_mailbox.send_nowait(
            listing(
                "fs1",
                SHARED,
                "file:///projects/one.md",
                templates=("file:///tmp/{name}",),
                prompts=("review",),
            )
        )
        api.sup.router_mailbox.send_nowait(listing("fs2", SHARED))
        for name in actors:
            api.sup.router_mailbox.send_nowait(
                StateChanged(name, State.STEADY, State.LIST, trio.current_time())
            )
        with trio.fail_after(5):
            await api.sup.router.cell.wait_until(
                lambda c: all(c.servers.get(n) is not None and c.servers[n].available for n in actors)
            )
        yield Surface(api, actors)
        nursery.cancel_scope.cancel()


async def test_a_turns_surface_over_the_admin_api(tmp_path: Path) -> None:
    async with surface_running(tmp_path) as s:
        http = s.api.http()
        with trio.fail_after(15):
            sid = await http.session()
            tid = (await http.turn(sid))["turn_id"]
            base = f"/v1/sessions/{sid}/turns/{tid}"

            listed = await http.request("GET", f"{base}/resources")
            conforms("list_resources", listed)
            body = listed.json()
            assert body["turn_id"] == tid
            assert [(r["uri"], r["server"]) for r in body["resources"]] == [
                ("mcp-supervisor://fs1/" + SHARED, "fs1"),
                ("file:///projects/one.md", "fs1"),
                ("mcp-supervisor://fs2/" + SHARED, "fs2"),
            ]
            assert body["resources"][0]["mimeType"] == "text/markdown"  # the rest as sent
            assert body["resources"][0]["availability"] == "available"
            assert [t["uriTemplate"] for t in body["templates"]] == ["file:///tmp/{name}"]

            # The qualified form reaches its own server, with the server's own URI.
            read = await http.request(
                "POST", f"{base}/resources/read", json={"uri": "mcp-supervisor://fs2/" + SHARED}
            )
            conforms("read_resource", read)
            assert read.json()["ok"] is True and read.json()["text"] == f"text of {SHARED}"
            assert s.calls("fs2") == [("resources/read", {"uri": SHARED})] and s.calls("fs1") == []
            # The plain form is ambiguous: the answer says what to do.
            plain = await http.request("POST", f"{base}/resources/read", json={"uri": SHARED})
            conforms("read_resource", plain)
            assert plain.json()["error"]["code"] == "unknown_resource"
            chosen = await http.request(
                "POST",
                f"{base}/resources/read",
                json={"uri": SHARED, "server": "fs1", "request_id": "read-1"},
            )
            assert chosen.json()["ok"] is True and chosen.headers["x-request-id"] == "read-1"
            # A URI nobody lists that fs1's template describes goes to fs1.
            templated = await http.request(
                "POST", f"{base}/resources/read", json={"uri": "file:///tmp/where.md"}
            )
            assert templated.json()["ok"] is True
            assert s.calls("fs1")[-1] == ("resources/read", {"uri": "file:///tmp/where.md"})

            prompts = await http.request("GET", f"{base}/prompts")
            conforms("list_prompts", prompts)
            assert [(p["id"], p["server"]) for p in prompts.json()["prompts"]] == [("fs1_review", "fs1")]
            got = await http.request(
                "POST", f"{base}/prompts/get", json={"id": "fs1_review", "arguments": {"topic": "x"}}
            )
            conforms("get_prompt", got)
            assert got.json()["ok"] is True
            assert s.calls("fs1")[-1] == ("prompts/get", {"name": "review", "arguments": {"topic": "x"}})
            unknown = await http.request("POST", f"{base}/prompts/get", json={"id": "review"})
            assert unknown.json()["error"]["code"] == "unknown_prompt"

            completed = await http.request(
                "POST",
                f"{base}/completions",
                json={
                    "ref": {"type": "ref/prompt", "name": "fs1_review"},
                    "argument": {"name": "topic", "value": "a"},
                },
            )
            conforms("complete", completed)
            assert completed.json()["ok"] is True and completed.json()["text"] == "alpha\nbeta"
            method, params = s.calls("fs1")[-1]
            assert method == "completion/complete" and params["ref"] == {
                "type": "ref/prompt",
                "name": "review",
            }

            for path, bad, field in (
                ("resources/read", {}, "uri"),
                ("resources/read", {"uri": 3}, "uri"),
                ("resources/read", {"uri": "x", "request_id": "a b"}, "request_id"),
                ("prompts/get", {"id": "fs1_review", "arguments": ["x"]}, "arguments"),
                ("completions", {"argument": {"name": "a", "value": "b"}}, "ref"),
                ("completions", {"ref": {"type": "ref/prompt", "name": "p"}, "argument": "a"}, "argument"),
            ):
                reply = await http.request("POST", f"{base}/{path}", json=bad)
                assert reply.status == 400 and f"$.{field}" in reply.json()["error"]["message"], (path, reply)
            gone = await http.request("GET", f"/v1/sessions/{sid}/turns/nope/resources")
            assert gone.status == 404


async def test_subscriptions_announce_updates_to_the_sessions_tenant_only(tmp_path: Path) -> None:
    async with surface_running(tmp_path, tokens=True) as s:
        alice, bob = s.api.http(ALICE), s.api.http(BOB)
        with trio.fail_after(15):
            sid = await alice.session()
            path = f"/v1/sessions/{sid}/subscriptions"
            assert (await bob.request("POST", path, json={"uri": SHARED, "server": "fs1"})).status == 404

            async with alice.stream("GET", "/v1/events") as mine, bob.stream("GET", "/v1/events") as theirs:
                assert (await mine.next()).event == "hello"  # type: ignore[union-attr]
                assert (await theirs.next()).event == "hello"  # type: ignore[union-attr]
                subscribed = await alice.request("POST", path, json={"uri": "mcp-supervisor://fs1/" + SHARED})
                conforms("subscribe", subscribed)
                assert subscribed.json()["ok"] is True
                (subscribe,) = [m for m in s.actors["fs1"].seen if isinstance(m, Subscribe)]
                assert subscribe.uri == SHARED

                subscribe.updates.send_nowait(ResourceUpdated("fs1", SHARED))
                (update,) = [e for e in await mine.until(lambda e: e.event == "resource_updated")]
                assert update.data == {
                    "tenant": "alice",
                    "session": sid,
                    "uri": "mcp-supervisor://fs1/" + SHARED,
                    "server": "fs1",
                }
                # Bob's stream: an epoch change that comes after it, and no update before.
                s.api.sup.router_mailbox.send_nowait(listing("fs2", "file:///other.md"))
                seen = await theirs.until(lambda e: e.event == "epoch")
                assert not [e for e in seen if e.event == "resource_updated"]

            left = await alice.request("DELETE", f"{path}?uri=mcp-supervisor%3A%2F%2Ffs1%2F{SHARED}")
            conforms("unsubscribe", left)
            assert left.json()["ok"] is True
            assert [m.uri for m in s.actors["fs1"].seen if isinstance(m, Unsubscribe)] == [SHARED]
            again = await alice.request("DELETE", path, json={"uri": SHARED, "server": "fs1"})
            assert again.json()["ok"] is True  # not subscribed any more: nothing to leave
            missing = await alice.request("DELETE", path)
            assert missing.status == 400 and "$.uri" in missing.json()["error"]["message"]


async def run_cli(url: str, *argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """One CLI command against the admin API at ``url``: (exit status, stdout, stderr)."""
    status = await trio.to_thread.run_sync(cli.main, [*argv, "--url", url])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


async def test_the_cli_lists_resources_and_prompts_and_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCP_SUPERVISOR_TOKEN", raising=False)
    async with surface_running(tmp_path) as s:
        with trio.fail_after(30):
            status, out, _err = await run_cli(s.api.url, "resources", capsys=capsys)
            assert status == 0
            assert out.splitlines() == [
                "URI                                             SERVER  NAME      MIME",
                "mcp-supervisor://fs1/file:///projects/notes.md  fs1     notes.md  text/markdown",
                "file:///projects/one.md                         fs1     one.md    text/markdown",
                "mcp-supervisor://fs2/file:///projects/notes.md  fs2     notes.md  text/markdown",
                "file:///tmp/{name}                              fs1     files     template",
            ]

            status, out, _err = await run_cli(s.api.url, "--json", "resources", capsys=capsys)
            assert status == 0 and len(json.loads(out)["resources"]) == 3

            status, out, _err = await run_cli(s.api.url, "prompts", capsys=capsys)
            assert status == 0
            assert out.splitlines() == ["ID          SERVER  ARGUMENTS", "fs1_review  fs1     topic*, style"]

            status, out, err = await run_cli(
                s.api.url, "read", f"mcp-supervisor://fs2/{SHARED}", capsys=capsys
            )
            assert (status, out, err) == (0, f"text of {SHARED}\n", "")
            status, out, _err = await run_cli(
                s.api.url, "read", SHARED, "--server", "fs1", "--json", capsys=capsys
            )
            assert status == 0 and json.loads(out)["text"] == f"text of {SHARED}"
            status, out, err = await run_cli(s.api.url, "read", SHARED, capsys=capsys)
            assert status == 1 and out == ""
            assert err.startswith("error unknown_resource: ") and SHARED in err


def blob_reader(message: CallTool) -> CallOutcome:
    uri = message.arguments["uri"]
    return Answered(
        {
            "contents": [
                {"uri": uri, "mimeType": "image/png", "blob": "iVBORw0KGgo="},
                {"uri": uri, "text": "caption"},
            ]
        }
    )


async def test_the_cli_names_blobs_instead_of_printing_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCP_SUPERVISOR_TOKEN", raising=False)
    async with surface_running(tmp_path) as s:
        s.actors["fs1"].handler = blob_reader
        with trio.fail_after(30):
            status, out, _err = await run_cli(s.api.url, "read", "file:///projects/one.md", capsys=capsys)
        assert status == 0
        assert out.splitlines() == ["[blob file:///projects/one.md (image/png)]", "caption"]
