"""How deep a call's arguments may nest, and the cheap check that enforces it.

Arguments nested deeper than ``MAX_ARGUMENT_DEPTH`` are refused (``invalid_arguments``)
before anything else looks at them. Without a bound, recursive code on the call path
(the standard library's ``json``, schema validation, the trust subject) raises
``RecursionError`` at about 1,000 levels, and the codec cannot carry them anyway:
orjson writes at most 254 levels, and a request wraps the arguments in two more
(``{"params": {"arguments": …}}``), an approval listing in three. 64 leaves room for
every wrapper and is far beyond what a tool's schema describes in practice.

Depth counts containers: ``{}`` and ``{"a": 1}`` are 1 deep, ``{"a": [1]}`` is 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_ARGUMENT_DEPTH = 64
"""The deepest nesting of objects and arrays a call's arguments may have."""

_SCALARS = frozenset((str, int, float, bool, type(None)))


def nested_deeper_than(value: Any, limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """Whether ``value`` nests objects and arrays more than ``limit`` deep.

    A walk level by level, without recursion; it stops at the first level past the
    limit, so a cyclic or 100,000-deep value costs ``limit`` levels, and plain
    arguments (one object of scalars) cost well under a microsecond.
    """
    level = [value]
    depth = 0
    while True:
        below: list[Any] = []
        containers = False
        for item in level:
            kind = type(item)
            if kind is dict:
                children: Any = item.values()
            elif kind is list or kind is tuple:
                children = item
            elif isinstance(item, Mapping):
                children = item.values()
            elif isinstance(item, list | tuple):
                children = item
            else:
                continue  # a scalar of a subclassed type, or something the codec will judge
            containers = True
            for child in children:
                if type(child) not in _SCALARS:
                    below.append(child)
        if not containers:
            return False
        depth += 1
        if depth > limit:
            return True
        if not below:
            return False
        level = below
