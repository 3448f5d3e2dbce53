"""A list of browser origins (``bridge.allowed_origins``, ``console.allowed_origins``):
scheme, host and port, exactly what a browser sends in ``Origin``, kept lower-case."""

from __future__ import annotations

import re

from .values import Invalid, child, expect_list, show

# scheme://host[:port], nothing after it: what a browser sends in Origin.
_ORIGIN = re.compile(r"https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?\Z")


def read_origins(value: object, path: str) -> tuple[str, ...]:
    """The origins listed at ``path``; anything else is refused, naming the item."""
    found = []
    for index, item in enumerate(expect_list(value, path, 'a list of origins like ["https://app.example"]')):
        where = child(path, index)
        if not isinstance(item, str) or not _ORIGIN.match(item):
            raise Invalid(
                where,
                f"expected an origin such as 'https://app.example' or 'http://localhost:5173' "
                f"(scheme, host and port only, no path, no '*'), got {show(item)}",
            )
        found.append(item.lower())
    return tuple(found)
