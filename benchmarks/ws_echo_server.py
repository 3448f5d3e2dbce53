"""WebSocket echo servers for ``bench_bridge.py``'s floor: what the web stack alone
costs a round trip, with no bridge, no envelope and no child process.

    python benchmarks/ws_echo_server.py quart PORT            # Quart-Trio on Hypercorn, as serve
    python benchmarks/ws_echo_server.py hypercorn PORT        # a bare ASGI app on Hypercorn
    python benchmarks/ws_echo_server.py trio-websocket PORT   # trio-websocket's own server

Each echoes every text message on ``/echo``; Hypercorn pings each socket as ``serve``
does (20 s). The Quart handler reads and writes through ``websocket`` (as the bridge
did before ``supervisor/bridge/asgi_app.py``); the bare ASGI app reads ``receive``
and writes ``send`` as that front does.
"""

from __future__ import annotations

import sys
from typing import Any

import trio


async def quart(port: int) -> None:
    from hypercorn.trio import serve
    from quart import websocket
    from quart_trio import QuartTrio

    app = QuartTrio("echo")

    @app.websocket("/echo")
    async def echo() -> None:
        await websocket.accept()
        while True:
            await websocket.send(await websocket.receive())

    await serve(app, hypercorn_config(port))  # type: ignore[arg-type]


def hypercorn_config(port: int) -> Any:
    from hypercorn.config import Config

    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    config.websocket_ping_interval = 20.0
    return config


async def asgi(port: int) -> None:
    from hypercorn.trio import serve

    async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        while (message := await receive())["type"] == "websocket.receive":
            await send({"type": "websocket.send", "text": message["text"]})

    await serve(echo, hypercorn_config(port))  # type: ignore[arg-type]


async def plain(port: int) -> None:
    from trio_websocket import ConnectionClosed, WebSocketRequest, serve_websocket

    async def handler(request: WebSocketRequest) -> None:
        ws = await request.accept()
        try:
            while True:
                await ws.send_message(await ws.get_message())
        except ConnectionClosed:
            pass  # (uncaught, it would end the whole server)

    await serve_websocket(handler, "127.0.0.1", port, ssl_context=None)


if __name__ == "__main__":
    stack, port = sys.argv[1], int(sys.argv[2])
    trio.run({"quart": quart, "hypercorn": asgi}.get(stack, plain), port)
