"""Server lists in the three shapes users already have, read into ``ServerSpec``.

- ``{"servers": {...}}``: host runtimes; ``command`` a string plus ``args`` (or a list).
- ``{"mcpServers": {...}}``: desktop/IDE clients; an entry with ``url`` is remote, and
  ``"transport": "websocket"`` with ``serverName`` uses a remote bridge.
- ``{"mcp": {...}}``: connectors; ``type: local|remote`` and ``command`` as a list.

One entry reader serves all three: the dialects differ in where the map sits and in
spellings (``serverName``, ``disabled``, ``transport``, ``timeout_ms``), never in
meaning, so every spelling is accepted everywhere. Unknown keys are errors.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from actors.connection.server_log import SERVER_LOG_LEVELS
from actors.protocol.era import SETTING_VALUES
from actors.spec import (
    DEFAULT_INIT_TIMEOUT_S,
    DEFAULT_MAX_OUTPUT_BYTES,
    Scope,
    ServerSpec,
    Start,
)

from .credentials import read_credentials
from .expansion import Expander
from .limits import INIT_TIMEOUT_LIMIT, call_timeouts, check_server_name, millis
from .oauth import read_oauth
from .reconnect import read_jitter, read_schedule
from .tls import read_tls
from .values import (
    SENSITIVE_NAME,
    Invalid,
    check_keys,
    check_os_string,
    child,
    expect_bool,
    expect_choice,
    expect_int,
    expect_list,
    expect_object,
    show,
)
from .warm import read_warm

SERVER_SECTIONS = ("servers", "mcpServers", "mcp")

_KEYS = frozenset(
    {
        "type", "transport", "command", "args", "env", "cwd", "url", "headers", "oauth",
        "token", "server_name", "serverName", "enabled", "disabled", "trusted", "scope",
        "start", "init_timeout_ms", "call_timeout_ms", "timeout_ms", "max_call_ms",
        "max_output_bytes", "reconnect_schedule_s", "reconnect_jitter", "protocol", "log_level",
        "concurrency", "bridge", "warm", "tls", "expose", "credentials",
    }
)  # fmt: skip

# Spellings of `type` / `transport` seen in the wild, mapped onto our three types.
_TYPE_NAMES = {
    "local": "local",
    "stdio": "local",
    "remote": "remote",
    "http": "remote",
    "streamable-http": "remote",
    "streamable_http": "remote",
    "streamableHttp": "remote",
    "sse": "remote",
    "websocket": "websocket",
    "ws": "websocket",
}

# How a remote server is reached (``ServerSpec.transport``), by the spelling used in
# `type` or `transport`. The generic spellings ("remote", "http") leave it to "auto":
# Streamable HTTP, falling back to legacy HTTP+SSE for servers that answer the old way.
_REMOTE_TRANSPORTS = {
    "streamable-http": "streamable-http",
    "streamable_http": "streamable-http",
    "streamableHttp": "streamable-http",
    "sse": "sse",
}
# `"transport": "auto"` (the default) is a remote server's transport, not a type.
_TRANSPORT_ONLY = {"auto": "remote"}

# Keys that only make sense for some types; anything else applies to all.
_ONLY_FOR = {
    "command": ("local",),
    "args": ("local",),
    "env": ("local",),
    "cwd": ("local",),
    "url": ("remote", "websocket"),
    "headers": ("remote", "websocket"),
    "token": ("remote", "websocket"),
    "oauth": ("remote",),
    "tls": ("remote",),
    "server_name": ("websocket",),
    "serverName": ("websocket",),
    "warm": ("local",),
}

_URL_SCHEMES = {"remote": ("http", "https"), "websocket": ("ws", "wss")}
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")


def find_server_section(doc: Mapping[str, Any], path: str) -> str | None:
    """Which dialect's server map the document uses (None: no servers at all)."""
    present = [key for key in SERVER_SECTIONS if key in doc]
    if len(present) > 1:
        raise Invalid(path, f"found both {present[0]!r} and {present[1]!r}; keep one map of servers")
    return present[0] if present else None


