"""Trust decisions for tool calls: pure functions, no Trio, no I/O.

The router asks one question per call — allow, ask or deny? — and this module answers
it from data alone, so every branch is a unit test:

1. ``risk.classify`` guesses a tool's risk (writes / network / shell) from its MCP
   annotations *and* the words in its name and description (see ``risk.py`` for how).
2. ``default_action``: trusted servers are allowed; an untrusted server's risky
   tool is asked about, its harmless tool is allowed.
3. ``decide``: the host's ordered rules override the default; the last rule that
   applies wins. A rule applies when its ``permission`` glob matches
   ``mcp:<server>:<tool>`` (original, unsanitized names) and its ``pattern`` glob
   matches the call's candidates (``subjects.py``): any of them for ``deny`` and
   ``ask``, every one for ``allow``. A call with no candidate is matched as one empty
   string, so ``*`` applies to it and ``/tmp/*`` does not: an allow never vouches for
   what it could not check.
4. ``apply_pin``: an ``allow`` for a tool whose description or schema changed since
   it was last allowed drops to ``ask``, with the reason ``changed: <what changed>``
   (an ``ask`` says so first); the definitions are hashed in ``actors/tool_definitions.py``.
"""

from __future__ import annotations

import enum
import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeAlias

import attrs

from actors.router.risk import Risk
from actors.router.subjects import Candidate, candidates_of
from actors.tool_definitions import fingerprint

__all__ = [
    "Action", "CompiledRule", "Decision", "Rule", "RuleLike", "apply_pin", "changed_reason",
    "compile_rules", "decide", "default_action", "denied_outright", "fingerprint", "listing_description",
    "permission_of",
]  # fmt: skip


