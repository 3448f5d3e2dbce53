"""Approvals: when a trust decision is ``ask``, the host decides.

The host attaches an *approver*, an async callable that receives an
``ApprovalRequest`` and returns an ``Approval`` (or a bare ``"allow"`` / ``"deny"``,
meaning once). No answer within the approval timeout means deny; no approver at all
means deny, with a message saying an approval was required and none is attached.
Pending requests are listed on the desk so an operator surface can show them.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import trio

log = logging.getLogger("supervisor.approvals")

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


Approver = Callable[[ApprovalRequest], Awaitable["Approval | str"]]


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


class ApprovalDesk:
    """Asks the host's approver, under a timeout; lists what is pending."""

    def __init__(self, approver: Approver | None, timeout_s: float) -> None:
        self.approver = approver
        self.timeout_s = timeout_s
        self.pending: dict[str, ApprovalRequest] = {}
        self._ids = itertools.count(1)

    def next_id(self) -> str:
        """A fresh request id."""
        return f"apr-{next(self._ids)}"

    async def ask(self, request: ApprovalRequest) -> Verdict:
        """Ask once; deny on timeout, on a missing approver, or on an approver error."""
        if self.approver is None:
            return Verdict(
                Approval("deny"),
                f"approval required for {request.tool} ({request.reason}) but no approver is attached; "
                "attach one or add a trust rule",
            )
        self.pending[request.id] = request
        try:
            with trio.move_on_after(self.timeout_s):
                try:
                    return Verdict(coerce(await self.approver(request)))
                except Exception as exc:  # the host's code failed: fail closed, say so
                    log.exception("approver failed", extra={"fields": {"tool": request.tool}})
                    return Verdict(Approval("deny"), f"the approver failed ({type(exc).__name__}); denied")
            return Verdict(
                Approval("deny"),
                f"no answer to the approval request for {request.tool} within {self.timeout_s:g} s; denied",
            )
        finally:
            self.pending.pop(request.id, None)
