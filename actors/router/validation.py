"""Arguments checked against a tool's ``inputSchema`` before the call leaves (DESIGN.md §4).

Why here: the server is not trusted to validate its own input (the seed guide's
registration discipline), and a bad call caught here costs the model one round trip
with a precise message instead of a vague server error. The router compiles each
tool's schema when the tool list arrives (``compile_schema``) and checks each call
(``validate_arguments``); both are pure.

* **Draft.** ``$schema`` picks the validator class; none (or an unknown one) means
  2020-12. server-everything and many SDK servers publish draft-07.
* **Objects only.** MCP requires a top-level ``"type": "object"``; a schema without
  it (missing, or another type) is a problem, like one its meta-schema rejects.
* **Compiled once.** Checks are cached by the schema's canonical JSON (sorted keys),
  so the same schema served by many tools, or re-listed after ``list_changed``,
  compiles once. The cache is an LRU of ``CACHE_SIZE`` (4096) entries; each holds its
  own parsed copy of the schema, detached from the caller's object. A miss costs
  ~75 us for a common schema (the meta-schema check is skipped for a plainly valid
  subset, see ``_plainly_valid``) and ~0.5-3 ms otherwise; a call costs ~10-50 us.
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

import functools
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import attrs
import orjson

# jsonschema and referencing (~25 ms to import) are imported where a schema is compiled
# or a call is refused, not with this module: a supervisor starts without them.
if TYPE_CHECKING:
    from referencing import Registry, Resource
    from referencing.exceptions import Unresolvable

CACHE_SIZE = 4096
MAX_PROBLEM_CHARS = 200
_MAX_KEY_CHARS = 40
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Keywords whose values are data, not subschemas: a "$ref" inside them is no reference.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "example"})


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


def _cut(text: str, limit: int = MAX_PROBLEM_CHARS) -> str:
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
            out.append(f"[{json.dumps(_cut(str(part), _MAX_KEY_CHARS))}]")
    return "".join(out)


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
    plain = dialect in _PLAIN_DIALECTS and _plainly_valid(schema, 0)
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
    fast = _fast_check(schema) if dialect in _PLAIN_DIALECTS else None
    return SchemaCheck(validator, None, draft, fast)


# The fast path. Checking a schema against the 2020-12 meta-schema takes ~2.4 ms here
# (draft-07: ~0.5 ms), which a 10,000-tool catalog or a list_changed storm cannot
# afford. Nearly every real inputSchema (zod-to-json-schema, pydantic, hand-written)
# uses a few keywords with plainly right values; such a schema is valid under both
# dialects below by inspection, in microseconds. Anything else (another keyword, an
# odd value, another dialect) goes to the meta-schema. The rules only ever accept a
# subset of what the meta-schemas accept (tests check this against jsonschema).
_PLAIN_DIALECTS = frozenset(
    {
        None,
        "https://json-schema.org/draft/2020-12/schema",
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-07/schema",
    }
)
_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
_LOCAL_REF = re.compile(r"#(/[A-Za-z0-9_.$~-]*)*")
_MAX_PLAIN_DEPTH = 32


def _plainly_valid(node: Any, depth: int) -> bool:
    """True only if every keyword is in ``_RULES`` and its value passes the rule."""
    if isinstance(node, bool):
        return True
    if not isinstance(node, dict) or depth > _MAX_PLAIN_DEPTH:
        return False
    for keyword, value in node.items():
        rule = _RULES.get(keyword)
        if rule is None or not rule(value, depth + 1):
            return False
    return True


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_type(value: Any) -> bool:
    if isinstance(value, str):
        return value in _TYPES
    return (
        isinstance(value, list)
        and len(value) > 0
        and all(isinstance(t, str) and t in _TYPES for t in value)
        and len(set(value)) == len(value)
    )


def _is_pattern(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:  # what the meta-schema's "regex" format check does
        re.compile(value)
    except re.error:
        return False
    return True


def _is_schema_map(value: Any, depth: int) -> bool:
    return isinstance(value, dict) and all(_plainly_valid(v, depth) for v in value.values())


def _is_schema_list(value: Any, depth: int) -> bool:
    return isinstance(value, list) and len(value) > 0 and all(_plainly_valid(v, depth) for v in value)


def _is_required(value: Any) -> bool:
    return (
        isinstance(value, list) and all(isinstance(v, str) for v in value) and len(set(value)) == len(value)
    )


_RULES: dict[str, Callable[[Any, int], bool]] = {
    "type": lambda v, d: _is_type(v),
    "properties": _is_schema_map,
    "$defs": _is_schema_map,
    "definitions": _is_schema_map,
    "required": lambda v, d: _is_required(v),
    "items": _plainly_valid,
    "additionalProperties": _plainly_valid,
    "not": _plainly_valid,
    "anyOf": _is_schema_list,
    "oneOf": _is_schema_list,
    "allOf": _is_schema_list,
    "$ref": lambda v, d: isinstance(v, str) and _LOCAL_REF.fullmatch(v) is not None,
    "$schema": lambda v, d: d == 1 and isinstance(v, str) and v in _PLAIN_DIALECTS,
    "enum": lambda v, d: isinstance(v, list),
    "examples": lambda v, d: isinstance(v, list),
    "const": lambda v, d: True,
    "default": lambda v, d: True,
    "title": lambda v, d: isinstance(v, str),
    "description": lambda v, d: isinstance(v, str),
    "$comment": lambda v, d: isinstance(v, str),
    "format": lambda v, d: isinstance(v, str),
    "pattern": lambda v, d: _is_pattern(v),
    "minimum": lambda v, d: _is_number(v),
    "maximum": lambda v, d: _is_number(v),
    "exclusiveMinimum": lambda v, d: _is_number(v),
    "exclusiveMaximum": lambda v, d: _is_number(v),
    "multipleOf": lambda v, d: _is_number(v) and v > 0,
    "minLength": lambda v, d: _is_count(v),
    "maxLength": lambda v, d: _is_count(v),
    "minItems": lambda v, d: _is_count(v),
    "maxItems": lambda v, d: _is_count(v),
    "minProperties": lambda v, d: _is_count(v),
    "maxProperties": lambda v, d: _is_count(v),
    "uniqueItems": lambda v, d: isinstance(v, bool),
    "readOnly": lambda v, d: isinstance(v, bool),
    "writeOnly": lambda v, d: isinstance(v, bool),
    "deprecated": lambda v, d: isinstance(v, bool),
}


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
    return f"inputSchema is not a valid JSON Schema: {json_path(error.absolute_path)}: {_cut(error.message)}"


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
            return _unresolvable(ref)
    return None


def _probe(validator: Validator) -> str | None:
    """Validate ``{}`` once: a schema that refers to itself without end (``"$ref":
    "#"``) or to a missing resource at its top shows up here, not on every call."""
    from jsonschema.exceptions import best_match
    from referencing.exceptions import Unresolvable

    try:
        best_match(validator.iter_errors({}))
    except Unresolvable as unresolved:
        return _unresolvable(_ref_of(unresolved))
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


def _ref_of(unresolved: Unresolvable) -> str:
    """The reference as the schema wrote it, as near as `referencing` tells."""
    from referencing.exceptions import NoSuchAnchor, PointerToNowhere, Unresolvable

    # jsonschema wraps the referencing error and chains the original as the cause.
    cause = unresolved.__cause__ if isinstance(unresolved.__cause__, Unresolvable) else unresolved
    if isinstance(cause, NoSuchAnchor):
        return f"#{cause.anchor}"
    if isinstance(cause, PointerToNowhere):
        return f"#{cause.ref}"
    return str(cause.ref)


def _unresolvable(ref: str) -> str:
    return f"inputSchema refers to {_cut(ref, 100)}, which cannot be resolved (references are never fetched)"


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
    from jsonschema.exceptions import best_match
    from referencing.exceptions import Unresolvable

    try:
        error = best_match(check.validator.iter_errors(arguments))
    except Unresolvable as unresolved:
        return f"tool {tool_id} cannot be called: {_unresolvable(_ref_of(unresolved))}"
    except RecursionError:
        return f"invalid arguments for {tool_id}: $: nested too deeply to validate"
    if error is None:
        return None
    return f"invalid arguments for {tool_id}: {json_path(error.absolute_path)}: {_cut(error.message)}"


# The call-time fast path. jsonschema's ``iter_errors`` + ``best_match`` costs ~10 us per
# call even for ``{"text": "hi"}``. For the keywords most tool schemas use, a plain
# predicate is compiled once per schema; it answers True only when the validator would
# accept too (exact JSON types only: a subclass, a Decimal or a float for "integer" makes
# it answer False), and False sends the call to the validator, which then writes the
# message. Any other keyword (``$ref``, ``anyOf``, ``patternProperties`` …) means no
# fast path for that schema.

Test = Callable[[Any], bool]
_JSON_TYPES = frozenset((str, int, float, bool, type(None), dict, list))
_ANNOTATIONS = frozenset(
    {"title", "description", "$comment", "format", "default", "examples"}
    | {"readOnly", "writeOnly", "deprecated"}
)
_TYPE_TESTS: dict[str, Test] = {
    "string": lambda v: type(v) is str,
    "integer": lambda v: type(v) is int,
    "number": lambda v: type(v) is int or type(v) is float,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
}


def _accept(value: Any) -> bool:
    return True


def _fast_check(schema: dict[str, Any]) -> Callable[[dict[str, Any]], bool] | None:
    """The fast predicate for a whole ``inputSchema``, or None (see above)."""
    # Arguments are a plain dict by the time this runs: "type": "object" holds already.
    top = {k: v for k, v in schema.items() if k != "$schema" and (k, v) != ("type", "object")}
    try:
        return _fast_node(top, 0)
    except (re.error, RecursionError, TypeError):
        return None


def _guarded(kind: type, test: Test) -> Test:
    """A keyword that constrains one JSON type only: other JSON values pass it, anything
    outside plain JSON types fails (the validator decides those)."""

    def check(value: Any) -> bool:
        if type(value) is kind:
            return test(value)
        return type(value) in _JSON_TYPES and not isinstance(value, kind)

    return check


def _number_guarded(test: Test) -> Test:
    def check(value: Any) -> bool:
        kind = type(value)
        if kind is int or kind is float:
            return test(value)
        return kind in _JSON_TYPES  # bool is no number here, as in JSON Schema

    return check


def _fast_node(node: Any, depth: int) -> Test | None:
    if node is True:
        return _accept
    if not isinstance(node, dict) or depth > _MAX_PLAIN_DEPTH:
        return None
    tests: list[Test] = []
    keys = set(node) - _ANNOTATIONS
    for keyword in keys - {"properties", "required", "additionalProperties"}:
        test = _fast_keyword(keyword, node[keyword], depth)
        if test is None:
            return None
        tests.append(test)
    if keys & {"properties", "required", "additionalProperties"}:
        test = _fast_object(node, depth)
        if test is None:
            return None
        tests.append(test)
    if not tests:
        return _accept
    if len(tests) == 1:
        return tests[0]
    all_tests = tuple(tests)
    return lambda value: all(test(value) for test in all_tests)


def _fast_keyword(keyword: str, value: Any, depth: int) -> Test | None:
    if keyword == "type":
        if isinstance(value, str):
            return _TYPE_TESTS.get(value)
        if isinstance(value, list) and value and all(isinstance(t, str) and t in _TYPE_TESTS for t in value):
            tests = tuple(_TYPE_TESTS[t] for t in value)
            return lambda v: any(test(v) for test in tests)
        return None
    if keyword == "enum" and isinstance(value, list) and value and all(type(e) is str for e in value):
        choices = frozenset(value)
        return lambda v: type(v) is str and v in choices
    if keyword == "const" and type(value) is str:
        return lambda v: type(v) is str and v == value
    if keyword in ("minLength", "maxLength", "minItems", "maxItems") and _is_count(value):
        limit: int = value
        kind: type = str if keyword.endswith("Length") else list
        if keyword.startswith("min"):
            return _guarded(kind, lambda v: len(v) >= limit)
        return _guarded(kind, lambda v: len(v) <= limit)
    if keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") and (
        type(value) is int or type(value) is float
    ):
        bound: float = value
        compare: Test = {
            "minimum": lambda v: v >= bound,
            "maximum": lambda v: v <= bound,
            "exclusiveMinimum": lambda v: v > bound,
            "exclusiveMaximum": lambda v: v < bound,
        }[keyword]
        return _number_guarded(compare)
    if keyword == "pattern" and isinstance(value, str):
        search = re.compile(value).search
        return _guarded(str, lambda v: search(v) is not None)
    if keyword == "items" and (isinstance(value, dict) or value is True):
        item = _fast_node(value, depth + 1)
        if item is None:
            return None
        each = item
        return _guarded(list, lambda v: all(each(x) for x in v))
    return None


def _fast_object(node: dict[str, Any], depth: int) -> Test | None:
    properties = node.get("properties", {})
    required = node.get("required", [])
    additional = node.get("additionalProperties", True)
    if not isinstance(properties, dict) or not _is_required(required):
        return None
    tests: dict[str, Test] = {}
    for key, sub in properties.items():
        test = _fast_node(sub, depth + 1)
        if test is None:
            return None
        if test is not _accept:
            tests[key] = test
    if additional is True:
        extra: Test | None = None
    elif additional is False:
        extra = _reject
    else:
        extra = _fast_node(additional, depth + 1)
        if extra is None:
            return None
        if extra is _accept:
            extra = None
    names = frozenset(properties)
    must = tuple(required)

    def check(arguments: dict[str, Any]) -> bool:
        for key in must:
            if key not in arguments:
                return False
        for key, value in arguments.items():
            test = tests.get(key)
            if test is not None:
                if not test(value):
                    return False
            elif extra is not None and key not in names and not extra(value):
                return False
        return True

    return _guarded(dict, check)


def _reject(value: Any) -> bool:
    return False
