"""Reading the configuration file: which file, JSON, sections, and located errors.

``load_config`` is the one entry point (CLI, service, embedders). No file named at all
(no path, no ``$MCP_SUPERVISOR_CONFIG``) means no servers, so a fresh install starts; a
file that is named but does not exist is an error (a typo must not start a service with
no servers and say "ok"), and so is a malformed one: ``ConfigError``, whose text is
``config error: <file>: <json path>: <problem>`` and names the fix (the CLI exits with
status 2; the format is a contract that scripts and the README rely on).

Relative paths in the file (``cwd``, ``state_dir``, ``${file:…}``) are taken from the
config file's directory, so a config means the same whatever directory the service was
started from. Commands are left as written: the PATH lookup happens at spawn.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from actors.log_events import get_logger
from actors.spec import ServerSpec, redact
from supervisor.settings.net import parse_bind

from .bridge import read_bridge
from .cluster import read_cluster
from .console import read_console
from .dialects import find_server_section, read_servers
from .expansion import Expander
from .exposure import read_exposure
from .gateway import read_gateway
from .model import (
    DEFAULT_TENANT,
    AdminSettings,
    Config,
    ConfigWarning,
    Role,
    TokenGrant,
    ToolSearchSettings,
    TrustRule,
    TrustSettings,
)
from .rate_limits import read_limits
from .secrets_at_rest import read_secrets_at_rest
from .server_warnings import server_warnings
from .signin import read_signin
from .store_section import read_store
from .top_level import top_level_warnings
from .tracing import read_audit, read_tracing
from .values import (
    Invalid,
    check_keys,
    child,
    expect_choice,
    expect_int,
    expect_list,
    expect_number,
    expect_object,
    show,
    visible,
)

__all__ = ["CONFIG_ENV_VAR", "ConfigError", "describe_config", "load_config"]

CONFIG_ENV_VAR = "MCP_SUPERVISOR_CONFIG"

log = get_logger(__name__)

_TOKENS_PATH = "$.admin.tokens"
# A bearer token is sent as one header word: printable ASCII, no spaces. Sixteen
# characters is the least we accept; ``secrets.token_urlsafe(32)`` gives 43.
MIN_TOKEN_LENGTH = 16
_TOKEN_CHARS = re.compile(r"[\x21-\x7e]+\Z")
_MAKE_TOKEN = "make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
_SENSITIVE_QUERY = re.compile(r"auth|token|secret|key|passw|sig", re.IGNORECASE)


class ConfigError(Exception):
    """The config file cannot be used; ``str()`` is the one line to show the operator."""

    def __init__(self, file: str, json_path: str, problem: str) -> None:
        file, json_path, problem = visible(file), visible(json_path), visible(problem)
        super().__init__(f"config error: {file}: {json_path}: {problem}")
        self.file = file
        self.json_path = json_path
        self.problem = problem


def load_config(
    path: str | os.PathLike[str] | None = None, *, environ: Mapping[str, str] | None = None
) -> Config:
    """Load the config from ``path``, else ``$MCP_SUPERVISOR_CONFIG``, else none at all.

    ``environ`` (default ``os.environ``) serves both the variable above and
    ``${env:…}`` references. Raises ``ConfigError`` for anything malformed, and for a
    named file that does not exist.
    """
    env = os.environ if environ is None else environ
    missing = "the file does not exist; check the path, or name no config file to run with no servers"
    if path is None:
        path = env.get(CONFIG_ENV_VAR) or None
        if path is None:
            log.info("no config file given (--config or $%s): no servers", CONFIG_ENV_VAR)
            return Config()
        missing = (
            f"the file named by ${CONFIG_ENV_VAR} does not exist; fix the variable, "
            "or unset it to run with no servers"
        )
    file = os.fspath(path)
    full = os.path.abspath(os.path.expanduser(file))
    try:
        data = Path(full).read_bytes()
    except FileNotFoundError:
        raise ConfigError(file, "$", missing) from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(
            file, "$", f"cannot read the file ({reason}); check the path and its permissions"
        ) from None
    try:
        return _read(data, full, file, Expander(os.path.dirname(full), env))
    except Invalid as exc:
        raise ConfigError(file, exc.path, exc.problem) from None
    except RecursionError:
        raise ConfigError(file, "$", "the document is nested too deeply; flatten it") from None


def describe_config(config: Config) -> list[str]:
    """One line per server for ``mcp-supervisor check``; secret values are masked."""
    return [_describe(spec) for spec in config.servers]


class _Object(dict[str, Any]):
    """A JSON object that remembers repeated keys (a plain dict silently keeps the last)."""

    __slots__ = ("duplicates",)

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        self.duplicates = [key for key, count in _counts(pairs).items() if count > 1]


def _counts(pairs: list[tuple[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for key, _ in pairs:
        counts[key] = counts.get(key, 0) + 1
    return counts


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON; write a number or null")


def _decode(data: bytes) -> object:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Invalid("$", f"not UTF-8 text (bad byte at offset {exc.start}); save it as UTF-8") from None
    if not text.strip():
        raise Invalid("$", 'the file is empty; write {"servers": {}} for no servers')
    try:
        return json.loads(text, object_pairs_hook=_Object, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise Invalid(
            "$",
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}{_hint(exc)}",
        ) from None
    except ValueError as exc:  # NaN/Infinity, or an integer too long to convert
        raise Invalid("$", f"invalid JSON: {exc}") from None


def _hint(exc: json.JSONDecodeError) -> str:
    if exc.doc.startswith(("//", "/*"), exc.pos):
        return "; comments are not allowed in JSON, remove them"
    before = exc.doc[: exc.pos].rstrip()
    if before.endswith(",") and exc.doc[exc.pos : exc.pos + 1] in ("}", "]"):
        return "; remove the trailing comma"
    return "; fix the syntax there"


def _reject_duplicates(doc: object) -> None:
    """Walk the document in order and fail on the first repeated key."""
    stack: list[tuple[str, object]] = [("$", doc)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, _Object):
            if value.duplicates and path == _TOKENS_PATH:
                raise Invalid(path, "the same token is listed twice; keep one")
            if value.duplicates:
                raise Invalid(
                    path,
                    f"duplicate key {value.duplicates[0]!r}; JSON keeps only the last one, "
                    "so rename or merge them",
                )
            if path != _TOKENS_PATH:  # token keys are credentials: keep them out of paths
                stack.extend(reversed([(child(path, k), v) for k, v in value.items()]))
        elif isinstance(value, list):
            stack.extend(reversed([(child(path, i), v) for i, v in enumerate(value)]))


def _read(data: bytes, source: str, file: str, exp: Expander) -> Config:
    """The config in ``data``; ``file`` is the name messages use (as the user gave it)."""
    doc = _decode(data)
    _reject_duplicates(doc)
    root = expect_object(doc, "$", 'a JSON object at the top, like {"servers": {...}}')
    section = find_server_section(root, "$")
    ignored = top_level_warnings(root, section)  # other hosts' settings pass in silence
    servers = read_servers(root[section], child("$", section), exp) if section else ()
    warned = (*ignored, *server_warnings(servers, child("$", section or "servers")))
    return Config(
        source=source,
        servers=servers,
        warnings=tuple(
            ConfigWarning(visible(file), visible(where), visible(problem)) for where, problem in warned
        ),
        tool_search=_tool_search(root.get("tool_search", {}), "$.tool_search", exp),
        trust=_trust(root.get("trust", {}), "$.trust", exp),
        admin=_admin(root.get("admin", {}), "$.admin", exp),
        gateway=read_gateway(root.get("gateway", {}), "$.gateway", servers),
        bridge=read_bridge(root.get("bridge", {}), "$.bridge", servers, child("$", section or "servers")),
        tracing=read_tracing(root.get("tracing", {}), "$.tracing"),
        audit=read_audit(root.get("audit", {}), "$.audit"),
        exposure=read_exposure(root.get("exposure", []), "$.exposure", servers, _section(root, section), exp),
        limits=read_limits(root.get("limits", []), "$.limits", servers, exp),
        state_dir=_state_dir(root.get("state_dir"), "$.state_dir", exp),
        secrets_at_rest=read_secrets_at_rest(root.get("secrets_at_rest", {}), "$.secrets_at_rest", exp),
        store=(store := read_store(root.get("store", {}), "$.store", exp)),
        signin=read_signin(root.get("signin"), "$.signin", exp),
        cluster=read_cluster(root.get("cluster"), "$.cluster", exp, store),
        console=read_console(root.get("console", {}), "$.console", exp),
    )


def _section(root: Mapping[str, Any], section: str | None) -> tuple[Mapping[str, Any], str] | None:
    return None if section is None else (root[section], child("$", section))


def _tool_search(value: object, path: str, exp: Expander) -> ToolSearchSettings:
    obj = expect_object(value, path)
    check_keys(obj, path, ("enabled", "threshold", "max_matches"))
    defaults = ToolSearchSettings()
    enabled: Literal["auto"] | bool = defaults.enabled
    if "enabled" in obj:
        raw = obj["enabled"]
        where = child(path, "enabled")
        if isinstance(raw, bool):
            enabled = raw
        elif not (isinstance(raw, str) and exp.expand(raw, where) == "auto"):
            raise Invalid(where, f'expected "auto", true or false, got {show(raw)}')
    return ToolSearchSettings(
        enabled=enabled,
        threshold=expect_int(obj.get("threshold", defaults.threshold), child(path, "threshold"), minimum=0),
        max_matches=expect_int(
            obj.get("max_matches", defaults.max_matches), child(path, "max_matches"), minimum=1
        ),
    )


def _trust(value: object, path: str, exp: Expander) -> TrustSettings:
    obj = expect_object(value, path)
    allowed = ("rules", "max_description_length", "approval_timeout_s", "approval_timeout_ms")
    check_keys(obj, path, (*allowed, "operator_only"))
    defaults = TrustSettings()
    rules_path = child(path, "rules")
    rules = expect_list(obj.get("rules", []), rules_path, "a list of rules")
    timeout_s = defaults.approval_timeout_s
    if "approval_timeout_s" in obj and "approval_timeout_ms" in obj:
        raise Invalid(path, "give 'approval_timeout_s' or 'approval_timeout_ms', not both")
    if "approval_timeout_s" in obj:
        where = child(path, "approval_timeout_s")
        timeout_s = expect_number(obj["approval_timeout_s"], where, positive=True)
    if "approval_timeout_ms" in obj:
        where = child(path, "approval_timeout_ms")
        timeout_s = expect_number(obj["approval_timeout_ms"], where, positive=True) / 1000
    return TrustSettings(
        rules=tuple(_rule(rule, child(rules_path, i), exp) for i, rule in enumerate(rules)),
        max_description_length=expect_int(
            obj.get("max_description_length", defaults.max_description_length),
            child(path, "max_description_length"),
            minimum=1,
        ),
        approval_timeout_s=timeout_s,
        operator_only=_operator_only(obj.get("operator_only", []), child(path, "operator_only"), exp),
    )


def _operator_only(value: object, path: str, exp: Expander) -> tuple[str, ...]:
    globs = expect_list(value, path, 'a list of permission globs like ["mcp:payments:*"]')
    return tuple(_permission(raw, child(path, i), exp) for i, raw in enumerate(globs))


def _permission(raw: object, where: str, exp: Expander) -> str:
    permission = exp.text(raw, where)
    if permission != "*" and not permission.startswith("mcp:"):
        raise Invalid(where, f'expected "mcp:<server>:<tool>" (globs allowed), got {show(raw)}')
    return permission


_ACTIONS: dict[str, Literal["allow", "ask", "deny"]] = {
    "allow": "allow",
    "ask": "ask",
    "deny": "deny",
}


def _rule(value: object, path: str, exp: Expander) -> TrustRule:
    obj = expect_object(value, path, 'a rule like {"permission": "mcp:github:*", ...}')
    check_keys(obj, path, ("permission", "pattern", "action"))
    for key in ("permission", "action"):
        if key not in obj:
            raise Invalid(path, f"the rule has no {key!r}; every rule needs permission and action")
    permission = _permission(obj["permission"], child(path, "permission"), exp)
    where = child(path, "action")
    action = expect_choice(exp.text(obj["action"], where), obj["action"], where, _ACTIONS)
    pattern = exp.text(obj.get("pattern", "*"), child(path, "pattern"))
    return TrustRule(permission=permission, pattern=pattern, action=_ACTIONS[action])


def _admin(value: object, path: str, exp: Expander) -> AdminSettings:
    obj = expect_object(value, path)
    check_keys(obj, path, ("bind", "tokens"))
    bind = AdminSettings().bind
    if "bind" in obj:
        where = child(path, "bind")
        bind = exp.text(obj["bind"], where)
        if parse_bind(bind) is None:
            raise Invalid(
                where,
                f"expected HOST:PORT like 127.0.0.1:8765 ([::1]:8765 for IPv6), got {show(obj['bind'])}",
            )
    return AdminSettings(bind=bind, tokens=_tokens(obj.get("tokens", {}), exp))


_GRANT_SHAPE = (
    'expected a tenant name (a non-empty string such as "default") or '
    '{"tenant": "<name>", "role": "operator" | "tenant" | "peer"}'
)


def _tokens(value: object, exp: Expander) -> Mapping[str, TokenGrant]:
    """token -> grant; errors number the entries instead of quoting the token."""
    obj = expect_object(value, _TOKENS_PATH, "an object mapping tokens to tenant names")
    tokens: dict[str, TokenGrant] = {}
    for number, (raw_token, raw_grant) in enumerate(obj.items(), start=1):
        token = exp.expand(raw_token, _TOKENS_PATH)
        if not token.strip():
            raise Invalid(_TOKENS_PATH, f"token #{number} is empty; set it or remove the entry")
        if token in tokens:
            raise Invalid(_TOKENS_PATH, f"token #{number} repeats an earlier token; keep one")
        grant = _grant(raw_grant, f"token #{number}", exp)
        _check_token(token, f"token #{number} (tenant {show(grant.tenant)})")
        tokens[token] = grant
    return MappingProxyType(tokens)


def _grant(value: object, name: str, exp: Expander) -> TokenGrant:
    """``"alice"`` (the tenant role) or ``{"tenant": "ops", "role": "operator"}``."""
    if isinstance(value, str):
        tenant = exp.expand(value, _TOKENS_PATH) if value.strip() else ""
        if not tenant.strip():
            raise Invalid(_TOKENS_PATH, f"{name} maps to {show(value)}; {_GRANT_SHAPE}")
        return TokenGrant(tenant)
    if not isinstance(value, Mapping):
        raise Invalid(_TOKENS_PATH, f"{name} maps to {show(value)}; {_GRANT_SHAPE}")
    unknown = sorted(set(value) - {"tenant", "role"})
    if unknown:
        problem = f"{name} has an unknown key {unknown[0]!r}; allowed keys are role, tenant"
        raise Invalid(_TOKENS_PATH, problem)
    raw_tenant = value.get("tenant", DEFAULT_TENANT)
    tenant = exp.expand(raw_tenant, _TOKENS_PATH) if isinstance(raw_tenant, str) else ""
    if not tenant.strip():
        raise Invalid(_TOKENS_PATH, f'{name} has "tenant": {show(raw_tenant)}; expected a non-empty string')
    raw_role = value.get("role", Role.TENANT.value)
    role = exp.expand(raw_role, _TOKENS_PATH) if isinstance(raw_role, str) else None
    if role not in tuple(Role):
        choices = ", ".join(repr(r.value) for r in Role)
        raise Invalid(
            _TOKENS_PATH, f'{name} (tenant {show(tenant)}) has "role": {show(raw_role)}; expected {choices}'
        )
    return TokenGrant(tenant, Role(role))


def _check_token(token: str, name: str) -> None:
    """A token a client can present and an attacker cannot guess; ``name`` says which
    entry it is (never the token: the error goes to terminals and logs)."""
    if not _TOKEN_CHARS.match(token):
        raise Invalid(
            _TOKENS_PATH,
            f"{name} has a character a bearer token cannot carry (a space, a control character "
            f"or non-ASCII); use printable ASCII, or {_MAKE_TOKEN}",
        )
    if len(token) < MIN_TOKEN_LENGTH:
        raise Invalid(
            _TOKENS_PATH,
            f"{name} is too short ({len(token)} of at least {MIN_TOKEN_LENGTH} characters): {_MAKE_TOKEN}",
        )


def _state_dir(value: object, path: str, exp: Expander) -> str | None:
    if value is None:
        return None
    text = exp.os_text(value, path, "a directory path or null")
    if not text:
        raise Invalid(path, "the directory is empty; name one or remove 'state_dir'")
    return os.path.normpath(os.path.join(exp.base_dir, os.path.expanduser(text)))


def _describe(spec: ServerSpec) -> str:
    if spec.type == "local":
        target = shlex.join(spec.command)
    else:
        target = _mask_url(spec.url or "")
        if spec.server_name is not None:
            target += f" -> {spec.server_name}"
    flags = [
        "enabled" if spec.enabled else "disabled",
        spec.start.value,
        spec.scope.value,
        "trusted" if spec.trusted else "untrusted",
    ]
    if spec.headers:
        flags.append("headers: " + ", ".join(sorted(spec.headers)))
    extras = ("oauth" if spec.oauth is not None else "", spec.tls.summary if spec.tls is not None else "")
    flags.extend(extra for extra in extras if extra)
    return visible(redact(f"{spec.name} [{spec.type}] {target} ({', '.join(flags)})", spec.secrets))


def _mask_url(url: str) -> str:
    """A URL with its password and credential-like query values masked."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            netloc = f"{parts.username or ''}:***@{netloc.rpartition('@')[2]}"
        query = urlencode(
            [
                (key, "***" if _SENSITIVE_QUERY.search(key) else item)
                for key, item in parse_qsl(parts.query, keep_blank_values=True)
            ],
            safe="*",
        )
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return "<unparsable URL>"
