"""How deeply a JSON text may nest before our parser stops, and how to say so.

orjson reads at most 1024 levels of arrays and objects and refuses a deeper text with
the same ``JSONDecodeError`` as a syntax error, though the text may be good JSON. A
reader that tells a client why its input was refused says which it was, so the client
fixes the right thing.
"""

from __future__ import annotations

import orjson

JSON_MAX_DEPTH = 1024
"""The deepest nesting of arrays and objects orjson reads."""


def too_deep(exc: orjson.JSONDecodeError) -> bool:
    """Whether orjson refused a text for its nesting, not its syntax."""
    return exc.msg == "depth limit exceeded"


def nested_too_deep(what: str) -> str:
    """The problem of a text that nests deeper than orjson reads (``what``: "the body")."""
    return (
        f"{what} is nested deeper than {JSON_MAX_DEPTH} levels (arrays and objects), "
        "more than the JSON parser reads: nest it less deeply"
    )