class Action(enum.StrEnum):
    """What happens to a call; the values are the config file's words."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


# --- rules -------------------------------------------------------------------------


@attrs.frozen(slots=True)
class Rule:
    """One host rule: ``permission`` globs ``mcp:<server>:<tool>``, ``pattern`` the candidates."""

    permission: str
    pattern: str
    action: Action


@attrs.frozen(slots=True)
class CompiledRule:
    """A rule with its globs compiled once; ``index`` is its 0-based place in the config."""

    index: int
    rule: Rule
    permission_re: re.Pattern[str]
    pattern_re: re.Pattern[str]

    def matches(self, permission: str, subject: str) -> bool:
        """Both globs match (fnmatchcase: case-sensitive, ``*`` crosses ``:`` and ``/``)."""
        return self.permission_matches(permission) and self.subject_matches(subject)

    def permission_matches(self, permission: str) -> bool:
        return self.permission_re.match(permission) is not None

    def subject_matches(self, subject: str) -> bool:
        return self.pattern_re.match(subject) is not None

    def applies(self, candidates: Sequence[Candidate]) -> tuple[bool, str]:
        """Whether the pattern covers ``candidates`` for this rule's action, and how.

        Deny and ask: any candidate matches. Allow: every candidate matches. None: the
        pattern is matched against "" (so ``*`` applies and ``/tmp/*`` does not).
        """
        if not candidates:
            return self.subject_matches(""), "no string argument to check"
        if self.rule.action is not Action.ALLOW:
            for candidate in candidates:
                if self.subject_matches(candidate.text):
                    return True, f"argument {candidate.where()}"
            return False, ""
        if all(self.subject_matches(candidate.text) for candidate in candidates):
            return True, f"every argument checked: {_listed(candidates)}"
        return False, ""


def _listed(candidates: Sequence[Candidate], most: int = 3) -> str:
    places = list(dict.fromkeys(candidate.where() for candidate in candidates))
    more = f" and {len(places) - most} more" if len(places) > most else ""
    return ", ".join(places[:most]) + more


_ACTIONS = {action.value: action for action in Action}


class _RuleFields(Protocol):
    @property
    def permission(self) -> str: ...
    @property
    def pattern(self) -> str: ...
    @property
    def action(self) -> str: ...


RuleLike: TypeAlias = tuple[str, str, str] | Mapping[str, Any] | _RuleFields


def _compile_glob(glob: str, index: int, field: str) -> re.Pattern[str]:
    if not isinstance(glob, str):
        raise ValueError(f"trust rule {index}: {field} must be a string glob, got {glob!r}")
    # fnmatch.translate is exactly what fnmatchcase compiles (it always yields a valid
    # regex, even for "[z-a]" or a lone "["), minus fnmatchcase's per-call cache lookup.
    return re.compile(fnmatch.translate(glob))


def _fields(item: object, index: int) -> tuple[object, object, object]:
    if isinstance(item, tuple):
        if len(item) != 3:
            raise ValueError(f"trust rule {index}: expected (permission, pattern, action), got {item!r}")
        return item[0], item[1], item[2]
    if isinstance(item, Mapping):
        if "permission" not in item or "action" not in item:
            raise ValueError(f"trust rule {index}: needs 'permission' and 'action', got {dict(item)!r}")
        return item["permission"], item.get("pattern", "*"), item["action"]
    try:
        return item.permission, item.pattern, item.action  # type: ignore[attr-defined]
    except AttributeError:
        raise ValueError(f"trust rule {index}: not a rule: {item!r}") from None


def compile_rules(rules: Iterable[RuleLike]) -> tuple[CompiledRule, ...]:
    """Validate and precompile rules (tuples, mappings or objects with the three fields).

    Done once per config so a call costs two regex matches per rule, never a compile.
    Raises ValueError naming the rule's index for an unknown action or a non-string glob.
    """
    compiled: list[CompiledRule] = []
    for index, item in enumerate(rules):
        permission, pattern, action = _fields(item, index)
        act = _ACTIONS.get(action) if isinstance(action, str) else None
        if act is None:
            raise ValueError(
                f"trust rule {index}: unknown action {action!r} (expected 'allow', 'ask' or 'deny')"
            )
        permission_re = _compile_glob(permission, index, "permission")  # type: ignore[arg-type]
        pattern_re = _compile_glob(pattern, index, "pattern")  # type: ignore[arg-type]
        rule = Rule(str(permission), str(pattern), act)
        compiled.append(CompiledRule(index, rule, permission_re, pattern_re))
    return tuple(compiled)


def permission_of(server: str, tool: str) -> str:
    """The string ``permission`` globs are matched against (original names, not ids)."""
    return f"mcp:{server}:{tool}"


# --- the default ---------------------------------------------------------------------


def default_action(trusted: bool, risk: Risk) -> Action:
    """Trusted → allow; untrusted → ask if the tool may write, reach out or run things."""
    if trusted or not risk.risky:
        return Action.ALLOW
    return Action.ASK


# --- decisions ------------------------------------------------------------------------


@attrs.frozen(slots=True)
class Decision:
    """The answer for one call; ``rule`` is the deciding rule's index, None for the default."""

    action: Action
    reason: str
    rule: int | None = None


def _default_reason(trusted: bool, risk: Risk) -> str:
    if trusted:
        return "default for a trusted server: allow"
    if not risk.risky:
        return "default for an untrusted server: allow (no write, network or shell risk found)"
    flags = ((risk.writes, "write"), (risk.network, "reach the network"), (risk.shell, "run commands"))
    what = [text for flag, text in flags if flag]
    return f"default for an untrusted server: ask (tool may {', '.join(what)}: {'; '.join(risk.reasons)})"


def decide(
    server: str,
    tool: str,
    arguments: Mapping[str, Any],
    *,
    trusted: bool,
    risk: Risk,
    rules: Sequence[CompiledRule],
    subject_arguments: bool = False,
) -> Decision:
    """The default for (trust, risk), overridden by the last rule that applies.

    ``subject_arguments``: the tool's schema declares a path/URL-like argument
    (``subjects.declares_subject_arguments``), so its patterns see only those; the
    default, every string, is the stricter reading for an allow.
    """
    permission = permission_of(server, tool)
    candidates: tuple[Candidate, ...] | None = None  # computed on the first rule that needs them
    for compiled in reversed(rules):
        if not compiled.permission_matches(permission):
            continue
        rule = compiled.rule
        if rule.pattern == "*":  # matches every string and "": applies whatever the arguments
            how = ""
        else:
            if candidates is None:
                candidates = candidates_of(arguments, subject_arguments=subject_arguments)
            applies, how = compiled.applies(candidates)
            if not applies:
                continue
        return Decision(
            rule.action,
            f"trust rule [{compiled.index}] permission={rule.permission!r} "
            f"pattern={rule.pattern!r} matched {permission!r}{f' ({how})' if how else ''}: {rule.action}",
            compiled.index,
        )
    return Decision(default_action(trusted, risk), _default_reason(trusted, risk), None)


def denied_outright(permission: str, rules: Sequence[CompiledRule]) -> bool:
    """Whether ``decide`` denies every call of ``permission``, whatever its arguments:
    the last rule for it with pattern ``*`` denies, and no later rule for it could allow
    or ask about some call (a later deny with another pattern changes nothing)."""
    for compiled in reversed(rules):
        if not compiled.permission_matches(permission):
            continue
        if compiled.rule.pattern == "*":
            return compiled.rule.action is Action.DENY
        if compiled.rule.action is not Action.DENY:
            return False
    return False


def changed_reason(what: str) -> str:
    """Why a call of a tool whose definition moved since it was last allowed is asked
    about again: ``changed: <what>`` (``tool_definitions.changed_parts``)."""
    return f"changed: {what}"


def apply_pin(decision: Decision, current: str, pinned: str | None, what: str) -> Decision:
    """A tool whose fingerprint moved since it was last allowed (``what``: what moved,
    ``tool_definitions.changed_parts``): an allow drops to ask, and an ask says first
    that the tool changed (``changed: <what>; <why it asks>``); a deny stays.

    A server that changes a tool's description or schema after approval could be
    swapping in different behaviour under a trusted name; a human looks again, told why.
    """
    if pinned is None or pinned == current or decision.action is Action.DENY:
        return decision
    if decision.action is Action.ALLOW:
        return Decision(Action.ASK, changed_reason(what), None)
    return Decision(Action.ASK, f"{changed_reason(what)}; {decision.reason}", decision.rule)


def listing_description(description: str, *, trusted: bool, max_length: int = 200) -> str:
    """The description shown in a turn's tool list: untrusted ones cut to ``max_length``.

    Bounds what an unknown server can put in front of the model every turn; the full
    text stays searchable. The cut ends in "…" and never exceeds the bound.
    """
    if trusted or len(description) <= max_length:
        return description
    if max_length <= 0:
        return ""
    return description[: max_length - 1].rstrip() + "…"
