"""The ``exposure`` section and each server's ``expose``: what a tenant may see.

``"exposure": [{"tenant": "alice", "server": "github", "tools": {"allow": [...],
"deny": [...]}, "resources": {...}, "prompts": {...}}]``: ``tenant`` and ``server`` are
globs (default ``*``), each kind optional, each list of globs matched against the
server's own name of an item (``actors/router/exposure.py`` has the rule). A server's
``"expose": {"tools": {...}, ...}`` is the same as an entry for that server and every
tenant. A server named without a glob character must be configured: a typo would
otherwise hide nothing, silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from actors.router.exposure import KINDS, Lists, ServerRule
from actors.spec import ServerSpec

from .expansion import Expander
from .model import ExposureRule
from .values import Invalid, check_keys, child, expect_list, expect_object, show

__all__ = ["glob_of", "read_exposure", "server_glob"]

_ENTRY = '{"tenant": "alice", "server": "github", "tools": {"deny": ["delete_*"]}}'
_KIND = '{"allow": ["read_*"], "deny": ["*_admin"]}'
GLOB_CHARS = frozenset("*?[")


def read_exposure(
    value: object,
    path: str,
    servers: tuple[ServerSpec, ...],
    section: tuple[Mapping[str, Any], str] | None,
    exp: Expander,
) -> tuple[ExposureRule, ...]:
    """The ``exposure`` entries at ``path``, then each server's ``expose`` (``section``:
    the file's server map and its path)."""
    entries = expect_list(value, path, f"a list of entries like {_ENTRY}")
    names = [spec.name for spec in servers]
    rules = [_entry(raw, child(path, i), names, exp) for i, raw in enumerate(entries)]
    if section is not None:
        raw_servers, where = section
        for name, entry in raw_servers.items():
            if isinstance(entry, Mapping) and "expose" in entry:
                rule = _kinds(entry["expose"], child(child(where, name), "expose"), name, exp)
                rules.append(ExposureRule("*", rule))
    return tuple(rules)


def _entry(value: object, path: str, servers: Iterable[str], exp: Expander) -> ExposureRule:
    obj = expect_object(value, path, f"an entry like {_ENTRY}")
    check_keys(obj, path, ("tenant", "server", *KINDS))
    tenant = glob_of(obj.get("tenant", "*"), child(path, "tenant"), "a tenant name or glob", exp)
    server = server_glob(obj.get("server", "*"), child(path, "server"), servers, exp)
    return ExposureRule(tenant, _kinds({k: obj[k] for k in KINDS if k in obj}, path, server, exp))


def _kinds(value: object, path: str, server: str, exp: Expander) -> ServerRule:
    """The per-kind lists of an entry (or of a server's ``expose``)."""
    obj = expect_object(value, path, '{"tools": ..., "resources": ..., "prompts": ...}')
    check_keys(obj, path, KINDS)
    if not obj:
        raise Invalid(
            path,
            "names no tools, resources or prompts, so it hides nothing; give at least one, "
            f'e.g. "tools": {_KIND}',
        )
    lists = {kind: _lists(obj[kind], child(path, kind), exp) for kind in KINDS if kind in obj}
    return ServerRule(server, **lists)


def _lists(value: object, path: str, exp: Expander) -> Lists:
    obj = expect_object(value, path, _KIND)
    check_keys(obj, path, ("allow", "deny"))
    if not obj:
        raise Invalid(path, f"give allow or deny (or both), e.g. {_KIND}")
    allow = _globs(obj["allow"], child(path, "allow"), exp) if "allow" in obj else None
    return Lists(allow, _globs(obj.get("deny", []), child(path, "deny"), exp))


def _globs(value: object, path: str, exp: Expander) -> tuple[str, ...]:
    items = expect_list(value, path, 'a list of globs like ["read_*"]')
    return tuple(glob_of(raw, child(path, i), 'a glob such as "read_*"', exp) for i, raw in enumerate(items))


def glob_of(value: object, path: str, what: str, exp: Expander) -> str:
    """A non-empty string (``${…}`` expanded): a name, or a glob (``*``, ``?``, ``[…]``)."""
    if not isinstance(value, str) or not value:
        raise Invalid(path, f"expected {what} (a non-empty string), got {show(value)}")
    return exp.text(value, path)


def server_glob(value: object, path: str, servers: Iterable[str], exp: Expander) -> str:
    """A server glob; a plain name must be a configured server's."""
    glob = glob_of(value, path, 'a server name or glob such as "git*"', exp)
    known = list(servers)
    if GLOB_CHARS.isdisjoint(glob) and glob not in known:
        listed = ", ".join(known) or "none"
        raise Invalid(
            path,
            f"no server named {glob!r} in the config (configured: {listed}); name one of them, "
            'or write a glob such as "git*"',
        )
    return glob