def read_servers(value: object, path: str, expander: Expander) -> tuple[ServerSpec, ...]:
    """Every server in a dialect's map, in file order."""
    servers = expect_object(value, path, "an object mapping server names to their settings")
    return tuple(
        read_server(name, entry, child(path, name), expander.fresh()) for name, entry in servers.items()
    )


def read_server(name: str, value: object, path: str, exp: Expander) -> ServerSpec:
    """One server entry; ``exp`` must be fresh, its secrets become the spec's."""
    check_server_name(name, path)
    entry = expect_object(value, path, "an object with the server's settings")
    check_keys(entry, path, _KEYS)
    url = exp.text(entry["url"], child(path, "url")) if "url" in entry else None
    kind, transport = _server_type(entry, url, path, exp)
    for key in entry:
        types = _ONLY_FOR.get(key)
        if types is not None and kind not in types:
            raise Invalid(
                child(path, key),
                f"{key!r} does not apply to a {kind} server (only {' or '.join(types)}); "
                'remove it or change "type"',
            )
    headers = _string_map(entry, "headers", path, exp)
    if kind == "local":
        command = _command(entry, path, exp)
    else:
        command = ()
        _check_url(url, entry.get("url"), kind, path)
        _add_token(headers, entry, path, exp)
    env = _string_map(entry, "env", path, exp)
    init_s = millis(entry, "init_timeout_ms", path, INIT_TIMEOUT_LIMIT)
    call_s, max_call_s = call_timeouts(entry, path)
    scope = _choice(entry, "scope", [s.value for s in Scope], path, exp)
    start = _choice(entry, "start", [s.value for s in Start], path, exp)
    protocol = _choice(entry, "protocol", list(SETTING_VALUES), path, exp)
    log_level = _choice(entry, "log_level", list(SERVER_LOG_LEVELS), path, exp)
    cwd = _cwd(entry, path, exp)
    enabled = _enabled(entry, path)
    trusted = expect_bool(entry.get("trusted", False), child(path, "trusted"))
    max_output_bytes = expect_int(
        entry.get("max_output_bytes", DEFAULT_MAX_OUTPUT_BYTES),
        child(path, "max_output_bytes"),
        minimum=1,
    )
    concurrency = (
        expect_int(entry["concurrency"], child(path, "concurrency"), minimum=1)
        if "concurrency" in entry
        else None
    )
    schedule = read_schedule(entry, path)
    server_name = _server_name(name, entry, kind, path, exp)
    oauth = read_oauth(entry, path, exp)
    tls = read_tls(entry, url, path, exp)
    bridge = expect_bool(entry.get("bridge", False), child(path, "bridge"))
    warm = read_warm(entry, scope == Scope.SESSION.value or bridge, path)
    credentials = read_credentials(entry, oauth is not None, scope == Scope.SESSION.value, path, exp)
    # Last: every reader above may have expanded (and so recorded) a secret.
    secrets = [*exp.secrets, *_literal_secrets(headers, env), *_url_secrets(url)]
    return ServerSpec(
        name=name,
        type=kind,
        command=command,
        env=MappingProxyType(env),
        cwd=cwd,
        url=url,
        transport=transport,
        protocol=protocol if protocol is not None else "auto",
        headers=MappingProxyType(headers),
        enabled=enabled,
        trusted=trusted,
        scope=Scope(scope) if scope is not None else Scope.SHARED,
        credentials=credentials,
        start=Start(start) if start is not None else Start.LAZY,
        init_timeout_s=init_s if init_s is not None else DEFAULT_INIT_TIMEOUT_S,
        call_timeout_s=call_s,
        max_call_s=max_call_s,
        max_output_bytes=max_output_bytes,
        reconnect_schedule_s=schedule,
        reconnect_jitter=read_jitter(entry, path),
        secrets=tuple(dict.fromkeys(secret for secret in secrets if secret)),
        server_name=server_name,
        oauth=oauth,
        tls=tls,
        log_level=log_level if log_level is not None else "warning",
        concurrency=concurrency,
        bridge=bridge,
        warm=warm,
    )


