"""A remote server's requests on the wire: the client a remote transport makes sends each
request's head and body as httpx made them (pinned before they are sent in one write)."""

from __future__ import annotations

from functools import partial

import trio

from actors.spec import ServerSpec
from actors.transports.http_link import new_client


async def test_a_remote_servers_client_sends_each_request_whole_and_unchanged() -> None:
    received: list[bytes] = []
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"

    async def serve(conn: trio.SocketStream) -> None:
        data = b""
        while not data.endswith(b"{}"):
            data += await conn.receive_some(65536)
        received.append(data)
        await conn.send_all(answer)
        await conn.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        url = f"http://127.0.0.1:{port}/mcp"
        spec = ServerSpec(name="r", type="remote", url=url, headers={"X-Team": "a"})
        client = new_client(spec)
        encodings = client.headers["Accept-Encoding"]  # httpx's, by the decoders installed
        async with client:
            response = await client.post(url, content=b"{}", headers={"Mcp-Method": "tools/call"})
        assert response.status_code == 200 and response.content == b"{}"
        nursery.cancel_scope.cancel()
    assert received == [
        b"POST /mcp HTTP/1.1\r\n"
        + f"Host: 127.0.0.1:{port}\r\n".encode()
        + f"Accept: */*\r\nAccept-Encoding: {encodings}\r\nConnection: keep-alive\r\n".encode()
        + b"User-Agent: trio-mcp-supervisor\r\nX-Team: a\r\nMcp-Method: tools/call\r\n"
        b"Content-Length: 2\r\n\r\n{}"
    ]
