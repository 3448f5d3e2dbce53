"""Approvals: when a trust decision is ``ask``, the host decides.

The host attaches an *approver*, an async callable that receives an
``ApprovalRequest`` and returns an ``Approval`` (or a bare ``"allow"`` / ``"deny"``,
meaning once). No answer within the approval timeout means deny; no approver at all
means deny, with a message saying an approval was required and none is attached.
Pending requests are listed on the desk so an operator surface can show them. A
calling client that can answer an elicitation form is asked instead
(``supervisor/sessions/trust_prompts.py``), under the same timeout.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import trio

from actors.broadcast import Broadcast
from actors.log_events import get_logger
from supervisor.store.records import person_field

log = get_logger("supervisor.approvals")

REMEMBER = ("once", "session", "always")


@attrs.frozen(slots=True)
class Approval:
    """A host's answer: ``allow`` or ``deny``, remembered once, for the session, or always."""

    decision: str
    remember: str = "once"

    def __attrs_post_init__(self) -> None:
        if self.decision not in ("allow", "deny"):
            raise ValueError(f"Approval decision must be 'allow' or 'deny', not {self.decision!r}")
        if self.remember not in REMEMBER:
            raise ValueError(f"Approval remember must be once, session or always, not {self.remember!r}")


@attrs.frozen(slots=True)
class ApprovalRequest:
    """What the host is asked about (``permission`` is ``mcp:<server>:<tool>``)."""

    id: str
    tool: str
    server: str
    permission: str
    arguments: Mapping[str, Any]
    reason: str
    session: str
    tenant: str
    person: str = ""
    """Who the call is made for ("": the tenant's own name, as a static-token caller's)."""


Approver = Callable[[ApprovalRequest], Awaitable["Approval | Verdict | str"]]
"""A host's approver; a ``Verdict`` answer denies with its own message (a front that
has nobody to ask says why)."""


def coerce(answer: object) -> Approval:
    """An Approval from what an approver returned; anything unreadable is a deny."""
    if isinstance(answer, Approval):
        return answer
    if answer in ("allow", "deny"):
        return Approval(str(answer))
    log.warning("approver returned %r; treating it as deny", type(answer).__name__)
    return Approval("deny")


@attrs.frozen(slots=True)
class Verdict:
    """The outcome of asking: the approval, or why the call is denied without one."""

    approval: Approval
    denial: str | None = None


@attrs.define(eq=False)
class _Parked:
    request: ApprovalRequest
    created: float
    reply: trio.MemorySendChannel[Approval]


class ApprovalDesk:
    """Asks the host: its approver callback, else an operator surface (the admin API,
    which sets ``remote``), under a timeout; lists what is pending, per tenant."""

    def __init__(
        self,
        approver: Approver | None,
        timeout_s: float,
        events: Broadcast[Mapping[str, Any]] | None = None,
    ) -> None:
        self.approver = approver
        self.timeout_s = timeout_s
        self.remote = False
        self._events = events
        self._parked: dict[str, _Parked] = {}
        self._ids = itertools.count(1)

    def next_id(self) -> str:
        """A fresh request id."""
        return f"apr-{next(self._ids)}"

    def pending(self, tenant: str | None = None) -> list[ApprovalRequest]:
        """Requests waiting for an operator's answer (of one tenant, or all)."""
        return [p.request for p in self._parked.values() if tenant is None or p.request.tenant == tenant]

    def answer(self, request_id: str, tenant: str | None, approval: Approval) -> bool:
        """Answer a parked request; False when there is none (of that tenant)."""
        parked = self._parked.get(request_id)
        if parked is None or (tenant is not None and parked.request.tenant != tenant):
            return False
        try:
            parked.reply.send_nowait(approval)
        except trio.WouldBlock:
            return False  # answered already
        return True

    async def ask(self, request: ApprovalRequest, asker: Approver | None = None) -> Verdict:
        """Ask once; deny on timeout, on a missing approver, or on an approver error.
        ``asker``: who is asked instead of the desk's approver or operator (the calling
        client, ``supervisor/sessions/trust_prompts.py``), under the same timeout."""
        if asker is not None:
            return await self._ask_callback(asker, request)
        if self.approver is not None:
            return await self._ask_callback(self.approver, request)
        if self.remote:
            return await self._ask_operator(request)
        return Verdict(
            Approval("deny"),
            f"approval required for {request.tool} ({request.reason}) but no approver is attached; "
            "attach one or add a trust rule",
        )

    def _timed_out(self, request: ApprovalRequest) -> Verdict:
        return Verdict(
            Approval("deny"),
            f"no answer to the approval request for {request.tool} within {self.timeout_s:g} s; denied",
        )

    async def _ask_callback(self, approver: Approver, request: ApprovalRequest) -> Verdict:
        with trio.move_on_after(self.timeout_s):
            try:
                answer = await approver(request)
                return answer if isinstance(answer, Verdict) else Verdict(coerce(answer))
            except Exception as exc:  # the host's code failed: fail closed, say so
                log.exception("approver failed", extra={"fields": {"tool": request.tool}})
                return Verdict(Approval("deny"), f"the approver failed ({type(exc).__name__}); denied")
        return self._timed_out(request)

    async def _ask_operator(self, request: ApprovalRequest) -> Verdict:
        reply, answers = trio.open_memory_channel[Approval](1)
        self._parked[request.id] = _Parked(request, trio.current_time(), reply)
        self._publish(request, "pending")
        try:
            with trio.move_on_after(self.timeout_s):
                approval = await answers.receive()
                self._publish(request, approval.decision)
                return Verdict(approval)
            self._publish(request, "expired")
            return self._timed_out(request)
        finally:
            del self._parked[request.id]

    def _publish(self, request: ApprovalRequest, status: str) -> None:
        if self._events is not None:
            self._events.publish(
                {
                    "type": "approval",
                    "status": status,
                    "id": request.id,
                    "tool": request.tool,
                    "server": request.server,
                    "permission": request.permission,
                    "reason": request.reason,
                    "session": request.session,
                    "tenant": request.tenant,
                    **person_field(request.person, request.tenant),
                }
            )
