"""The one envelope of a read, a prompt get or a completion, from the server's result.

Like a call's (``actors/router/envelope.py``): ``text`` joins what a model reads,
``content`` holds the items (a read's contents as embedded-resource items, a prompt's
messages' content), ``structured`` is the server's whole result, so that a gateway can
hand it on as it came. Output is bounded by the server's ``max_output_bytes``: when
the text or the result encoded as JSON is larger, the text is cut (ending in the
truncation marker), non-text items keep only their names, and ``structured`` is left
out (``truncated``: true).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from actors.connection.messages import Answered, CallFailed, CallOutcome
from actors.router.envelope import Envelope, bounded, describe_item, failure

Reading = tuple[tuple[Mapping[str, Any], ...], str]
"""What a result shows: its content items, and its text."""


def surface_envelope(
    label: str,
    method: str,
    outcome: CallOutcome,
    duration_ms: int,
    max_output_bytes: int,
) -> Envelope:
    """The envelope of one answered surface request (``method``: ``resources/read``,
    ``prompts/get`` or ``completion/complete``), or its failure."""
    if isinstance(outcome, CallFailed):
        return failure(label, outcome.code, outcome.message, outcome.retry_after_ms)
    if not isinstance(outcome, Answered):
        return failure(label, "server_error", f"{label}: the answer is not a {method} result")
    reading = _READERS[method](outcome.result)
    if reading is None:
        return failure(label, "server_error", f"{label}: the answer is not a {method} result")
    items, text = reading
    oversized = _encoded_size(outcome.result) > max_output_bytes
    return bounded(
        label, items, text, outcome.result, duration_ms, max_output_bytes, oversized=oversized, named=_named
    )


def _encoded_size(result: Mapping[str, Any]) -> int:
    try:
        return len(orjson.dumps(result))
    except TypeError:  # not JSON as orjson writes it (too deep, odd numbers): count it as too large
        return 1 << 62


def _named(item: Mapping[str, Any]) -> dict[str, Any]:
    """An item without its payload: what it is and what it is called."""
    kept = {k: v for k, v in item.items() if k in ("type", "mimeType", "uri", "name")}
    resource = item.get("resource")
    if isinstance(resource, Mapping):
        kept["resource"] = {k: v for k, v in resource.items() if k in ("uri", "mimeType")}
    return kept


def _read_contents(result: Mapping[str, Any]) -> Reading | None:
    """``resources/read``: each content as an embedded resource; text contents' text."""
    contents = result.get("contents")
    if not isinstance(contents, list) or not all(isinstance(c, Mapping) for c in contents):
        return None
    items = tuple({"type": "resource", "resource": content} for content in contents)
    texts = (
        c["text"] if isinstance(c.get("text"), str) else describe_item(item)
        for c, item in zip(contents, items, strict=True)
    )
    return items, "\n".join(texts)


def _prompt_messages(result: Mapping[str, Any]) -> Reading | None:
    """``prompts/get``: each message's content item."""
    messages = result.get("messages")
    if not isinstance(messages, list):
        return None
    items = []
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, Mapping):
            return None
        items.append(content)
    return tuple(items), "\n".join(describe_item(item) for item in items)


def _completion_values(result: Mapping[str, Any]) -> Reading | None:
    """``completion/complete``: the values, one a line (no content items)."""
    completion = result.get("completion")
    values = completion.get("values") if isinstance(completion, Mapping) else None
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return None
    return (), "\n".join(values)


_READERS: dict[str, Callable[[Mapping[str, Any]], Reading | None]] = {
    "resources/read": _read_contents,
    "prompts/get": _prompt_messages,
    "completion/complete": _completion_values,
}