def _server_type(entry: Mapping[str, Any], url: str | None, path: str, exp: Expander) -> tuple[str, str]:
    """The server's type, and for a remote one its transport (default "auto")."""
    declared: dict[str, str] = {}
    transports: dict[str, str] = {}
    for key in ("type", "transport"):
        if key in entry:
            where = child(path, key)
            value = exp.text(entry[key], where)
            names = {**_TYPE_NAMES, **_TRANSPORT_ONLY} if key == "transport" else _TYPE_NAMES
            if value not in names:
                also = "auto, " if key == "transport" else ""
                raise Invalid(
                    where,
                    f"expected 'local', 'remote' or 'websocket' (also accepted: {also}stdio, http, "
                    f"streamable-http, sse, ws), got {show(entry[key])}",
                )
            declared[key] = names[value]
            if value in _REMOTE_TRANSPORTS:
                transports[key] = _REMOTE_TRANSPORTS[value]
    if len(set(declared.values())) > 1:
        raise Invalid(
            child(path, "transport"),
            f"'transport' says {declared['transport']} but 'type' says {declared['type']}; keep one of them",
        )
    if len(set(transports.values())) > 1:
        raise Invalid(
            child(path, "transport"),
            f"'transport' says {transports['transport']} but 'type' says {transports['type']}; "
            "keep one of them",
        )
    transport = next(iter(transports.values()), "auto")
    if declared:
        return next(iter(declared.values())), transport
    if url is None:
        return "local", transport
    return ("websocket" if url.lower().startswith(("ws://", "wss://")) else "remote"), transport


def _command(entry: Mapping[str, Any], path: str, exp: Expander) -> tuple[str, ...]:
    where = child(path, "command")
    if "command" not in entry:
        raise Invalid(
            path,
            'a local server needs \'command\' (a list like ["python", "-m", "server"] '
            "or a string plus 'args'), or a 'url' for a remote server",
        )
    raw = entry["command"]
    if isinstance(raw, str):
        argv = [exp.os_text(raw, where)]
    elif isinstance(raw, list) and raw:
        argv = [exp.os_text(item, child(where, i)) for i, item in enumerate(raw)]
    else:
        raise Invalid(where, f"expected a list of strings or a string, got {show(raw)}")
    if not argv[0].strip():
        raise Invalid(where, "the program name is empty; name the executable to run")
    if "args" in entry:
        args_path = child(path, "args")
        items = expect_list(entry["args"], args_path, "a list of strings")
        argv += [exp.os_text(item, child(args_path, i)) for i, item in enumerate(items)]
    # Left as written: the PATH lookup happens at spawn, in the supervisor's environment.
    return tuple(argv)


def _string_map(entry: Mapping[str, Any], key: str, path: str, exp: Expander) -> dict[str, str]:
    """``env`` / ``headers``: names to string values, values expanded."""
    if key not in entry:
        return {}
    where = child(path, key)
    result: dict[str, str] = {}
    for name, raw in expect_object(entry[key], where).items():
        item = child(where, name)
        if key == "headers" and not _HEADER_NAME.match(name):
            raise Invalid(item, f"{name!r} is not a valid HTTP header name")
        if key == "env" and (not name or "=" in name or "\0" in name):
            raise Invalid(item, f"{name!r} is not a valid environment variable name")
        if key == "env" and "${" in name:
            raise Invalid(
                item,
                f"{name!r}: references are expanded in values, not in environment variable "
                "names; write the name itself",
            )
        if key == "env":
            check_os_string(name, item)
        if isinstance(raw, bool | int | float):
            raise Invalid(item, f'expected a string, got {show(raw)} (quote it: "{show(raw)}")')
        value = exp.os_text(raw, item) if key == "env" else exp.text(raw, item)
        if key == "headers" and ("\r" in value or "\n" in value):
            raise Invalid(item, "header values must not contain line breaks")
        if key == "headers" and "\0" in value:
            raise Invalid(item, "header values must not contain a NUL character")
        result[name] = value
    return result


def _literal_secrets(headers: Mapping[str, str], env: Mapping[str, str]) -> list[str]:
    """Credentials written literally (``Authorization: Bearer abc``) are secrets too."""
    found: list[str] = []
    for name, value in [*headers.items(), *env.items()]:
        if SENSITIVE_NAME.search(name):
            found.append(value)
            scheme, _, credential = value.partition(" ")
            if credential and scheme.isalpha():
                found.append(credential.strip())
    return found


