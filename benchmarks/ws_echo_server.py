"""WebSocket echo servers for ``bench_bridge.py``'s floor: what the web stack alone
costs a round trip, with no bridge, no envelope and no child process.

    python benchmarks/ws_echo_server.py quart PORT            # Quart-Trio on Hypercorn, as serve
    python benchmarks/ws_echo_server.py trio-websocket PORT   # trio-websocket's own server

Both echo every text message on ``/echo``; Hypercorn pings each socket as ``serve``
does (20 s), and the Quart handler reads and writes through ``websocket`` as
``supervisor/bridge/link.py`` does.
"""

from __future__ import annotations

import sys

import trio


async def quart(port: int) -> None:
    from hypercorn.config import Config
    from hypercorn.trio import serve
    from quart import websocket
    from quart_trio import QuartTrio

    app = QuartTrio("echo")

    @app.websocket("/echo")
    async def echo() -> None:
        await websocket.accept()
        while True:
            await websocket.send(await websocket.receive())

    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    config.websocket_ping_interval = 20.0
    await serve(app, config)  # type: ignore[arg-type]


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
    trio.run(quart if stack == "quart" else plain, port)
