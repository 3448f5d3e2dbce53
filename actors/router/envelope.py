"""The result envelope every call ends in, and output bounds.

One shape for success and failure (a contract: the README shows it, the admin API's
``Envelope`` schema describes it), so a host handles a call the same way whatever
server it went to. Text is cut at a character boundary so that the
whole text, marker included, fits ``max_output_bytes`` encoded as UTF-8.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from actors.protocol.messages import ErrorObject

TRUNCATION_MARKER = "... [truncated]"

ERROR_CODES = frozenset(
    {
        "unknown_tool",
        "invalid_arguments",
        "denied",
        "unavailable",
        "timeout",
        "cancelled",
        "auth_failed",
        "server_error",
        "tool_error",
        "unknown_resource",
        "unknown_prompt",
        "unsupported",
        "busy",
        "rate_limited",
        "needs_auth",
    }
)


@attrs.frozen(slots=True)
class CallError:
    """Why a call failed: a code from ERROR_CODES and a message for the model.
    ``retry_after_ms`` is set for ``busy`` and ``rate_limited``: when trying again is worth it. ``rpc_error``
    is the server's own JSON-RPC error behind a ``server_error`` (not in ``as_dict``:
    hosts see our code; the MCP gateway passes a few on, gateway/results.py)."""

    code: str
    message: str
    retry_after_ms: int | None = None
    rpc_error: ErrorObject | None = None
    authorization_url: str | None = None
    """With ``needs_auth``: where the caller's person signs in (theirs alone)."""
    elicitation_id: str | None = None
    """With ``needs_auth``: the sign-in's id (an MCP URL elicitation's ``elicitationId``)."""

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.retry_after_ms is not None:
            body["retry_after_ms"] = self.retry_after_ms
        if self.authorization_url is not None:
            body["authorization_url"] = self.authorization_url
        return body


@attrs.frozen(slots=True)
class Envelope:
    """The one answer to one call."""

    ok: bool
    tool: str
    text: str = ""
    content: tuple[Mapping[str, Any], ...] = ()
    structured: Any = None
    truncated: bool = False
    duration_ms: int = 0
    error: CallError | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape hosts see (see the module docstring)."""
        if not self.ok:
            assert self.error is not None
            return {
                "ok": False,
                "tool": self.tool,
                "error": self.error.as_dict(),
            }
        return {
            "ok": True,
            "tool": self.tool,
            "text": self.text,
            "content": [dict(item) for item in self.content],
            "structured": self.structured,
            "truncated": self.truncated,
            "duration_ms": self.duration_ms,
        }


def failure(
    tool: str,
    code: str,
    message: str,
    retry_after_ms: int | None = None,
    rpc_error: ErrorObject | None = None,
) -> Envelope:
    """An error envelope."""
    assert code in ERROR_CODES, code
    return Envelope(ok=False, tool=tool, error=CallError(code, message, retry_after_ms, rpc_error))


def describe_item(item: Mapping[str, Any]) -> str:
    """Text of one content item; non-text items are named, not decoded."""
    kind = item.get("type")
    if kind == "text" and isinstance(item.get("text"), str):
        return str(item["text"])
    mime = item.get("mimeType")
    resource = item.get("resource")
    if mime is None and isinstance(resource, Mapping):
        mime = resource.get("mimeType")
    suffix = f" ({mime})" if isinstance(mime, str) else ""
    return f"[non-text content: {kind}{suffix}]"


def join_text(content: Sequence[Mapping[str, Any]]) -> str:
    """The text content items joined by newlines, non-text items annotated."""
    return "\n".join(describe_item(item) for item in content)


def truncate_utf8(text: str, max_bytes: int) -> tuple[str, bool]:
    """Cut ``text`` so that it, plus the marker, fits ``max_bytes`` in UTF-8."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text, False
    if max_bytes <= len(TRUNCATION_MARKER):  # the marker is ASCII: bytes == characters
        return TRUNCATION_MARKER[: max(0, max_bytes)], True
    head = encoded[: max_bytes - len(TRUNCATION_MARKER)].decode("utf-8", "ignore")  # drops a split last char
    return head + TRUNCATION_MARKER, True


def _strip_payload(item: Mapping[str, Any]) -> dict[str, Any]:
    """A non-text item without its data (when the output is over its bound)."""
    return {k: v for k, v in item.items() if k in ("type", "mimeType", "uri", "name")}


def success(
    tool: str,
    content: Sequence[Mapping[str, Any]],
    structured: Any,
    duration_ms: int,
    max_output_bytes: int,
) -> Envelope:
    """A success envelope with text bounded by ``max_output_bytes``."""
    return bounded(tool, content, join_text(content), structured, duration_ms, max_output_bytes)


def bounded(
    tool: str,
    items: Sequence[Mapping[str, Any]],
    text: str,
    structured: Any,
    duration_ms: int,
    max_output_bytes: int,
    *,
    oversized: bool = False,
    named: Callable[[Mapping[str, Any]], Mapping[str, Any]] = _strip_payload,
) -> Envelope:
    """A success envelope whose ``text`` fits ``max_output_bytes``. When the text is cut
    (or ``oversized``: the caller found the rest over the bound), the content would
    carry the same oversized payload again: keep only the cut text and each non-text
    item as ``named`` leaves it, and drop ``structured``."""
    cut, truncated = truncate_utf8(text, max_output_bytes)
    kept: tuple[Mapping[str, Any], ...] = tuple(items)
    if truncated or oversized:
        truncated = True
        kept = ({"type": "text", "text": cut}, *(named(item) for item in items if item.get("type") != "text"))
        structured = None
    return Envelope(
        ok=True,
        tool=tool,
        text=cut,
        content=kept,
        structured=structured,
        truncated=truncated,
        duration_ms=duration_ms,
    )
