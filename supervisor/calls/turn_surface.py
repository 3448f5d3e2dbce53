"""The rest of a server's surface in a turn: resources, templates, prompts, completions.

``Turn`` (``supervisor/calls/turns.py``) inherits ``TurnSurface``. What it lists comes from
the turn's frozen catalog, like its tools; a read, a prompt get or a completion takes
the steps of a call (docs/architecture.md, "The surface's path"):

1. resolve what the host names in the frozen catalog (``supervisor/calls/surface_targets.py``:
   a shown URI, the qualified form, ``server=``; a prompt id; a completion's ref) —
   ``unknown_resource`` / ``unknown_prompt``; a prompt's arguments must be strings
   with the required ones present (``invalid_arguments``, the server is not contacted);
2. a server that did not declare the feature is refused ``unsupported``, one that was
   unavailable when the turn began ``unavailable``;
3. trust: the permission ``mcp:<server>:resources`` (the rule's pattern matched on the
   URI the server reads, also lexically normalized) or ``mcp:<server>:prompts`` (the
   pattern matched on the server's prompt name); with no rule, allow (they are reads,
   on any server); ask goes to the approval desk, deny ends it ``denied``; a rate
   limit refuses it ``rate_limited`` before anyone is asked, as a call;
4. the request (``CallTool`` with its ``method`` and the params as sent, with the
   server's own URI or name) to the server's connection actor;
5. one envelope (``supervisor/calls/surface_results.py``), bounded by the server's
   ``max_output_bytes``, and one audit row (its tool column: the shown URI, the prompt
   id, or ``completion:<ref>``).
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import trio

from actors.connection.messages import CallOutcome, CallTool
from actors.connection.states import Availability
from actors.router.catalog import Catalog, ServerView, ToolEntry
from actors.router.depth import MAX_ARGUMENT_DEPTH, nested_deeper_than
from actors.router.envelope import CallError, Envelope, failure
from actors.router.risk import Risk
from actors.router.surface_entries import PromptEntry, ResourceEntry, TemplateEntry
from actors.router.trust import Action, Decision
from supervisor.calls.dispatch import dispatch, unavailable_in_turn
from supervisor.calls.in_flight import LiveCall
from supervisor.calls.requests import InFlightRequest
from supervisor.calls.services import calling_client
from supervisor.calls.surface_results import surface_envelope
from supervisor.calls.surface_targets import completion_target, prompt_problem, prompt_target, resource_target
from supervisor.calls.turn_audit import TurnAudit, Went
from supervisor.runtime.tracing import TRACING
from supervisor.store.records import arguments_digest, audited_name, bounded_hash

RESOURCES = "resources"
PROMPTS = "prompts"
_NO_RISK = Risk()


def surface_permission(server: str, kind: str, label: str) -> ToolEntry:
    """What policy decides a read or a prompt get on: permission ``mcp:<server>:<kind>``,
    no risk (so the default is allow), no fingerprint (nothing to pin). Its subject
    is the only string it is given: the ``uri`` (a subject argument) or the ``name``."""
    return ToolEntry(label, server, kind, "", {}, risk=_NO_RISK, subject_arguments=kind == RESOURCES)


def uri_subjects(uri: str) -> list[str]:
    """What a ``resources`` rule's pattern is matched on: the URI, and, when its path
    has ``.``/``..`` segments, the URI with them resolved (so ``file:///tmp/../etc``
    meets a deny of ``file:///etc/*`` and escapes no allow of ``file:///tmp/*``)."""
    parts = urlsplit(uri)
    if not any(segment in (".", "..") for segment in parts.path.split("/")):
        return [uri]
    return [uri, urlunsplit(parts._replace(path=posixpath.normpath(parts.path)))]


class TurnSurface(TurnAudit):
    """Resources, templates, prompts and completions of one turn (a mixin of ``Turn``)."""

    catalog: Catalog

    # ----------------------------------------------------------------- listings

    def resources(self) -> tuple[ResourceEntry, ...]:
        """The resources this turn shows (its frozen catalog's, in config order)."""
        return tuple(self.catalog.resources.values())

    def resource_templates(self) -> tuple[TemplateEntry, ...]:
        """The resource templates this turn shows."""
        return tuple(self.catalog.templates.values())

    def prompts(self) -> tuple[PromptEntry, ...]:
        """The prompts this turn shows (ids ``<server>_<prompt>``)."""
        return tuple(self.catalog.prompts.values())

    def resource_listing(self) -> list[dict[str, Any]]:
        """``resources()`` as plain data: each server's item as sent, with the shown
        ``uri``, its ``server``, the server's ``availability`` in this turn, and
        ``stale`` (true: from the store's copy of a server that has not listed its own
        in this run, as for tools)."""
        return [self._item(e.raw, e.server, uri=e.uri) for e in self.catalog.resources.values()]

    def template_listing(self) -> list[dict[str, Any]]:
        """``resource_templates()`` as plain data (the shown ``uriTemplate``)."""
        return [
            self._item(e.raw, e.server, uriTemplate=e.uri_template) for e in self.catalog.templates.values()
        ]

    def prompt_listing(self) -> list[dict[str, Any]]:
        """``prompts()`` as plain data: ``id`` and ``name`` are the prompt id (what
        ``get_prompt`` takes), the rest as the server sent it."""
        return [self._item(e.raw, e.server, id=e.id, name=e.id) for e in self.catalog.prompts.values()]

    def _item(self, raw: Mapping[str, Any], server: str, **shown: str) -> dict[str, Any]:
        view = self.catalog.servers[server]
        return {
            **raw,
            **shown,
            "server": server,
            "availability": view.availability.value,
            "stale": view.cached_only,
        }

    # ------------------------------------------------------------------ requests

    async def read_resource(
        self, uri: str, server: str | None = None, *, request_id: str | None = None
    ) -> Envelope:
        """Read one resource (``resources/read``): ``uri`` as the turn shows it, in its
        qualified form, or as ``server`` knows it. One envelope, whatever happens (error
        codes: ``unknown_resource``, ``unsupported``, ``unavailable``, ``denied``,
        ``timeout``, ``cancelled``, ``server_error``); one audit row. ``request_id``
        lets it be cancelled as a call is (``Supervisor.requests.cancel``); an id in
        flight already raises RequestInFlight."""
        with self._span("resources/read", uri), self._in_flight(request_id, uri) as request:
            target = resource_target(self.catalog, uri, server)
            if isinstance(target, CallError):
                return await self._refused(audited_name(uri), "", {"uri": uri}, target)
            params = {"uri": target.server_uri}
            subject = {"uri": uri_subjects(target.server_uri)}
            return await self._request(
                target.shown, target.server, RESOURCES, "resources/read", params, subject, request
            )

    async def get_prompt(
        self, prompt_id: str, arguments: Mapping[str, str] | None = None, *, request_id: str | None = None
    ) -> Envelope:
        """Get one prompt (``prompts/get``) by its id, with its arguments (strings).
        One envelope (``unknown_prompt``, ``invalid_arguments``, ``unsupported``, and
        the codes of ``read_resource``) and one audit row."""
        with self._span("prompts/get", prompt_id), self._in_flight(request_id, prompt_id) as request:
            prompt = prompt_target(self.catalog, prompt_id)
            if isinstance(prompt, CallError):
                return await self._refused(audited_name(prompt_id), "", arguments, prompt)
            given: Any = {} if arguments is None else arguments
            problem = prompt_problem(prompt, given)
            if problem is not None:
                why = CallError("invalid_arguments", problem)
                return await self._refused(prompt.id, prompt.server, given, why)
            params = {"name": prompt.name, "arguments": dict(given)}
            subject = {"name": prompt.name}
            return await self._request(
                prompt.id, prompt.server, PROMPTS, "prompts/get", params, subject, request
            )

    async def complete(
        self, ref: Mapping[str, Any], argument: Mapping[str, Any], context: Mapping[str, Any] | None = None
    ) -> Envelope:
        """Ask for completions (``completion/complete``) of one argument of a prompt
        (``{"type": "ref/prompt", "name": <prompt id>}``) or of a resource template or
        URI (``{"type": "ref/resource", "uri": <as shown>}``); ``argument`` is
        ``{"name", "value"}``, ``context`` ``{"arguments": {…}}``. The envelope's
        ``text`` has the values one a line, ``structured`` the server's result;
        ``unsupported`` when the server did not declare completions. One audit row,
        its tool ``completion:<ref>``."""
        with self._span("completion/complete", ""):
            return await self._complete(ref, argument, context)

    async def _complete(
        self, ref: Mapping[str, Any], argument: Mapping[str, Any], context: Mapping[str, Any] | None
    ) -> Envelope:
        shown_ref = ref.get("name", ref.get("uri")) if isinstance(ref, Mapping) else None
        label = f"completion:{shown_ref if isinstance(shown_ref, str) else ''}"
        sent: dict[str, Any] = {"ref": ref, "argument": argument}
        if context is not None:
            sent["context"] = context
        target = completion_target(self.catalog, ref)
        if isinstance(target, CallError):
            return await self._refused(audited_name(label), "", sent, target)
        server, server_ref, _shown = target
        problem = _completion_problem(argument, context)
        if problem is not None:
            return await self._refused(label, server, sent, CallError("invalid_arguments", problem))
        params = {**sent, "ref": server_ref}
        if server_ref["type"] == "ref/prompt":
            kind, subject = PROMPTS, {"name": server_ref["name"]}
        else:
            kind, subject = RESOURCES, {"uri": uri_subjects(server_ref["uri"])}
        return await self._request(label, server, kind, "completion/complete", params, subject, None)

    # -------------------------------------------------------------------- the path

    def _span(self, method: str, target: str) -> AbstractContextManager[None]:
        """Our span of the request (``mcp_supervisor …``), or nothing while traces are off."""
        tracing = TRACING.active
        return nullcontext() if tracing is None else tracing.call_span(method, target, self.catalog.epoch)

    @contextmanager
    def _in_flight(self, request_id: str | None, label: str) -> Iterator[InFlightRequest | None]:
        """The request registered under ``request_id`` (if any) while it runs, so that
        it can be cancelled by id; an id in flight already raises RequestInFlight."""
        if request_id is None:
            yield None
            return
        requests, tenant = self._calls.requests, self.session.tenant
        request = requests.open(request_id, tenant, label)
        try:
            yield request
        finally:
            requests.close(request_id, tenant)

    async def _refused(self, label: str, server: str, arguments: Any, why: CallError) -> Envelope:
        """A request that goes nowhere: its envelope and its row (decision ``none``)."""
        return await self._audited(
            label, server, _digest(arguments), "none", failure(label, why.code, why.message)
        )

    async def _request(
        self,
        label: str,
        server: str,
        kind: str,
        method: str,
        params: dict[str, Any],
        subject: Mapping[str, Any],
        request: InFlightRequest | None,
    ) -> Envelope:
        """Steps 2 to 5 of the module docstring, for a resolved request."""
        view = self.catalog.servers[server]
        digest = _digest(params)
        if not _declared(view, method):
            feature = "completions" if method == "completion/complete" else kind
            why = f"mcp server {server} does not serve {feature} (it did not declare the capability)"
            return await self._audited(label, server, digest, "none", failure(label, "unsupported", why))
        if view.availability is Availability.UNAVAILABLE:
            down = failure(label, "unavailable", unavailable_in_turn(server, view.state.value))
            return await self._audited(label, server, digest, "none", down)
        entry = surface_permission(server, kind, label)
        first = self.session.first_word(entry, subject, trusted=view.spec.trusted)
        if first.rule is not None and (tracing := TRACING.active) is not None:
            tracing.decided(first.rule)  # which trust rule decided, on our span
        if first.action is Action.DENY:
            verdict = await self.session.authorize(entry, subject, first)
            return await self._audited(
                label, server, digest, verdict.decided, failure(label, "denied", verdict.reason)
            )
        limited = self._calls.limits.refusal(self.session.tenant, server, _own_name(params))
        if limited is not None:
            over = failure(label, limited.code, limited.message, limited.retry_after_ms)
            return await self._audited(label, server, digest, first.action.value, over)
        go = functools.partial(
            self._surface_go, server, label, method, params, entry, subject, first, request
        )
        return await self._journaled(label, server, digest, first.action.value, go)

    async def _surface_go(
        self,
        server: str,
        label: str,
        method: str,
        params: dict[str, Any],
        entry: ToolEntry,
        subject: Mapping[str, Any],
        first: Decision,
        request: InFlightRequest | None,
        live: LiveCall,
    ) -> Went:
        """Authorize an allowed or asked request and send it."""
        verdict = await self.session.authorize(entry, subject, first)
        if verdict.action is not Action.ALLOW:
            return verdict.decided, failure(label, "denied", verdict.reason), 0.0
        if (request is not None and request.cancelled) or live.cancelled_by is not None:
            return verdict.decided, failure(label, "cancelled", f"{method} {label} was cancelled"), 0.0
        envelope, seconds = await self._send(server, label, method, params, request, live)
        return verdict.decided, envelope, seconds

    async def _send(
        self,
        server: str,
        label: str,
        method: str,
        params: dict[str, Any],
        request: InFlightRequest | None,
        live: LiveCall | None = None,
    ) -> tuple[Envelope, float]:
        """Send the request to the server's connection actor: its answer's envelope, and
        the seconds it took."""
        view = self.catalog.servers[server]
        reply, answers = trio.open_memory_channel[CallOutcome](1)
        if request is not None:
            request.mailbox, request.reply = view.mailbox, reply
        if live is not None:
            live.mailbox, live.reply = view.mailbox, reply
        timeouts = (view.spec.call_timeout_s, view.spec.max_call_timeout_s)  # as the turn saw them
        name = params.get("name") or params.get("uri") or label
        client = calling_client(self.session)
        call = CallTool(str(name), params, reply, None, timeouts, method=method, client=client)
        started = trio.current_time()
        outcome = await dispatch(view, call, answers)
        seconds = trio.current_time() - started
        envelope = surface_envelope(label, method, outcome, round(seconds * 1000), view.spec.max_output_bytes)
        return envelope, seconds


def _declared(view: ServerView, method: str) -> bool:
    """Whether the server declared what ``method`` needs; a server that has not listed
    in this run yet (an idle lazy one) is given the benefit of the doubt: the request
    starts it, and a server without the feature answers with an error."""
    features = view.features
    if view.generation == 0:
        return True
    if method == "completion/complete":
        return bool(features.completions)
    if method == "prompts/get":
        return bool(features.prompts)
    return bool(features.resources)


def _own_name(params: Mapping[str, Any]) -> str:
    """What a rate limit's ``tool`` is matched on: the server's own name of what is
    asked (the URI it reads, the prompt's name, ``completion:`` and the ref's)."""
    ref = params.get("ref")
    if isinstance(ref, Mapping):
        return f"completion:{ref.get('name') or ref.get('uri')}"
    return str(params.get("uri") or params.get("name"))


def _digest(arguments: Any) -> tuple[str, int]:
    if nested_deeper_than(arguments, MAX_ARGUMENT_DEPTH):
        return bounded_hash(arguments)
    return arguments_digest({} if arguments is None else arguments)


def _completion_problem(argument: Any, context: Any) -> str | None:
    """Why a completion's ``argument`` / ``context`` cannot be sent (MCP's shapes), or None."""
    where = "invalid arguments for completion"
    if not isinstance(argument, Mapping) or not all(
        isinstance(argument.get(k), str) for k in ("name", "value")
    ):
        return f'{where}: $.argument: must be {{"name": <string>, "value": <string>}}'
    if context is None:
        return None
    given = context.get("arguments", {}) if isinstance(context, Mapping) else None
    if not isinstance(given, Mapping) or not all(isinstance(v, str) for v in given.values()):
        return f'{where}: $.context: must be {{"arguments": {{<name>: <string>}}}}'
    return None
