"""Arguments checked against a tool's ``inputSchema`` before the call leaves.

Why here: the server is not trusted to validate its own input, and a bad call caught
here costs the model one round trip with a precise message instead of a vague server
error. In a call it runs once the tool id is found in the turn's catalog, and before
the trust decision (see "One call's path" in ``docs/architecture.md``).

The router compiles each tool's schema when the tool list arrives
(``schema_compiler.compile_schema``) and checks each call (``validate_arguments``,
here); both are pure. The two shortcuts live apart: ``plain_schemas`` (a schema valid
by inspection skips the meta-schema) and ``fast_check`` (a plain predicate answers
most calls without jsonschema).

* **Draft.** ``$schema`` picks the validator class (2020-12, 2019-09, draft-07, -06,
  -04); none (or an unknown one) means 2020-12, MCP's default dialect (SEP-1613; the
  official SDK's ``validator_for`` defaults the same way). server-everything and many
  SDK servers publish draft-07. ``$ref`` into ``$defs``/``definitions`` and anchors
  (``$anchor``, ``$dynamicAnchor``, draft-07's ``"$id": "#name"``) resolve in the schema
  itself; the schema we validate with is never the one we hand on (listings carry the
  server's own, see ``docs/turns.md``).
* **Objects only.** MCP requires a top-level ``"type": "object"``; a schema without
  it (missing, or another type) is a problem, like one its meta-schema rejects.
* **Compiled once.** Checks are cached by the schema's canonical JSON (sorted keys),
  so the same schema served by many tools, or re-listed after ``list_changed``,
  compiles once. The cache is an LRU of ``CACHE_SIZE`` (4096) entries; each holds its
  own parsed copy of the schema, detached from the caller's object. A miss costs
  ~75 us for a common schema (the meta-schema check is skipped for a plainly valid
  subset, see ``plain_schemas``) and ~0.5-3 ms otherwise; a call costs ~10-50 us.
* **Never the network.** ``$ref`` retrieval goes to a registry that refuses; only the
  JSON Schema meta-schemas (bundled with jsonschema) and the schema's own resources
  resolve. An absolute ``$ref`` that cannot be resolved is a schema problem found at
  compile time; any other unresolvable reference is reported when a call reaches it.
* **A bad schema hides one tool, not the server.** ``SchemaCheck.problem`` says what
  is wrong; the tool stays listed and calls to it get ``tool <id> cannot be called:
  <problem>``.
* **Messages never echo big values.** ``<path>`` is a JSONPath into the arguments and
  ``<problem>`` is jsonschema's best-match message cut to ``MAX_PROBLEM_CHARS``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

import attrs

# jsonschema and referencing (~25 ms to import) are imported where a schema is compiled
# or a call is refused, not with this module: a supervisor starts without them.
if TYPE_CHECKING:
    from referencing.exceptions import Unresolvable

MAX_PROBLEM_CHARS = 200
_MAX_KEY_CHARS = 40
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Validator(Protocol):
    """What we use of a jsonschema validator (jsonschema ships no type information)."""

    schema: Any

    def iter_errors(self, instance: Any) -> Iterator[Any]: ...


@attrs.frozen(slots=True, eq=False)
class SchemaCheck:
    """A tool's compiled ``inputSchema``: a validator, or the reason there is none.

    ``draft`` is the meta-schema URI of the draft used (also for a broken schema).
    """

    validator: Validator | None
    problem: str | None
    draft: str
    fast: Callable[[dict[str, Any]], bool] | None = None
    """For a schema of the plain shape, a predicate that is True only for arguments the
    validator accepts (False means: ask the validator); None otherwise."""


DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"


def cut(text: str, limit: int = MAX_PROBLEM_CHARS) -> str:
    """``text`` in at most ``limit`` characters (a problem never echoes a big value)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def json_path(path: Iterable[str | int]) -> str:
    """``$``, ``$.a.b``, ``$.items[2]``, ``$["odd key"]``; long keys cut."""
    out = ["$"]
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _IDENTIFIER.fullmatch(part) and len(part) <= _MAX_KEY_CHARS:
            out.append(f".{part}")
        else:
            out.append(f"[{json.dumps(cut(str(part), _MAX_KEY_CHARS))}]")
    return "".join(out)


def ref_of(unresolved: Unresolvable) -> str:
    """The reference as the schema wrote it, as near as `referencing` tells."""
    from referencing.exceptions import NoSuchAnchor, PointerToNowhere, Unresolvable

    # jsonschema wraps the referencing error and chains the original as the cause.
    cause = unresolved.__cause__ if isinstance(unresolved.__cause__, Unresolvable) else unresolved
    if isinstance(cause, NoSuchAnchor):
        return f"#{cause.anchor}"
    if isinstance(cause, PointerToNowhere):
        return f"#{cause.ref}"
    return str(cause.ref)


def unresolvable(ref: str) -> str:
    return f"inputSchema refers to {cut(ref, 100)}, which cannot be resolved (references are never fetched)"


def validate_arguments(tool_id: str, check: SchemaCheck, arguments: Any) -> str | None:
    """None when ``arguments`` fit the tool's schema, else the message for the model.

    ``invalid arguments for <id>: <path>: <problem>`` for bad arguments (the most
    relevant error only), ``tool <id> cannot be called: <problem>`` when the schema
    itself is unusable. Never raises for any JSON value. Callers turn an omitted
    ``arguments`` into ``{}`` first: here anything but an object is an error.
    """
    if check.validator is None:
        return f"tool {tool_id} cannot be called: {check.problem}"
    if not isinstance(arguments, dict):
        return f"invalid arguments for {tool_id}: $: must be an object"
    if check.fast is not None and type(arguments) is dict and check.fast(arguments):
        return None
    from jsonschema.exceptions import best_match  # type: ignore[import-untyped]
    from referencing.exceptions import Unresolvable

    try:
        error = best_match(check.validator.iter_errors(arguments))
    except Unresolvable as unresolved:
        return f"tool {tool_id} cannot be called: {unresolvable(ref_of(unresolved))}"
    except RecursionError:
        return f"invalid arguments for {tool_id}: $: nested too deeply to validate"
    if error is None:
        return None
    return f"invalid arguments for {tool_id}: {json_path(error.absolute_path)}: {cut(error.message)}"
