"""JSON-RPC 2.0 messages and the MCP payloads the supervisor reads, as frozen classes.

Envelope classes mirror the wire one to one. Payload classes (``Tool``,
``InitializeResult``, ``CallResult``) hold only what the supervisor uses; unknown
fields are dropped at the edge by the payload converter (``payloads.py``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, TypeAlias

import attrs

RequestId: TypeAlias = int | str
Params: TypeAlias = Mapping[str, Any] | list[Any] | None
Caps: TypeAlias = Mapping[str, Any] | None  # client capabilities for one request (None: the session's)

# Protocol revisions negotiated through `initialize`, oldest to newest. 2026-07-28 is
# the stateless per-request revision reached through `server/discover`, not through
# the initialize handshake, so it is not offered here.
SUPPORTED_PROTOCOL_VERSIONS: tuple[str, ...] = (
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
)
LATEST_PROTOCOL_VERSION = SUPPORTED_PROTOCOL_VERSIONS[-1]

# Revisions of the per-request era (no initialize, no session; ``era.py``).
MODERN_PROTOCOL_VERSIONS: tuple[str, ...] = ("2026-07-28",)
LATEST_MODERN_VERSION = MODERN_PROTOCOL_VERSIONS[-1]

# The ``_meta`` keys every request of the per-request era carries, and the one a
# ``server/discover`` result may carry about the server.
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
"""The least severe log message a per-request-era request asks the server to send
for it (none without it)."""
LOG_LEVELS: tuple[str, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
"""The RFC 5424 levels MCP names, least severe first."""

# JSON-RPC error codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNSUPPORTED_PROTOCOL_VERSION = -32022


class Untied(enum.Enum):
    """The mark of a server request that arrived where no request of ours is
    answered (Streamable HTTP's GET stream): it belongs to no call."""

    UNTIED = "untied"


UNTIED = Untied.UNTIED


@attrs.frozen(slots=True)
class Request:
    """A request that expects exactly one response with the same id."""

    id: RequestId
    method: str
    params: Params = None
    related: RequestId | Untied | None = attrs.field(default=None, eq=False, kw_only=True)
    """A server's request only, never on the wire: the request of ours it belongs to,
    as the transport knows it from where it arrived (on Streamable HTTP, the stream
    answering that request: SEP-2260), ``UNTIED`` when it arrived where none is
    answered, None when the transport cannot tell (stdio, legacy SSE)."""


@attrs.frozen(slots=True)
class Notification:
    """A one-way message."""

    method: str
    params: Params = None
    related: RequestId | Untied | None = attrs.field(default=None, eq=False, kw_only=True)
    """A server's notification only, never on the wire: the request of ours whose
    answer stream carried it, as the transport knows it (``Request.related``)."""


@attrs.frozen(slots=True)
class ErrorObject:
    """The ``error`` member of a JSON-RPC error response."""

    code: int
    message: str
    data: Any = None


@attrs.frozen(slots=True)
class Response:
    """A successful response."""

    id: RequestId
    result: Mapping[str, Any]


@attrs.frozen(slots=True)
class ErrorResponse:
    """A failed response; ``id`` is None when the peer could not read the request id."""

    id: RequestId | None
    error: ErrorObject


Message: TypeAlias = Request | Notification | Response | ErrorResponse


@attrs.frozen(slots=True)
class Tool:
    """One tool as a server publishes it in ``tools/list``."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = attrs.field(factory=lambda: {"type": "object"})
    title: str | None = None
    annotations: Mapping[str, Any] | None = None
    output_schema: Mapping[str, Any] | None = None


@attrs.frozen(slots=True)
class Resource:
    """One resource as a server publishes it in ``resources/list``; ``raw`` is the item
    as sent (title, description, mimeType, size, annotations, icons, ``_meta`` …), handed
    on unchanged."""

    uri: str
    name: str
    raw: Mapping[str, Any] = attrs.field(factory=dict, repr=False)


@attrs.frozen(slots=True)
class ResourceTemplate:
    """One template of ``resources/templates/list`` (RFC 6570 ``uriTemplate``); ``raw``
    as sent."""

    uri_template: str
    name: str
    raw: Mapping[str, Any] = attrs.field(factory=dict, repr=False)


@attrs.frozen(slots=True)
class Prompt:
    """One prompt of ``prompts/list``; ``arguments`` are its arguments' names (the
    required ones in ``required``); ``raw`` as sent."""

    name: str
    arguments: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    raw: Mapping[str, Any] = attrs.field(factory=dict, repr=False)


@attrs.frozen(slots=True)
class ServerFeatures:
    """What a server declared it serves beyond tools (from ``initialize`` or
    ``server/discover`` capabilities), read once per connection."""

    resources: bool = False
    subscribe: bool = False  # resources.subscribe
    templates: bool = False  # the same capability as resources: listed when it has any
    prompts: bool = False
    completions: bool = False
    logging: bool = False

    @classmethod
    def of(cls, capabilities: Mapping[str, Any]) -> ServerFeatures:
        """Read a server's declared capabilities (anything malformed counts as absent)."""
        resources = capabilities.get("resources")
        has_resources = isinstance(resources, Mapping)
        return cls(
            resources=has_resources,
            subscribe=has_resources and resources.get("subscribe") is True,  # type: ignore[union-attr]
            templates=has_resources,
            prompts=isinstance(capabilities.get("prompts"), Mapping),
            completions=isinstance(capabilities.get("completions"), Mapping),
            logging=isinstance(capabilities.get("logging"), Mapping),
        )


@attrs.frozen(slots=True)
class InitializeResult:
    """What the server said about itself in answer to ``initialize``."""

    protocol_version: str
    capabilities: Mapping[str, Any] = attrs.field(factory=dict)
    server_info: Mapping[str, Any] = attrs.field(factory=dict)
    instructions: str | None = None


@attrs.frozen(slots=True)
class DiscoverResult:
    """What the server said about itself in answer to ``server/discover``."""

    supported_versions: tuple[str, ...]
    capabilities: Mapping[str, Any] = attrs.field(factory=dict)
    server_info: Mapping[str, Any] = attrs.field(factory=dict)
    instructions: str | None = None


@attrs.frozen(slots=True)
class CallResult:
    """The result of ``tools/call``: content items, optional structured content, isError."""

    content: tuple[Mapping[str, Any], ...] = ()
    structured_content: Any = None
    is_error: bool = False
