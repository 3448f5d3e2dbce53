"""A turn's resources, templates, prompts and completions (``supervisor/calls/turn_surface.py``):
listed from the frozen catalog, resolved to the right server, decided by trust,
bounded, answered in one envelope with one audit row each."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from actors.connection.messages import Answered, CallFailed, CallTool
from actors.connection.states import State
from actors.protocol.messages import ServerFeatures
from actors.router.envelope import TRUNCATION_MARKER
from actors.spec import ServerSpec
from supervisor.calls.requests import RequestInFlight
from supervisor.calls.turn_surface import uri_subjects
from supervisor.sessions.approvals import Approval, ApprovalRequest
from supervisor.settings.model import TrustRule
from tests.support.surface_fakes import FakeActor, surface_catalog, surface_session

TWO_FILESYSTEMS = {
    "fs1": {
        "resources": ["file:///notes.md", "file:///only-one.md"],
        "templates": ["file:///logs/{day}.log"],
    },
    "fs2": {"resources": ["file:///notes.md"], "prompts": {"review": ["file"]}},
}


def _actors() -> dict[str, FakeActor]:
    return {"fs1": FakeActor("fs1"), "fs2": FakeActor("fs2")}


async def test_listings_show_the_frozen_catalog_with_shown_uris_and_availability() -> None:
    actors = _actors()
    catalog = surface_catalog(actors, TWO_FILESYSTEMS, states={"fs2": State.BACKOFF})
    async with surface_session(actors, catalog) as (_session, turn, _audit):
        assert [r.uri for r in turn.resources()] == [
            "mcp-supervisor://fs1/file:///notes.md",
            "file:///only-one.md",
            "mcp-supervisor://fs2/file:///notes.md",
        ]
        assert [t.uri_template for t in turn.resource_templates()] == ["file:///logs/{day}.log"]
        assert [p.id for p in turn.prompts()] == ["fs2_review"]
        assert turn.resource_listing()[0] == {
            "uri": "mcp-supervisor://fs1/file:///notes.md",
            "name": "n",
            "server": "fs1",
            "availability": "available",
            "stale": False,
        }
        assert turn.resource_listing()[2]["availability"] == "unavailable"
        assert turn.template_listing() == [
            {
                "uriTemplate": "file:///logs/{day}.log",
                "name": "tpl",
                "server": "fs1",
                "availability": "available",
                "stale": False,
            }
        ]
        assert turn.prompt_listing() == [
            {
                "id": "fs2_review",
                "name": "fs2_review",
                "server": "fs2",
                "availability": "unavailable",
                "stale": False,
            }
        ]


async def test_read_reaches_the_right_server_by_each_way_of_naming_a_resource() -> None:
    actors = _actors()
    async with surface_session(actors, surface_catalog(actors, TWO_FILESYSTEMS)) as (session, turn, audit):
        first = await turn.read_resource("mcp-supervisor://fs2/file:///notes.md")
        assert first.ok and first.tool == "mcp-supervisor://fs2/file:///notes.md"
        assert first.text == "text of file:///notes.md"
        content = {"uri": "file:///notes.md", "mimeType": "text/plain", "text": "text of file:///notes.md"}
        assert first.content == ({"type": "resource", "resource": content},)
        assert first.structured == {"contents": [content]}
        assert (await turn.read_resource("file:///only-one.md")).ok
        assert (await turn.read_resource("file:///notes.md", server="fs1")).ok
        assert (await turn.read_resource("file:///logs/monday.log")).ok  # only fs1's template makes it
        assert (await turn.read_resource("mcp-supervisor://fs2/file:///unlisted")).ok
        sent = [
            (name, c.method, dict(c.arguments), c.client) for name in actors for c in actors[name].calls()
        ]
        assert sent == [
            ("fs1", "resources/read", {"uri": "file:///only-one.md"}, session.client),
            ("fs1", "resources/read", {"uri": "file:///notes.md"}, session.client),
            ("fs1", "resources/read", {"uri": "file:///logs/monday.log"}, session.client),
            ("fs2", "resources/read", {"uri": "file:///notes.md"}, session.client),
            ("fs2", "resources/read", {"uri": "file:///unlisted"}, session.client),
        ]
        assert [(r.tool, r.server, r.outcome, r.decision) for r in audit.rows] == [
            ("mcp-supervisor://fs2/file:///notes.md", "fs2", "ok", "allow"),
            ("file:///only-one.md", "fs1", "ok", "allow"),
            ("mcp-supervisor://fs1/file:///notes.md", "fs1", "ok", "allow"),
            ("file:///logs/monday.log", "fs1", "ok", "allow"),
            ("mcp-supervisor://fs2/file:///unlisted", "fs2", "ok", "allow"),
        ]


async def test_what_goes_nowhere_is_refused_with_its_code_and_a_row() -> None:
    actors = _actors()
    published = {**TWO_FILESYSTEMS, "fs2": {**TWO_FILESYSTEMS["fs2"], "templates": ["file:///logs/{x}"]}}
    features = {"fs1": ServerFeatures(resources=True)}  # no prompts, no completions
    catalog = surface_catalog(actors, published, features=features)
    async with surface_session(actors, catalog) as (_s, turn, audit):
        unknown = await turn.read_resource("file:///nowhere")
        assert unknown.error is not None and unknown.error.code == "unknown_resource"
        assert unknown.error.message.startswith(
            "unknown resource file:///nowhere: no server in this turn lists it or has a template it matches"
        )
        both = await turn.read_resource("file:///logs/a.log")  # fs1's and fs2's templates both make it
        assert both.error is not None and both.error.code == "unknown_resource"
        assert "matches templates of fs1 and fs2: pass server=" in both.error.message
        no_server = await turn.read_resource("mcp-supervisor://fs9/file:///x")
        assert no_server.error is not None and "this turn shows no server 'fs9'" in no_server.error.message
        prompt = await turn.get_prompt("fs1_review")
        assert prompt.error is not None and prompt.error.code == "unknown_prompt"
        completion = await turn.complete(
            {"type": "ref/resource", "uri": "file:///logs/{day}.log"}, {"name": "day", "value": "m"}
        )
        assert completion.error is not None and completion.error.code == "unsupported"
        assert completion.error.message.startswith("mcp server fs1 does not serve completions")
        assert actors["fs1"].calls() == [] and actors["fs2"].calls() == []
        assert [(r.tool, r.server, r.outcome, r.decision) for r in audit.rows] == [
            ("file:///nowhere", "", "unknown_resource", "none"),
            ("file:///logs/a.log", "", "unknown_resource", "none"),
            ("mcp-supervisor://fs9/file:///x", "", "unknown_resource", "none"),
            ("fs1_review", "", "unknown_prompt", "none"),
            ("completion:file:///logs/{day}.log", "fs1", "unsupported", "none"),
        ]


async def test_a_server_unavailable_when_the_turn_began_is_not_contacted() -> None:
    actors = _actors()
    catalog = surface_catalog(actors, TWO_FILESYSTEMS, states={"fs2": State.BACKOFF})
    async with surface_session(actors, catalog) as (_s, turn, audit):
        down = await turn.get_prompt("fs2_review", {"file": "a"})
        assert down.error is not None and down.error.code == "unavailable"
        assert "(backoff when it began)" in down.error.message
        assert actors["fs2"].seen == [] and audit.rows[0].outcome == "unavailable"


async def test_prompt_get_sends_the_servers_name_and_checks_arguments_first() -> None:
    actors = _actors()
    async with surface_session(actors, surface_catalog(actors, TWO_FILESYSTEMS)) as (session, turn, audit):
        missing = await turn.get_prompt("fs2_review", {})
        assert missing.error is not None and missing.error.code == "invalid_arguments"
        assert missing.error.message == "invalid arguments for fs2_review: $.file: required"
        not_text = await turn.get_prompt("fs2_review", {"file": 3})  # type: ignore[dict-item]
        assert not_text.error is not None and not_text.error.message.endswith("$.file: must be a string")
        assert actors["fs2"].seen == []
        got = await turn.get_prompt("fs2_review", {"file": "a.md"})
        assert got.ok and got.text == "review with [('file', 'a.md')]"
        assert got.content == ({"type": "text", "text": "review with [('file', 'a.md')]"},)
        assert got.structured is not None and got.structured["messages"][0]["role"] == "user"
        (call,) = actors["fs2"].calls()
        assert (call.method, dict(call.arguments)) == (
            "prompts/get",
            {"name": "review", "arguments": {"file": "a.md"}},
        )
        assert call.client is session.client  # the server's requests meanwhile reach this session
        assert [(r.tool, r.outcome) for r in audit.rows] == [
            ("fs2_review", "invalid_arguments"),
            ("fs2_review", "invalid_arguments"),
            ("fs2_review", "ok"),
        ]


async def test_completion_refs_are_mapped_to_the_servers_own() -> None:
    actors = _actors()
    async with surface_session(actors, surface_catalog(actors, TWO_FILESYSTEMS)) as (_s, turn, audit):
        by_prompt = await turn.complete(
            {"type": "ref/prompt", "name": "fs2_review"}, {"name": "file", "value": "a"}, {"arguments": {}}
        )
        assert by_prompt.ok and by_prompt.text == "alpha\nbeta"
        assert by_prompt.structured == {
            "completion": {"values": ["alpha", "beta"], "total": 2, "hasMore": False}
        }
        by_template = await turn.complete(
            {"type": "ref/resource", "uri": "file:///logs/{day}.log"}, {"name": "day", "value": "m"}
        )
        assert by_template.ok and by_template.tool == "completion:file:///logs/{day}.log"
        bad = await turn.complete({"type": "ref/prompt", "name": "fs2_review"}, {"name": "file"})
        assert bad.error is not None and bad.error.code == "invalid_arguments"
        sent = [dict(c.arguments) for name in ("fs2", "fs1") for c in actors[name].calls()]
        assert sent == [
            {
                "ref": {"type": "ref/prompt", "name": "review"},
                "argument": {"name": "file", "value": "a"},
                "context": {"arguments": {}},
            },
            {
                "ref": {"type": "ref/resource", "uri": "file:///logs/{day}.log"},
                "argument": {"name": "day", "value": "m"},
            },
        ]
        assert [(r.tool, r.server, r.outcome) for r in audit.rows] == [
            ("completion:fs2_review", "fs2", "ok"),
            ("completion:file:///logs/{day}.log", "fs1", "ok"),
            ("completion:fs2_review", "fs2", "invalid_arguments"),
        ]


def test_uri_subjects_resolve_dot_segments() -> None:
    assert uri_subjects("file:///tmp/a.md") == ["file:///tmp/a.md"]
    assert uri_subjects("file:///tmp/../etc/passwd") == ["file:///tmp/../etc/passwd", "file:///etc/passwd"]
    assert uri_subjects("test://static/./x") == ["test://static/./x", "test://static/x"]


async def test_trust_rules_target_resources_by_uri_and_prompts_by_name() -> None:
    actors = _actors()
    rules = (
        TrustRule("mcp:fs1:resources", "file:///etc/*", "deny"),
        TrustRule("mcp:fs2:prompts", "rev*", "ask"),
    )
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return Approval("deny")

    catalog = surface_catalog(actors, TWO_FILESYSTEMS)
    async with surface_session(actors, catalog, rules=rules, approver=approver) as (_s, turn, audit):
        for uri in ("file:///etc/passwd", "file:///tmp/../etc/passwd"):
            denied = await turn.read_resource(uri, server="fs1")
            assert denied.error is not None and denied.error.code == "denied"
            assert "permission='mcp:fs1:resources'" in denied.error.message
        assert (await turn.read_resource("file:///tmp/fine", server="fs1")).ok  # default: allow
        asked_prompt = await turn.get_prompt("fs2_review", {"file": "x"})
        assert asked_prompt.error is not None and asked_prompt.error.code == "denied"
        assert [(a.permission, a.tool, dict(a.arguments)) for a in asked] == [
            ("mcp:fs2:prompts", "fs2_review", {"name": "review"})
        ]
        assert [c.arguments["uri"] for c in actors["fs1"].calls()] == ["file:///tmp/fine"]
        assert actors["fs2"].calls() == []
        assert [(r.outcome, r.decision) for r in audit.rows] == [
            ("denied", "deny"),
            ("denied", "deny"),
            ("ok", "allow"),
            ("denied", "ask"),
        ]


async def test_output_is_bounded_by_the_servers_max_output_bytes() -> None:
    big = "x" * 500

    def handler(call: CallTool) -> Any:
        contents = [
            {"uri": "file:///notes.md", "text": big},
            {"uri": "file:///img.png", "mimeType": "image/png", "blob": "A" * 4000},
        ]
        return Answered({"contents": contents})

    actors = {"fs1": FakeActor("fs1", handler)}
    specs = {"fs1": ServerSpec("fs1", command=("x",), max_output_bytes=100)}
    catalog = surface_catalog(actors, {"fs1": {"resources": ["file:///notes.md"]}}, specs=specs)
    async with surface_session(actors, catalog) as (_s, turn, audit):
        read = await turn.read_resource("file:///notes.md")
        assert read.ok and read.truncated and read.structured is None
        assert len(read.text.encode()) <= 100 and read.text.endswith(TRUNCATION_MARKER)
        assert read.content == (
            {"type": "text", "text": read.text},
            {"type": "resource", "resource": {"uri": "file:///notes.md"}},
            {"type": "resource", "resource": {"uri": "file:///img.png", "mimeType": "image/png"}},
        )
        assert audit.rows[0].result_bytes == len(read.text.encode())


async def test_a_request_cancelled_by_id_is_told_to_the_server_and_ends_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    actors = {"fs1": FakeActor("fs1", lambda call: None)}  # never answers on its own
    catalog = surface_catalog(actors, {"fs1": {"resources": ["file:///slow"]}})
    async with surface_session(actors, catalog) as (session, turn, audit):
        requests = session._services.calls.requests
        results: list[Any] = []

        async def read() -> None:
            results.append(await turn.read_resource("file:///slow", request_id="r-1"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await trio.sleep(1)
            assert audit.started_rows[0].outcome == "interrupted"
            with pytest.raises(RequestInFlight, match="already in flight"):
                await turn.get_prompt("fs1_x", request_id="r-1")
            assert requests.cancel("r-1", session.tenant)
        (envelope,) = results
        assert envelope.error is not None and envelope.error.code == "cancelled"
        assert trio.current_time() < 2  # well before the 60 s call timeout
        assert [type(m).__name__ for m in actors["fs1"].seen] == ["CallTool", "CancelCall"]
        assert [r.outcome for r in audit.rows] == ["cancelled"]
        assert len(requests) == 0


async def test_a_cancelled_caller_leaves_a_cancelled_row_and_cancels_at_the_server(
    autojump_clock: trio.testing.MockClock,
) -> None:
    actors = {"fs1": FakeActor("fs1", lambda call: None)}
    catalog = surface_catalog(actors, {"fs1": {"prompts": {"slow": []}}})
    async with surface_session(actors, catalog) as (_s, turn, audit):
        with trio.move_on_after(5):
            await turn.get_prompt("fs1_slow")
        await trio.sleep(0.1)
        assert [type(m).__name__ for m in actors["fs1"].seen] == ["CallTool", "CancelCall"]
        assert [(r.tool, r.outcome) for r in audit.rows] == [("fs1_slow", "cancelled")]


async def test_a_failed_request_and_a_malformed_answer_are_envelopes() -> None:
    answers: list[Any] = [CallFailed("timeout", "resources/read timed out"), Answered({"contents": "no"})]
    actors = {"fs1": FakeActor("fs1", lambda call: answers.pop(0))}
    catalog = surface_catalog(actors, {"fs1": {"resources": ["file:///a"]}})
    async with surface_session(actors, catalog) as (_s, turn, audit):
        timed_out = await turn.read_resource("file:///a")
        assert timed_out.error is not None and timed_out.error.code == "timeout"
        malformed = await turn.read_resource("file:///a")
        assert malformed.error is not None and malformed.error.code == "server_error"
        assert malformed.error.message == "file:///a: the answer is not a resources/read result"
        assert [r.outcome for r in audit.rows] == ["timeout", "server_error"]


async def test_reads_pin_nothing_so_a_tool_of_the_same_name_keeps_its_pin() -> None:
    actors = {"fs1": FakeActor("fs1")}
    catalog = surface_catalog(actors, {"fs1": {"resources": ["file:///a"]}})
    async with surface_session(actors, catalog) as (session, turn, _audit):
        policy = session._services.policy
        submitted: list[Any] = []
        policy._submit = submitted.append
        policy._pins[("fs1", "resources")] = "fingerprint of a tool named resources"
        read = await turn.read_resource("file:///a")
        assert read.ok  # not dropped to ask by the tool's pin, which stays as it was
        assert submitted == []
        assert policy._pins[("fs1", "resources")] == "fingerprint of a tool named resources"
