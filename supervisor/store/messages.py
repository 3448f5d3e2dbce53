"""What the store actor is asked to write (its mailbox's messages).

Frozen values: callers on the call path build one and ``submit`` it without waiting;
the actor writes them in batches (``supervisor.store.actor``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeAlias

import attrs

from actors.tool_definitions import DefinitionParts
from supervisor.store.records import AuditRow


@attrs.frozen(slots=True)
class AddAudit:
    """Append one audit row (the call path journals its rows instead: ``journal.py``)."""

    kind: ClassVar[str] = "audit rows"  # what a count of them is called (in the log)

    row: AuditRow


@attrs.frozen(slots=True)
class RememberApproval:
    """Remember an "always" answer (see ``Store.remember_approval``)."""

    kind: ClassVar[str] = "remembered approvals"

    tenant: str
    permission: str
    fingerprint: str
    decision: str


@attrs.frozen(slots=True)
class ForgetApproval:
    """Drop a remembered answer."""

    kind: ClassVar[str] = "forgotten approvals"

    tenant: str
    permission: str


@attrs.frozen(slots=True)
class SetPin:
    """Pin a tool definition's fingerprint (``parts``: the hash of each of its parts)."""

    kind: ClassVar[str] = "pins"

    server: str
    tool: str
    fingerprint: str
    parts: DefinitionParts | None = None


@attrs.frozen(slots=True, eq=False)
class SaveToolList:
    """Replace a server's last-known listing: its tools and (``surface``) the rest of
    it. Do not mutate ``tools`` or ``surface`` after submitting: they are serialized
    later, in the actor's thread."""

    kind: ClassVar[str] = "tool lists"

    server: str
    tools: Sequence[Mapping[str, Any]]
    listed_at: float
    surface: Mapping[str, Any] | None = None


@attrs.frozen(slots=True)
class SaveEra:
    """Remember the protocol era a server speaks (None: forget it, so it is probed)."""

    kind: ClassVar[str] = "eras"

    server: str
    era: str | None
    found_at: float


StoreMessage: TypeAlias = AddAudit | RememberApproval | ForgetApproval | SetPin | SaveToolList | SaveEra
