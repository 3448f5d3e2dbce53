"""Hand-built catalogs with a surface (resources, templates, prompts), a fake connection
actor that answers the surface's requests, and a session around them, for the tests of
``supervisor/calls/turn_surface.py`` and ``supervisor/sessions/subscriptions.py`` (no server process: what
the connection actor does with these messages is tested with it)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import attrs
import trio

from actors.broadcast import Broadcast
from actors.connection.messages import (
    Answered,
    CallFailed,
    CallOutcome,
    CallTool,
    CancelCall,
    ConnectionMessage,
    Subscribe,
    Unsubscribe,
)
from actors.connection.states import State
from actors.protocol.messages import ServerFeatures
from actors.router.catalog import Catalog, ServerView
from actors.router.surface_entries import PromptEntry, ResourceEntry, TemplateEntry
from actors.router.uris import shown_uris
from actors.spec import ServerSpec
from supervisor.calls.requests import RequestRegistry
from supervisor.calls.services import CallServices
from supervisor.calls.turns import Turn
from supervisor.runtime.log_wants import LogWants
from supervisor.runtime.metrics import Metrics
from supervisor.sessions.approvals import ApprovalDesk, Approver
from supervisor.sessions.policy import Policy
from supervisor.sessions.session import Session, SessionServices, open_session
from supervisor.settings.model import ToolSearchSettings, TrustRule, TrustSettings
from supervisor.store import AuditRow
from supervisor.store.journal_lines import LineFields

EVERYTHING = ServerFeatures(
    resources=True, subscribe=True, templates=True, prompts=True, completions=True, logging=True
)
Handler = Callable[[CallTool], CallOutcome | None]


def answered(message: CallTool) -> CallOutcome | None:
    """The default answers: a text resource, a one-message prompt, two completions."""
    if message.method == "resources/read":
        uri = message.arguments["uri"]
        return Answered({"contents": [{"uri": uri, "mimeType": "text/plain", "text": f"text of {uri}"}]})
    if message.method == "prompts/get":
        args = message.arguments.get("arguments", {})
        text = f"{message.arguments['name']} with {sorted(args.items())}"
        return Answered({"messages": [{"role": "user", "content": {"type": "text", "text": text}}]})
    if message.method == "completion/complete":
        return Answered({"completion": {"values": ["alpha", "beta"], "total": 2, "hasMore": False}})
    return CallFailed("server_error", f"unexpected {message.method}")


@attrs.define
class FakeActor:
    """One server's mailbox: records what it is sent and answers with ``handler``
    (None from the handler: no answer until a CancelCall)."""

    name: str
    handler: Handler = answered
    seen: list[ConnectionMessage] = attrs.field(factory=list)
    send: trio.MemorySendChannel[ConnectionMessage] = attrs.field(init=False)
    receive: trio.MemoryReceiveChannel[ConnectionMessage] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.send, self.receive = trio.open_memory_channel[ConnectionMessage](64)

    async def run(self) -> None:
        async for message in self.receive:
            self.seen.append(message)
            if isinstance(message, CallTool):
                outcome = self.handler(message)
                if outcome is not None:
                    message.reply.send_nowait(outcome)
            elif isinstance(message, CancelCall):
                message.reply.send_nowait(CallFailed("cancelled", message.reason))
            elif isinstance(message, Subscribe | Unsubscribe) and message.reply is not None:
                message.reply.send_nowait(Answered({}))

    def calls(self) -> list[CallTool]:
        return [m for m in self.seen if isinstance(m, CallTool)]


def surface_catalog(
    actors: Mapping[str, FakeActor],
    published: Mapping[str, Mapping[str, Any]],
    *,
    states: Mapping[str, State] | None = None,
    features: Mapping[str, ServerFeatures] | None = None,
    specs: Mapping[str, ServerSpec] | None = None,
) -> Catalog:
    """A catalog of ``actors``' servers; ``published[server]`` has ``resources`` (URIs),
    ``templates`` (uriTemplates) and ``prompts`` (name → required arguments)."""
    servers = {
        name: ServerView(
            name,
            (specs or {}).get(name, ServerSpec(name, command=("x",))),
            actor.send,
            state=(states or {}).get(name, State.STEADY),
            generation=1,
            features=(features or {}).get(name, EVERYTHING),
        )
        for name, actor in actors.items()
    }
    pairs = [(s, uri) for s, items in published.items() for uri in items.get("resources", ())]
    shown = shown_uris(pairs)
    resources = {
        shown[(s, uri)]: ResourceEntry(
            shown[(s, uri)], s, uri, uri.rsplit("/", 1)[-1], {"uri": uri, "name": "n"}
        )
        for s, uri in pairs
    }
    template_pairs = [(s, t) for s, items in published.items() for t in items.get("templates", ())]
    shown_t = shown_uris(template_pairs)
    templates = {
        shown_t[(s, t)]: TemplateEntry(shown_t[(s, t)], s, t, "tpl", {"uriTemplate": t, "name": "tpl"})
        for s, t in template_pairs
    }
    prompts = {
        f"{s}_{name}": PromptEntry(
            f"{s}_{name}", s, name, "a prompt", tuple(required), tuple(required), {"name": name}
        )
        for s, items in published.items()
        for name, required in items.get("prompts", {}).items()
    }
    return Catalog(1, servers, prompts=prompts, resources=resources, templates=templates)


@attrs.define
class RecordingAudit:
    """The audit trail as a call sees it, keeping the rows in memory."""

    started_rows: list[AuditRow] = attrs.field(factory=list)
    rows: list[AuditRow] = attrs.field(factory=list)
    _ids: int = 0

    def new_id(self) -> str:
        self._ids += 1
        return f"r{self._ids}"

    def started(self, row: AuditRow) -> None:
        self.started_rows.append(row)

    def finished(self, row: AuditRow) -> None:
        self.rows.append(row)

    replica = None

    def started_fields(self, fields: LineFields) -> None:
        self.started_rows.append(AuditRow(**fields))

    def finished_fields(self, fields: LineFields) -> None:
        self.rows.append(AuditRow(**fields))


def services(
    catalog: Catalog, *, rules: tuple[TrustRule, ...] = (), approver: Approver | None = None
) -> tuple[SessionServices, RecordingAudit]:
    """What a session uses, around ``catalog`` (``.catalog.current``: replace it to move on)."""
    audit = RecordingAudit()
    events: Broadcast[Mapping[str, Any]] = Broadcast()
    any_audit: Any = audit
    calls = CallServices(ToolSearchSettings(enabled=False), RequestRegistry(), any_audit, Metrics(), events)
    policy = Policy(TrustSettings(rules=rules), trusted=lambda server: False)
    desk = ApprovalDesk(approver, 30.0, events)
    cell: Any = SimpleNamespace(current=catalog)
    router, _ = trio.open_memory_channel[Any](16)
    # What a session declares by default, and where it says which server logs it wants.
    connections: Any = SimpleNamespace(client_capabilities={}, log_wants=LogWants())
    return SessionServices(cell, router, connections, (), policy, desk, calls), audit


@asynccontextmanager
async def surface_session(
    actors: Mapping[str, FakeActor], catalog: Catalog, **options: Any
) -> AsyncIterator[tuple[Session, Turn, RecordingAudit]]:
    """The actors running, a session over ``catalog`` and a turn of it."""
    session_services, audit = services(catalog, **options)
    async with trio.open_nursery() as nursery:
        for actor in actors.values():
            nursery.start_soon(actor.run)
        async with open_session(session_services) as session:
            turn = Turn(session, session_services.calls, "t-1", catalog, False)
            yield session, turn, audit
        nursery.cancel_scope.cancel()
