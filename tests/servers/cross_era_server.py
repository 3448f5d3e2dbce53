"""An SDK 2.x server that asks, logs and updates in both protocol eras, for the
gateway's cross-era matrix (tests/end_to_end/test_cross_era_matrix.py).

Every answer names the caller it was made for, so a request or a notification that
reached the wrong client shows. Tools (each takes ``caller``):

- ``interview``: asks the client's model (sampling), the person (elicitation) and
  the roots, through the SDK's resolvers: real requests mid-call in the handshake
  era, an input-required result in the 2026-07-28 era; answers what came back.
- ``chatter``: logs ``<caller> <level>`` at debug, info, warning and error, on the
  call's own stream.
- ``touch``: says ``cross://<caller>`` was updated, to ``resources/subscribe``
  subscribers (handshake era) and ``subscriptions/listen`` streams (2026-07-28).

Resources ``cross://<name>`` read ``<name> v<n>``. ``--http PORT`` serves Streamable
HTTP at ``http://127.0.0.1:PORT/mcp`` (both eras), else stdio.
"""

from __future__ import annotations

import argparse
import warnings
from collections import Counter
from typing import Annotated, Any

from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample
from mcp.types import (
    CreateMessageResult,
    EmptyResult,
    ListRootsResult,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    UnsubscribeRequestParams,
)
from pydantic import BaseModel

server = MCPServer("cross-era")
versions: Counter[str] = Counter()
subscribers: dict[str, set[Any]] = {}  # uri -> handshake-era sessions that subscribed
levels: dict[str | None, str] = {}  # Mcp-Session-Id (None: stdio) -> its logging/setLevel
LEVELS = ("debug", "info", "notice", "warning", "error")


def session_of(request: Any) -> str | None:
    """The handshake-era session a request belongs to: the SDK gives each request a
    session object of its own, so the HTTP session id is the key (stdio: one)."""
    headers = getattr(request, "headers", None)
    return None if headers is None else headers.get("mcp-session-id")


class Confirm(BaseModel):
    name: str


def ask_model(caller: str) -> Sample:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=f"who is {caller}?"))
    return Sample([message], max_tokens=32)


def ask_person(caller: str) -> Elicit[Confirm]:
    return Elicit(f"confirm {caller}", Confirm)


def ask_roots() -> ListRoots:
    return ListRoots()


@server.tool()
async def interview(
    caller: str,
    said: Annotated[CreateMessageResult, Resolve(ask_model)],
    confirmed: Annotated[Confirm, Resolve(ask_person)],
    roots: Annotated[ListRootsResult, Resolve(ask_roots)],
) -> str:
    """Ask the model, the person and the roots for ``caller``; say what came back."""
    text = said.content.text if isinstance(said.content, TextContent) else "?"
    names = ",".join(root.name or str(root.uri) for root in roots.roots)
    return f"for {caller}: model={text} person={confirmed.name} roots={names}"


@server.tool()
async def chatter(caller: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Log ``<caller> <level>`` at four levels on this call's stream: in the handshake
    era at or above the session's ``logging/setLevel`` (the server's job in that era);
    in 2026-07-28 the SDK keeps to the request's own level."""
    floor = LEVELS.index(levels.get(session_of(ctx.request_context.request), "debug"))
    with warnings.catch_warnings():  # deprecated by the 2026-07-28 era, still carried
        warnings.simplefilter("ignore")
        for level in ("debug", "info", "warning", "error"):
            if LEVELS.index(level) >= floor:
                await ctx.log(level, f"{caller} {level}")
    return f"chattered for {caller}"


@server.tool()
async def touch(caller: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Update ``cross://<caller>`` and say so to whoever subscribed to it."""
    uri = f"cross://{caller}"
    versions[caller] += 1
    await ctx.notify_resource_updated(uri)  # 2026-07-28: the listen streams
    for session in list(subscribers.get(uri, ())):  # handshake era: the subscribers
        await session.send_resource_updated(uri)
    return f"touched {uri}"


@server.resource("cross://{name}")
def cross(name: str) -> str:
    """One caller's resource."""
    return f"{name} v{versions[name]}"


async def set_level(ctx: ServerRequestContext, params: SetLevelRequestParams) -> EmptyResult:
    levels[session_of(ctx.request)] = params.level
    return EmptyResult()


async def subscribe(ctx: ServerRequestContext, params: SubscribeRequestParams) -> EmptyResult:
    subscribers.setdefault(str(params.uri), set()).add(ctx.session)
    return EmptyResult()


async def unsubscribe(ctx: ServerRequestContext, params: UnsubscribeRequestParams) -> EmptyResult:
    subscribers.get(str(params.uri), set()).discard(ctx.session)
    return EmptyResult()


_lowlevel = server._lowlevel_server  # MCPServer has no decorator for these three
_lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
_lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
_lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--http", type=int, metavar="PORT", help="serve Streamable HTTP on 127.0.0.1:PORT/mcp"
    )
    args = parser.parse_args()
    if args.http is None:
        server.run()
    else:
        server.run("streamable-http", port=args.http)


if __name__ == "__main__":
    main()
