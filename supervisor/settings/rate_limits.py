"""The ``limits`` section: token buckets on calls, by tenant, server and tool.

``"limits": [{"tenant": "*", "per_s": 50, "burst": 20}]``: the fields an entry names
(``tenant``, ``server``, ``tool``: globs, any of them or none) say which calls it covers
and what its buckets are keyed by (``supervisor/calls/rate_limits.py``); ``per_s`` is the
average rate a bucket allows, ``burst`` how many calls it lets through at once. Two
entries that name the same fields with the same globs would share their buckets, so
that is refused.
"""

from __future__ import annotations

from collections.abc import Iterable

from actors.spec import ServerSpec

from .expansion import Expander
from .exposure import glob_of, server_glob
from .model import RateLimit
from .values import Invalid, check_keys, child, expect_int, expect_list, expect_number, expect_object

__all__ = ["read_limits"]

_EXAMPLE = '{"tenant": "*", "per_s": 50, "burst": 20}'
MAX_BURST = 1_000_000


def read_limits(
    value: object, path: str, servers: tuple[ServerSpec, ...], exp: Expander
) -> tuple[RateLimit, ...]:
    """The entries of ``limits`` at ``path``."""
    entries = expect_list(value, path, f"a list of limits like {_EXAMPLE}")
    names = [spec.name for spec in servers]
    limits: list[RateLimit] = []
    for i, raw in enumerate(entries):
        limit = _limit(raw, child(path, i), names, exp)
        earlier = next((n for n, seen in enumerate(limits) if seen.selector == limit.selector), None)
        if earlier is not None:
            raise Invalid(
                child(path, i),
                f"covers the same calls as {child(path, earlier)} (the same tenant, server and tool), "
                "so the two would share their buckets; keep one",
            )
        limits.append(limit)
    return tuple(limits)


def _limit(value: object, path: str, servers: Iterable[str], exp: Expander) -> RateLimit:
    obj = expect_object(value, path, f"a limit like {_EXAMPLE}")
    check_keys(obj, path, ("tenant", "server", "tool", "per_s", "burst"))
    for key in ("per_s", "burst"):
        if key not in obj:
            raise Invalid(
                path,
                f"the limit has no {key!r}; every limit needs per_s (calls a second on average, "
                "e.g. 50) and burst (calls at once, e.g. 20)",
            )
    per_s = expect_number(obj["per_s"], child(path, "per_s"), positive=True)
    burst = expect_int(obj["burst"], child(path, "burst"), minimum=1)
    if burst > MAX_BURST:
        raise Invalid(child(path, "burst"), f"expected at most {MAX_BURST}, got {burst}")
    tenant = (
        glob_of(obj["tenant"], child(path, "tenant"), "a tenant name or glob", exp)
        if "tenant" in obj
        else None
    )
    server = server_glob(obj["server"], child(path, "server"), servers, exp) if "server" in obj else None
    tool = glob_of(obj["tool"], child(path, "tool"), "a tool name or glob", exp) if "tool" in obj else None
    return RateLimit(per_s, burst, tenant, server, tool)
