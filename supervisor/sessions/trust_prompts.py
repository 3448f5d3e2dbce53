"""Trust prompts through MCP elicitation: an ``ask`` put to the client that made the call.

When a call's trust decision is ``ask`` and its calling client declared elicitation in
form mode (a gateway session on ``/mcp`` or ``mcp-supervisor stdio``, or an embedding's
session with an ``elicitation`` handler), the desk asks that client instead of its
approver or operator (``approver_for``). The form names the tool, its server, the
permission, the reason and the arguments (masked as log lines are, cut at
``MAX_ARGUMENTS_BYTES``), and offers one choice: allow once, for the session,
always, or deny. The choice has no default, so a client that fills in defaults
(SEP-1034) cannot approve for its user: decline, cancel, an answer without a valid
choice, an error, or no answer within ``approval_timeout_s`` is a deny. The answer
is an ``Approval`` like an operator's, and ``Session.authorize`` alone decides what it
does (once, remembered for the session, remembered always).

Such an approval is the client's word: a client can answer without asking anyone.
Permissions listed in ``trust.operator_only`` are never put to a client; they stay
with the host's approver or the admin API's approvals.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from actors.connection.client_side import ClientSide, RequestRefused
from actors.log_events import redact
from actors.router.envelope import truncate_utf8
from supervisor.sessions.approvals import Approval, ApprovalRequest, Approver, Verdict
from supervisor.sessions.handlers import ELICITATION

MAX_ARGUMENTS_BYTES = 2048
"""How much of a call's arguments (as JSON) the form shows."""
META_KEY = "mcp-supervisor/approval"
"""The request's ``_meta`` entry with the form's facts, for clients that show them their way."""
CHOICE = "decision"
CHOICES = {
    "allow_once": Approval("allow", "once"),
    "allow_session": Approval("allow", "session"),
    "allow_always": Approval("allow", "always"),
    "deny": Approval("deny"),
}
_TITLES = {
    "allow_once": "Allow once",
    "allow_session": "Allow for this session",
    "allow_always": "Allow always",
    "deny": "Deny",
}


def can_elicit_forms(client: ClientSide) -> bool:
    """Whether ``client`` answers server requests and declared form-mode elicitation
    (``{}``, the form mode's old spelling, or ``{"form": {}}``)."""
    declared = client.capabilities.get("elicitation")
    if client.handler is None or not isinstance(declared, Mapping):
        return False
    return "form" in declared or "url" not in declared


def shown_arguments(arguments: Mapping[str, Any]) -> str:
    """The arguments as the form shows them: JSON, masked as log lines are, bounded."""
    try:
        text = orjson.dumps(arguments, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        text = repr(arguments)
    text, _ = truncate_utf8(redact(text), MAX_ARGUMENTS_BYTES)
    return text


def form(request: ApprovalRequest) -> dict[str, Any]:
    """The ``elicitation/create`` params that ask about ``request``."""
    arguments = shown_arguments(request.arguments)
    message = (
        f"Allow the call of {request.tool} on MCP server {request.server}?\n"
        f"permission: {request.permission}\n"
        f"reason: {request.reason}\n"
        f"arguments: {arguments}"
    )
    choice = {
        "type": "string",
        "title": "Your answer",
        "description": "Allow this call once, for this session, always, or deny it.",
        "oneOf": [{"const": value, "title": title} for value, title in _TITLES.items()],
        "enum": list(_TITLES),  # for clients of 2025-06-18, which know no oneOf
    }
    facts = {
        "id": request.id,
        "tool": request.tool,
        "server": request.server,
        "permission": request.permission,
        "reason": request.reason,
        "arguments": arguments,
    }
    return {
        "mode": "form",
        "message": message,
        "requestedSchema": {"type": "object", "properties": {CHOICE: choice}, "required": [CHOICE]},
        "_meta": {META_KEY: facts},
    }


def read_answer(request: ApprovalRequest, result: Mapping[str, Any] | None) -> Verdict:
    """The client's answer as a verdict: an allow only for an accepted, valid choice."""
    action = result.get("action") if isinstance(result, Mapping) else None
    if action in ("decline", "cancel"):
        said = "declined" if action == "decline" else "dismissed"
        return Verdict(Approval("deny"), f"the user {said} the approval prompt for {request.tool}; denied")
    content = result.get("content") if isinstance(result, Mapping) and action == "accept" else None
    choice = content.get(CHOICE) if isinstance(content, Mapping) else None
    approval = CHOICES.get(choice) if isinstance(choice, str) else None
    if approval is None:
        return Verdict(
            Approval("deny"),
            f"the client's answer to the approval prompt for {request.tool} made no choice "
            f"(one of {', '.join(CHOICES)} is needed; none is assumed); denied",
        )
    if approval.decision == "deny":
        return Verdict(approval, f"call to {request.tool} denied by the user")
    return Verdict(approval)


def client_approver(client: ClientSide) -> Approver:
    """An approver that asks ``client`` through form-mode elicitation."""
    handler = client.handler
    assert handler is not None

    async def ask_client(request: ApprovalRequest) -> Verdict:
        try:
            # "": the supervisor itself asks, not one of its servers.
            result = await handler("", ELICITATION, form(request))
        except RequestRefused as refused:
            return Verdict(
                Approval("deny"),
                f"the client refused the approval prompt for {request.tool} ({refused.message}); denied",
            )
        return read_answer(request, result)

    return ask_client


def approver_for(client: ClientSide | None, permission: str, operator_only: Sequence[str]) -> Approver | None:
    """The calling client as the approver of one ask (None: the desk's own), unless it
    cannot answer a form or ``permission`` matches a glob of ``trust.operator_only``."""
    if client is None or not can_elicit_forms(client):
        return None
    if any(fnmatch.fnmatchcase(permission, glob) for glob in operator_only):
        return None
    return client_approver(client)
