"""The trust pipeline of one call: rules, pins, remembered answers.

``decide`` is pure: defaults and rules (``actors.router.trust``), then pinning (an
allow turns into ask when the tool's definition changed since it was last allowed,
and an ask then says what changed: ``changed: description``), then remembered answers
(only for what would otherwise be asked, and only while the tool's fingerprint is the
one that was approved). The policy's own state — pins (with the hash of each part of
the pinned definition) and "always" answers — is changed only by its synchronous
methods, never across an await, and written through to the store. The surface's reads
(resources, prompts, completions: ``supervisor/calls/turn_surface.py``) come as entries
without a fingerprint: no definition of theirs can change under an approval, so none
is pinned.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from actors.router.catalog import ToolEntry
from actors.router.trust import (
    Action,
    Decision,
    apply_pin,
    compile_rules,
    decide,
    denied_outright,
    permission_of,
)
from actors.tool_definitions import DefinitionParts, changed_parts, part_hashes
from supervisor.settings.model import TrustSettings
from supervisor.store import ForgetApproval, RememberApproval, SetPin, StoreMessage

Submit = Callable[[StoreMessage], object]
SessionMemory = Mapping[tuple[str, str], Action]


class Policy:
    """Trust rules, pins and remembered approvals for the whole supervisor."""

    def __init__(
        self,
        settings: TrustSettings,
        *,
        trusted: Callable[[str], bool],
        pins: Mapping[tuple[str, str], str] | None = None,
        pin_parts: Mapping[tuple[str, str], DefinitionParts] | None = None,
        approvals: Mapping[tuple[str, str], tuple[str, str]] | None = None,
        submit: Submit | None = None,
    ) -> None:
        self.settings = settings
        self.rules = compile_rules(settings.rules)
        self._trusted = trusted
        self._pins: dict[tuple[str, str], str] = dict(pins or {})
        self._pin_parts: dict[tuple[str, str], DefinitionParts] = dict(pin_parts or {})
        self._always: dict[tuple[str, str], tuple[str, str]] = dict(approvals or {})
        self._submit = submit

    def retune(self, settings: TrustSettings, trusted: Callable[[str], bool]) -> None:
        """A config reload: the new rules and trusted servers decide the calls from now
        on; pins and remembered approvals stay."""
        self.settings, self.rules, self._trusted = settings, compile_rules(settings.rules), trusted

    def decide(
        self,
        entry: ToolEntry,
        arguments: Mapping[str, Any],
        *,
        tenant: str,
        memory: SessionMemory,
        trusted: bool | None = None,
    ) -> Decision:
        """allow / ask / deny for one call of ``entry`` with ``arguments``. ``trusted``:
        the server's trust as the caller's turn saw it (a reload applies from the next
        turn); None: as configured now."""
        assert entry.risk is not None
        decision = decide(
            entry.server,
            entry.name,
            arguments,
            trusted=self._trusted(entry.server) if trusted is None else trusted,
            risk=entry.risk,
            rules=self.rules,
            subject_arguments=entry.subject_arguments,
        )
        current = entry.fingerprint  # "" for the surface's reads: no definition to pin
        pinned = self._pins.get((entry.server, entry.name))
        if pinned is not None and pinned != current and current:  # moved since it was last allowed
            decision = apply_pin(decision, current, pinned, self.changed(entry))
        if decision.action is not Action.ASK:
            return decision
        permission = permission_of(entry.server, entry.name)
        remembered = memory.get((permission, entry.fingerprint))
        if remembered is not None:
            return Decision(remembered, f"remembered for this session: {remembered.value}", None)
        always = self._always.get((tenant, permission))
        if always is not None and always[0] == entry.fingerprint:
            action = Action(always[1])
            return Decision(action, f"remembered always: {action.value}", None)
        return decision

    def changed(self, entry: ToolEntry) -> str:
        """What moved in ``entry``'s definition since the one pinned for its tool."""
        now = part_hashes(entry.description, entry.input_schema)
        return changed_parts(self._pin_parts.get((entry.server, entry.name)), now)

    def denied_outright(self, entry: ToolEntry) -> bool:
        """Whether every call of ``entry`` is denied by a rule, whatever its arguments."""
        return denied_outright(permission_of(entry.server, entry.name), self.rules)

    def allowed(self, entry: ToolEntry) -> None:
        """A call of ``entry`` goes ahead: pin its definition as the allowed one."""
        key = (entry.server, entry.name)
        if entry.fingerprint and self._pins.get(key) != entry.fingerprint:
            self._pins[key] = entry.fingerprint
            self._pin_parts[key] = parts = part_hashes(entry.description, entry.input_schema)
            if self._submit is not None:
                self._submit(SetPin(entry.server, entry.name, entry.fingerprint, parts))

    def remember_always(self, tenant: str, entry: ToolEntry, action: Action) -> None:
        """Keep an "always" answer (for this tool definition) across restarts."""
        permission = permission_of(entry.server, entry.name)
        self._always[(tenant, permission)] = (entry.fingerprint, action.value)
        if self._submit is not None:
            self._submit(RememberApproval(tenant, permission, entry.fingerprint, action.value))

    def forget_always(self, tenant: str, permission: str) -> bool:
        """Revoke ``tenant``'s "always" answer for ``permission`` (``mcp:<server>:<tool>``):
        its next call is asked again, on every supervisor sharing the store. Whether
        there was one."""
        known = self._always.pop((tenant, permission), None) is not None
        if self._submit is not None:  # also when unknown here: another process may have it
            self._submit(ForgetApproval(tenant, permission))
        return known

    def remembered(self, tenant: str | None) -> list[tuple[str, str, str]]:
        """The "always" answers of ``tenant`` (None: every tenant's), as (tenant,
        permission, decision), sorted."""
        return sorted(
            (owner, permission, decision)
            for (owner, permission), (_fingerprint, decision) in self._always.items()
            if tenant is None or owner == tenant
        )

    # What the store's feed says was committed (by this supervisor or another one).

    def mirror_pin(self, server: str, tool: str, fingerprint: str, parts: DefinitionParts | None) -> None:
        self._pins[(server, tool)] = fingerprint
        if parts is None:
            self._pin_parts.pop((server, tool), None)
        else:
            self._pin_parts[(server, tool)] = parts

    def mirror_always(self, tenant: str, permission: str, fingerprint: str, decision: str) -> None:
        self._always[(tenant, permission)] = (fingerprint, decision)

    def mirror_forget(self, tenant: str, permission: str) -> None:
        self._always.pop((tenant, permission), None)

    def mirror_all(
        self,
        pins: Mapping[tuple[str, str], str],
        pin_parts: Mapping[tuple[str, str], DefinitionParts],
        approvals: Mapping[tuple[str, str], tuple[str, str]],
    ) -> None:
        """The whole state, read again (after a listener's outage)."""
        self._pins, self._pin_parts, self._always = dict(pins), dict(pin_parts), dict(approvals)
