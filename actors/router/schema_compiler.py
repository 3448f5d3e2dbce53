"""Compiling a tool's ``inputSchema`` into a :class:`~actors.router.validation.SchemaCheck`.

The router calls :func:`compile_schema` when a tool list arrives. In order: the
schema's own meta-schema (skipped for the plain subset of ``plain_schemas``), the
object type, absolute references resolved offline, and one probe with ``{}``; then
the call-time fast predicate of ``fast_check`` where the schema allows one. Results are
cached by the schema's canonical JSON (see ``validation`` for the rules and costs).
"""

from __future__ import annotations

import functools
import json
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from actors.router.fast_check import fast_check
from actors.router.plain_schemas import PLAIN_DIALECTS, plainly_valid
from actors.router.validation import (
    DRAFT_2020_12,
    SchemaCheck,
    Validator,
    cut,
    json_path,
    ref_of,
    unresolvable,
)

# jsonschema and referencing (~25 ms to import) are imported where a schema is compiled,
# not with this module: a supervisor starts without them.
if TYPE_CHECKING:
    from referencing import Registry, Resource

CACHE_SIZE = 4096
# Keywords whose values are data, not subschemas: a "$ref" inside them is no reference.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "example"})


def _refuse(uri: str) -> Resource[Any]:
    from referencing.exceptions import NoSuchResource

    # Raising NoSuchResource makes `referencing` report the reference as unresolvable.
    raise NoSuchResource(uri)


@functools.cache
def _offline() -> Registry[Any]:
    """jsonschema combines this with the bundled meta-schemas, so those still resolve."""
    from referencing import Registry

    return Registry(retrieve=_refuse)  # type: ignore[call-arg]


_cache: OrderedDict[bytes | str, SchemaCheck] = OrderedDict()
_meta_validators: dict[type[Any], Any] = {}


def _canonical(schema: Mapping[str, Any]) -> bytes | str | None:
    """The cache key: canonical JSON, or None when the schema is not JSON at all."""
    try:
        return orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        pass
    try:  # orjson refuses integers beyond 64 bits; the stdlib does not
        return json.dumps(schema, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return None


def _parse(key: bytes | str) -> Any:
    return orjson.loads(key) if isinstance(key, bytes) else json.loads(key)


def compile_schema(schema: Mapping[str, Any]) -> SchemaCheck:
    """The check for one ``inputSchema``, compiled once per distinct schema."""
    default_draft = DRAFT_2020_12
    if not isinstance(schema, Mapping):
        return SchemaCheck(None, "inputSchema must describe an object", default_draft)
    key = _canonical(schema)
    if key is None:
        return SchemaCheck(None, "inputSchema is not a valid JSON Schema: $: not JSON", default_draft)
    check = _cache.get(key)
    if check is not None:
        _cache.move_to_end(key)
        return check
    check = _compile(_parse(key))
    _cache[key] = check
    while len(_cache) > CACHE_SIZE:
        _cache.popitem(last=False)
    return check


def _compile(schema: dict[str, Any]) -> SchemaCheck:
    """Meta-schema (or fast path), object type, offline references, a probe: in order."""
    from jsonschema.validators import Draft202012Validator, validator_for  # type: ignore[import-untyped]

    problem: str | None
    dialect = schema.get("$schema")
    if "$schema" in schema and not isinstance(dialect, str):
        problem = 'inputSchema is not a valid JSON Schema: $["$schema"]: must be a string'
        return SchemaCheck(None, problem, DRAFT_2020_12)
    try:
        cls = validator_for(schema, default=Draft202012Validator)
    except ValueError:  # "$schema" is not even a URI ("http://[::1")
        problem = 'inputSchema is not a valid JSON Schema: $["$schema"]: not a URI'
        return SchemaCheck(None, problem, DRAFT_2020_12)
    draft: str = cls.META_SCHEMA.get("$schema", "")
    plain = dialect in PLAIN_DIALECTS and plainly_valid(schema, 0)
    problem = None if plain else _schema_problem(cls, schema)
    # MCP says inputSchema is an object schema; servers that leave "type" out still
    # mean one (arguments are always an object), so only a different type is refused.
    if problem is None and schema.get("type", "object") != "object":
        problem = "inputSchema must describe an object"
    if problem is not None:
        return SchemaCheck(None, problem, draft)
    validator: Validator = cls(schema, registry=_offline())
    problem = _reference_problem(schema, draft) or _probe(validator)
    if problem is not None:
        return SchemaCheck(None, problem, draft)
    fast = fast_check(schema) if dialect in PLAIN_DIALECTS else None
    return SchemaCheck(validator, None, draft, fast)


def _schema_problem(cls: Any, schema: dict[str, Any]) -> str | None:
    """Why the schema is not valid under its own draft's meta-schema, if it is not.

    Like ``cls.check_schema`` (same format checks, so a broken ``pattern`` counts),
    but reports jsonschema's best match rather than the first error found.
    """
    from jsonschema.exceptions import best_match  # type: ignore[import-untyped]
    from jsonschema.validators import validator_for

    meta = _meta_validators.get(cls)
    if meta is None:
        meta_cls = validator_for(cls.META_SCHEMA, default=cls)
        meta = _meta_validators[cls] = meta_cls(cls.META_SCHEMA, format_checker=meta_cls.FORMAT_CHECKER)
    error = best_match(meta.iter_errors(schema))
    if error is None:
        return None
    return f"inputSchema is not a valid JSON Schema: {json_path(error.absolute_path)}: {cut(error.message)}"


def _reference_problem(schema: dict[str, Any], draft: str) -> str | None:
    """An absolute ``$ref`` that does not resolve offline, found before any call.

    Relative references are resolved against scopes only jsonschema tracks; those
    are left to ``validate_arguments``, which reports them the same way.
    """
    refs = list(_absolute_refs(schema))
    if not refs:
        return None
    from jsonschema_specifications import REGISTRY as SPECIFICATIONS  # type: ignore[import-untyped]
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012, specification_with

    resource = specification_with(draft, default=DRAFT202012).create_resource(schema)
    resolver = SPECIFICATIONS.combine(_offline()).resolver_with_root(resource)
    for ref in refs:
        try:
            resolver.lookup(ref)
        except (Unresolvable, ValueError):  # ValueError: not even a URI ("http://[::1")
            return unresolvable(ref)
    return None


def _probe(validator: Validator) -> str | None:
    """Validate ``{}`` once: a schema that refers to itself without end (``"$ref":
    "#"``) or to a missing resource at its top shows up here, not on every call."""
    from jsonschema.exceptions import best_match
    from referencing.exceptions import Unresolvable

    try:
        best_match(validator.iter_errors({}))
    except Unresolvable as unresolved:
        return unresolvable(ref_of(unresolved))
    except RecursionError:
        return "inputSchema refers to itself without end"
    return None


def _absolute_refs(node: Any) -> Iterator[str]:
    if isinstance(node, Mapping):
        for keyword, value in node.items():
            if keyword in ("$ref", "$dynamicRef") and isinstance(value, str):
                try:
                    absolute = bool(urlsplit(value).scheme)
                except ValueError:
                    absolute = True  # unparsable: let the lookup report it
                if absolute:
                    yield value
            elif keyword not in _DATA_KEYWORDS:
                yield from _absolute_refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _absolute_refs(item)
