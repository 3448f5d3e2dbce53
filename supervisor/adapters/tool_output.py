"""What a model reads of a call's envelope, the same through every adapter.

A success is the envelope's text (a result that has only structured content: that
content as JSON). A failure is ``<code>: <message>`` (``busy`` and ``rate_limited`` add
how long to wait), which each adapter hands to the model as its framework hands over a
failed tool call, so the run goes on: the model reads why and may do something else.
``CORRECTABLE`` are the codes the model caused and can fix by calling again
differently; a framework that tells those apart (pydantic-ai's retry prompt) gets them
so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from supervisor.aio import Envelope

CORRECTABLE = frozenset({"invalid_arguments", "unknown_tool"})
"""The model's own mistake: arguments its tool's schema refuses, a tool the turn does not
show (with ``tool_search`` on, the message says to search for it)."""


def model_text(envelope: Envelope) -> str:
    """The tool output of a successful call."""
    if not envelope.text and envelope.structured is not None:
        return json.dumps(envelope.structured, ensure_ascii=False)
    return envelope.text


def error_text(envelope: Envelope) -> str:
    """The tool output of a failed call: its code and message (and when to retry)."""
    error = envelope.error
    if error is None:
        raise ValueError(f"error_text: the call of {envelope.tool} succeeded; use model_text")
    text = f"{error.code}: {error.message}"
    if error.retry_after_ms is not None:
        text += f" (retry after {error.retry_after_ms} ms)"
    return text


def listed_schema(item: Mapping[str, Any]) -> dict[str, Any]:
    """A listed tool's input schema as given to a framework that requires ``properties``
    (an MCP schema may leave them out; a tool with no arguments often does)."""
    schema = dict(item["input_schema"])
    schema.setdefault("properties", {})
    return schema