def _url_secrets(url: str | None) -> list[str]:
    """A password or a credential-like query value written into the URL itself."""
    if url is None:
        return []
    try:
        parts = urlsplit(url)
        found = [parts.password or ""]
    except ValueError:
        return []
    found += [value for key, value in parse_qsl(parts.query) if SENSITIVE_NAME.search(key)]
    return found


def _check_url(url: str | None, raw: object, kind: str, path: str) -> None:
    schemes = _URL_SCHEMES[kind]
    article = "an" if kind == "remote" else "a"
    wanted = f"{article} {schemes[0]}:// or {schemes[1]}:// URL"
    if url is None:
        if kind == "websocket":
            where_hint = "the remote bridge, e.g. ws://host:8765/v1/bridge"
        else:
            where_hint = "the server's MCP endpoint, e.g. https://host/mcp"
        raise Invalid(path, f"a {kind} server needs 'url' ({wanted} of {where_hint})")
    where = child(path, "url")
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError on a malformed port
    except ValueError as exc:
        raise Invalid(where, f"not a valid URL ({exc}): {show(raw)}") from None
    if parts.scheme.lower() not in schemes or not parts.hostname:
        hint = ""
        if kind == "remote" and parts.scheme.lower() in _URL_SCHEMES["websocket"]:
            hint = '; for a WebSocket bridge set "type": "websocket"'
        elif kind == "websocket" and parts.scheme.lower() in _URL_SCHEMES["remote"]:
            hint = '; for an MCP HTTP endpoint set "type": "remote"'
        raise Invalid(where, f"a {kind} server needs {wanted}, got {show(raw)}{hint}")


def _add_token(headers: dict[str, str], entry: Mapping[str, Any], path: str, exp: Expander) -> None:
    if "token" not in entry:
        return
    where = child(path, "token")
    token = exp.text(entry["token"], where)
    if not token:
        raise Invalid(where, "the token is empty; set it or remove 'token'")
    if any(name.lower() == "authorization" for name in headers):
        raise Invalid(where, "give either 'token' or an Authorization header, not both")
    headers["Authorization"] = f"Bearer {token}"


def _choice(entry: Mapping[str, Any], key: str, choices: list[str], path: str, exp: Expander) -> str | None:
    if key not in entry:
        return None
    where = child(path, key)
    return expect_choice(exp.text(entry[key], where), entry[key], where, choices)


def _enabled(entry: Mapping[str, Any], path: str) -> bool:
    enabled = expect_bool(entry.get("enabled", True), child(path, "enabled"))
    if "disabled" in entry:
        disabled = expect_bool(entry["disabled"], child(path, "disabled"))
        if "enabled" in entry and disabled == enabled:
            raise Invalid(child(path, "disabled"), "'disabled' contradicts 'enabled'; keep one")
        enabled = not disabled
    return enabled


def _cwd(entry: Mapping[str, Any], path: str, exp: Expander) -> str | None:
    """Relative working directories are taken from the config file's directory."""
    if "cwd" not in entry:
        return None
    cwd = exp.os_text(entry["cwd"], child(path, "cwd"))
    if not cwd:
        raise Invalid(child(path, "cwd"), "the directory is empty; name one or remove 'cwd'")
    return os.path.normpath(os.path.join(exp.base_dir, os.path.expanduser(cwd)))


def _server_name(name: str, entry: Mapping[str, Any], kind: str, path: str, exp: Expander) -> str | None:
    """The bridge-side name; defaults to the entry's own name, as desktop clients do."""
    if kind != "websocket":
        return None
    if "server_name" in entry and "serverName" in entry:
        raise Invalid(child(path, "serverName"), "give 'server_name' or 'serverName', not both")
    key = "server_name" if "server_name" in entry else "serverName"
    if key not in entry:
        return name
    value = exp.text(entry[key], child(path, key))
    if not value.strip():
        raise Invalid(child(path, key), "the bridge server name is empty")
    return value
