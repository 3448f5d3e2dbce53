"""Trust decisions for tool calls: pure functions, no Trio, no I/O.

The router asks one question per call — allow, ask or deny? — and this module answers
it from data alone, so every branch is a unit test:

1. ``risk.classify`` guesses a tool's risk (writes / network / shell) from its MCP
   annotations *and* the words in its name and description (see ``risk.py`` for how).
2. ``default_action``: trusted servers are allowed; an untrusted server's risky
   tool is asked about, its harmless tool is allowed.
3. ``decide``: the host's ordered rules override the default; the last rule whose
   ``permission`` glob matches ``mcp:<server>:<tool>`` (original, unsanitized names)
   and whose ``pattern`` glob matches the call's subject wins.
4. ``apply_pin``: an ``allow`` for a tool whose description or schema changed since
   it was last allowed drops to ``ask``.
"""

from __future__ import annotations

import enum
import fnmatch
import hashlib
import json
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeAlias

import attrs

from actors.router.risk import Risk

__all__ = [
    "MAX_SUBJECT_LENGTH", "PIN_CHANGED_REASON", "SUBJECT_KEYS", "Action", "CompiledRule", "Decision",
    "Rule", "RuleLike", "apply_pin", "compile_rules", "decide", "default_action", "fingerprint",
    "listing_description", "permission_of", "subject_of",
]  # fmt: skip


class Action(enum.StrEnum):
    """What happens to a call; the values are the config file's words."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


# --- rules -------------------------------------------------------------------------


@attrs.frozen(slots=True)
class Rule:
    """One host rule: ``permission`` globs ``mcp:<server>:<tool>``, ``pattern`` the subject."""

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


# --- subjects -------------------------------------------------------------------------

# Looked up in this order, keys compared lower-cased without "_" and "-" (filePath,
# file_path and file-path are one key). Two-path tools (move_file's source and
# destination) are deliberately absent: their subject is the whole JSON, so a one-path
# glob like "/tmp/*" can never vouch for both ends.
SUBJECT_KEYS: tuple[str, ...] = (
    "path", "filepath", "filename", "file", "directory", "url", "uri", "command", "cmd", "query", "name",
)  # fmt: skip
_PATH_KEYS = frozenset(("path", "filepath", "filename", "file", "directory"))
_COMMAND_KEYS = frozenset(("command", "cmd"))
_ARGV_KEYS = ("args", "argv", "arguments")
# Bounded so a rule match costs bounded time and reasons/audit rows stay small; long
# subjects keep head and tail so both anchors of a glob ("/tmp/*.txt") still see them.
MAX_SUBJECT_LENGTH = 4096


def _jsonable(value: Any) -> Any:
    """Frozen mappings (MappingProxyType and the like) as dicts; anything else by repr."""
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    return repr(value)


def _canonical_json(value: Any, *, ascii_only: bool = False) -> str:
    """Sorted-key compact JSON; never raises (server data can be anything)."""
    try:
        return json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=ascii_only, default=_jsonable
        )
    except (TypeError, ValueError, RecursionError):
        pass
    try:  # mixed key types that cannot be sorted
        return repr(value)
    except RecursionError:  # nested deeper than the interpreter will walk
        return "<arguments nested too deeply to encode>"


def _strings(value: Any) -> list[str] | None:
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _bounded(subject: str) -> str:
    if len(subject) <= MAX_SUBJECT_LENGTH:
        return subject
    head = (MAX_SUBJECT_LENGTH - 1) // 2
    tail = MAX_SUBJECT_LENGTH - 1 - head
    return f"{subject[:head]}…{subject[-tail:]}"


def _subject(arguments: Mapping[str, Any]) -> str | None:
    keys: dict[str, str] = {}
    for key in sorted(k for k in arguments if isinstance(k, str)):
        keys.setdefault(key.lower().replace("_", "").replace("-", ""), key)
    for wanted in SUBJECT_KEYS:
        if wanted not in keys:
            continue
        # The first well-known key present decides; a value of the wrong shape falls
        # back to the JSON rather than to a later, possibly harmless-looking key.
        value = arguments[keys[wanted]]
        if isinstance(value, str):
            if wanted in _PATH_KEYS and value:
                return posixpath.normpath(value)  # "/tmp/../etc/passwd" must not pass "/tmp/*"
            if wanted in _COMMAND_KEYS:
                extra: Any = next((arguments[k] for k in _ARGV_KEYS if k in arguments), [])
                argv = [extra] if isinstance(extra, str) else _strings(extra)
                return None if argv is None else " ".join([value, *argv])
            return value
        argv = _strings(value) if wanted in _COMMAND_KEYS else None
        return " ".join(argv) if argv is not None else None
    return None


def subject_of(arguments: Mapping[str, Any]) -> str:
    """What a rule's ``pattern`` is matched against (see SUBJECT_KEYS), else compact JSON.

    Paths are normalized lexically (symlinks cannot be seen from here). A command's
    subject is its text plus any ``args`` list; ``*`` crosses spaces and ``;``, so
    allow-patterns over commands vouch for everything after the prefix.
    """
    found = _subject(arguments) if isinstance(arguments, Mapping) else None
    return _bounded(found if found is not None else _canonical_json(arguments))


# --- decisions ------------------------------------------------------------------------

PIN_CHANGED_REASON = "tool definition changed since it was last allowed (description or schema)"


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
) -> Decision:
    """The default for (trust, risk), overridden by the last matching rule."""
    permission = permission_of(server, tool)
    subject: str | None = None  # computed on the first rule whose permission matches
    for compiled in reversed(rules):
        if not compiled.permission_matches(permission):
            continue
        if subject is None:
            subject = subject_of(arguments)
        if compiled.subject_matches(subject):
            rule = compiled.rule
            return Decision(
                rule.action,
                f"trust rule [{compiled.index}] permission={rule.permission!r} "
                f"pattern={rule.pattern!r} matched {permission!r}: {rule.action}",
                compiled.index,
            )
    return Decision(default_action(trusted, risk), _default_reason(trusted, risk), None)


def fingerprint(description: str, input_schema: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON ``{"description", "inputSchema"}``: the pin."""
    text = _canonical_json({"description": description, "inputSchema": input_schema}, ascii_only=True)
    return hashlib.sha256(text.encode("ascii", "backslashreplace")).hexdigest()


def apply_pin(decision: Decision, current: str, pinned: str | None) -> Decision:
    """Drop an allow to ask when the tool's fingerprint moved since it was last allowed.

    A server that changes a tool's description or schema after approval could be
    swapping in different behaviour under a trusted name; a human looks again.
    """
    if decision.action is Action.ALLOW and pinned is not None and pinned != current:
        return Decision(Action.ASK, PIN_CHANGED_REASON, None)
    return decision


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
