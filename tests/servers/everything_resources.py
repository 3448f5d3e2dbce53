"""The conformance fixture's resources, prompts, completion and the three handlers
``MCPServer`` has no decorator for (logging level, resource subscriptions).

``test_update_watched_resource`` (a tool no scenario calls) announces that
``test://watched-resource`` changed, to whoever subscribed in either era: the listen
streams that asked for it (2026-07-28), and the client that sent ``resources/subscribe``
(handshake era; stdio serves one client). It says who that was, so a test sees what
the server was told.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from typing import Any

from everything_app import PNG_1X1, server, text_resource
from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    PromptReference,
    ResourceTemplateReference,
    SetLevelRequestParams,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    TextContent,
    UnsubscribeRequestParams,
)

WATCHED = "test://watched-resource"
subscribed: set[str] = set()
listening: Counter[str] = Counter()  # the open listen streams that want each URI


@server.resource("test://static-text")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@server.resource("test://static-binary")
def static_binary() -> bytes:
    """A static binary resource (a PNG)."""
    return base64.b64decode(PNG_1X1)


@server.resource("test://template/{id}/data")
def template_data(id: str) -> str:
    """A template: the id comes back in JSON."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.resource(WATCHED)
def watched() -> str:
    """A resource to subscribe to."""
    return "Watched resource content"


@server.tool()
async def test_update_watched_resource(ctx: Context) -> str:
    """Announce that the watched resource changed (see the module docstring)."""
    await ctx.notify_resource_updated(WATCHED)
    if WATCHED in subscribed:
        await ctx.session.send_resource_updated(WATCHED)
    said = "yes" if WATCHED in subscribed else "no"
    return f"announced {WATCHED} (resources/subscribe: {said}; listen streams: {listening[WATCHED]})"


def said(*content: TextContent | ImageContent | EmbeddedResource) -> list[UserMessage]:
    return [UserMessage(role="user", content=item) for item in content]


@server.prompt()
def test_simple_prompt() -> list[UserMessage]:
    """No arguments."""
    return said(TextContent(type="text", text="This is a simple prompt for testing."))


@server.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    """Two required arguments, echoed."""
    return said(TextContent(type="text", text=f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))


@server.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    """An embedded resource at the given URI."""
    return said(
        text_resource(resourceUri, "Embedded resource content for testing."),
        TextContent(type="text", text="Please process the embedded resource above."),
    )


@server.prompt()
def test_prompt_with_image() -> list[UserMessage]:
    """An image."""
    return said(
        ImageContent(type="image", data=PNG_1X1, mime_type="image/png"),
        TextContent(type="text", text="Please analyze the image above."),
    )


@server.completion()
async def complete(
    ref: PromptReference | ResourceTemplateReference,
    argument: CompletionArgument,
    context: CompletionContext | None,
) -> Completion:
    """Completion is declared; no suggestions."""
    return Completion(values=[], total=0, has_more=False)


async def set_level(ctx: ServerRequestContext, params: SetLevelRequestParams) -> EmptyResult:
    return EmptyResult()


async def subscribe(ctx: ServerRequestContext, params: SubscribeRequestParams) -> EmptyResult:
    subscribed.add(str(params.uri))
    return EmptyResult()


async def unsubscribe(ctx: ServerRequestContext, params: UnsubscribeRequestParams) -> EmptyResult:
    subscribed.discard(str(params.uri))
    return EmptyResult()


# MCPServer has no decorator for these three: they go to its low-level server.
_lowlevel = server._lowlevel_server
_lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
_lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
_lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)

_listen = _lowlevel.get_request_handler("subscriptions/listen")
assert _listen is not None, "MCPServer serves subscriptions/listen"
_serve_listen = _listen.handler


async def counted_listen(ctx: ServerRequestContext, params: SubscriptionsListenRequestParams) -> Any:
    """The SDK's listen handler, counting the open streams that want each URI."""
    uris = list(params.notifications.resource_subscriptions or ())
    listening.update(uris)
    try:
        return await _serve_listen(ctx, params)
    finally:
        listening.subtract(uris)


_lowlevel.add_request_handler("subscriptions/listen", SubscriptionsListenRequestParams, counted_listen)
