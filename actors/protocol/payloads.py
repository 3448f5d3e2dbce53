"""MCP payloads (tools, the initialize result, call results) to and from frozen classes.

cattrs, with a private converter and camelCase renames, turns payload dicts into the
classes of ``messages.py``; unknown fields are dropped here, at the edge. A malformed
payload is a ProtocolError that says what is wrong.

A tool's ``inputSchema`` and ``outputSchema`` are opaque here: kept whole, as the server
sent them (``$schema``, ``$defs``, ``$ref``, ``$anchor``, every keyword), never looked into.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cattrs
from cattrs.gen import make_dict_structure_fn, override

from actors.protocol.errors import ProtocolError
from actors.protocol.messages import META_SERVER_INFO, CallResult, DiscoverResult, InitializeResult, Tool

_converter = cattrs.Converter(forbid_extra_keys=False)
_converter.register_structure_hook(
    Tool,
    make_dict_structure_fn(
        Tool,
        _converter,
        input_schema=override(rename="inputSchema"),
        output_schema=override(rename="outputSchema"),
    ),
)
_converter.register_structure_hook(
    InitializeResult,
    make_dict_structure_fn(
        InitializeResult,
        _converter,
        protocol_version=override(rename="protocolVersion"),
        server_info=override(rename="serverInfo"),
    ),
)


def _brief(exc: Exception) -> str:
    if isinstance(exc, cattrs.ClassValidationError):
        notes: list[str] = []
        for sub in exc.exceptions:
            notes.extend(getattr(sub, "__notes__", []) or [str(sub)])
        return "; ".join(str(n) for n in notes) or str(exc)
    return str(exc)


def structure_tool(obj: Any) -> Tool:
    """A Tool from one ``tools/list`` entry, or ProtocolError saying what is wrong."""
    if not isinstance(obj, dict):
        raise ProtocolError(f"tool entry must be an object, got {type(obj).__name__}")
    if not isinstance(obj.get("name"), str) or not obj["name"]:
        raise ProtocolError("tool entry has no name")
    if "inputSchema" in obj and not isinstance(obj["inputSchema"], dict):
        raise ProtocolError(f"tool {obj['name']!r}: inputSchema must be an object")
    if obj.get("outputSchema") is not None and not isinstance(obj["outputSchema"], dict):
        raise ProtocolError(f"tool {obj['name']!r}: outputSchema must be an object")
    if obj.get("description") is None:
        obj = {**obj, "description": ""}
    try:
        return _converter.structure(obj, Tool)
    except (cattrs.BaseValidationError, TypeError, ValueError) as exc:
        raise ProtocolError(f"tool {obj['name']!r} is malformed: {_brief(exc)}") from None


def structure_initialize_result(obj: Mapping[str, Any]) -> InitializeResult:
    """An InitializeResult, or ProtocolError."""
    if not isinstance(obj.get("protocolVersion"), str):
        raise ProtocolError("initialize result has no protocolVersion")
    try:
        return _converter.structure(obj, InitializeResult)
    except (cattrs.BaseValidationError, TypeError, ValueError) as exc:
        raise ProtocolError(f"initialize result is malformed: {_brief(exc)}") from None


def structure_discover_result(obj: Mapping[str, Any]) -> DiscoverResult:
    """A DiscoverResult, or ProtocolError (the caller falls back to ``initialize``)."""
    versions = obj.get("supportedVersions")
    if not isinstance(versions, list) or not all(isinstance(v, str) for v in versions):
        raise ProtocolError("server/discover result has no supportedVersions list of strings")
    capabilities = obj.get("capabilities", {})
    if not isinstance(capabilities, dict):
        raise ProtocolError("server/discover result: capabilities must be an object")
    meta = obj.get("_meta")
    info = meta.get(META_SERVER_INFO) if isinstance(meta, dict) else None  # display only
    instructions = obj.get("instructions")
    return DiscoverResult(
        tuple(versions),
        capabilities,
        info if isinstance(info, dict) else {},
        instructions if isinstance(instructions, str) else None,
    )


def structure_call_result(obj: Mapping[str, Any]) -> CallResult:
    """A CallResult, or ProtocolError (callers fail that one call, not the connection)."""
    content = obj.get("content", [])
    if not isinstance(content, list) or not all(isinstance(item, dict) for item in content):
        raise ProtocolError("tools/call result: content must be a list of objects")
    return CallResult(
        content=tuple(content),
        structured_content=obj.get("structuredContent"),
        is_error=obj.get("isError") is True,
    )


def unstructure(value: Any) -> Any:
    """Plain JSON-ready data from a payload class."""
    return _converter.unstructure(value)


def tool_to_wire(tool: Tool) -> dict[str, Any]:
    """A Tool back in its ``tools/list`` shape (for caches that must read it again)."""
    wire: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
    }
    if tool.title is not None:
        wire["title"] = tool.title
    if tool.annotations is not None:
        wire["annotations"] = tool.annotations
    if tool.output_schema is not None:
        wire["outputSchema"] = tool.output_schema
    return wire
