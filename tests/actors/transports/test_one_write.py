"""A remote server's requests leave in one write (``actors/transports/one_write.py``):
held until the message ends or a read begins, sent whole, with httpcore's own errors;
and the client a remote transport makes uses it, the bytes on the wire unchanged."""

from __future__ import annotations

from functools import partial

import httpcore2
import pytest
import trio
import trio.testing
from httpcore2._backends.trio import TrioStream

from actors.spec import ServerSpec
from actors.transports.http_link import new_client
from actors.transports.one_write import OneWriteBackend, OneWriteStream

HEAD = b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n"


class _Socket(trio.abc.Stream):
    """A Trio stream that records each ``send_all`` and answers reads from a list."""

    def __init__(self, answers: list[bytes | type[Exception]] | None = None) -> None:
        self.sent: list[bytes] = []
        self.answers = list(answers or [])
        self.send_error: type[Exception] | None = None

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint()
        if self.send_error is not None:
            raise self.send_error()
        self.sent.append(bytes(data))

    async def wait_send_all_might_not_block(self) -> None:  # pragma: no cover - unused
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if not self.answers:
            await trio.sleep_forever()
        answer = self.answers.pop(0)
        if isinstance(answer, bytes):
            await trio.lowlevel.checkpoint()
            return answer
        raise answer()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def test_a_request_leaves_in_one_write_at_the_end_of_its_message() -> None:
    socket = _Socket([b"HTTP/1.1 200 OK\r\n"])
    stream = OneWriteStream(TrioStream(socket))
    await stream.write(HEAD, timeout=5.0)
    await stream.write(b"{}", timeout=5.0)
    assert socket.sent == []  # held: the message has not ended
    await stream.write(b"", timeout=5.0)  # h11's end of a Content-Length body
    assert socket.sent == [HEAD + b"{}"]
    assert await stream.read(65536) == b"HTTP/1.1 200 OK\r\n"


async def test_what_is_held_leaves_before_any_read() -> None:
    socket = _Socket([b"HTTP/1.1 200 OK\r\n"])
    stream = OneWriteStream(TrioStream(socket))
    await stream.write(HEAD + b"2\r\n{}\r\n0\r\n\r\n")  # a chunked body ends with no empty write
    assert await stream.read(65536, timeout=5.0) == b"HTTP/1.1 200 OK\r\n"
    assert socket.sent == [HEAD + b"2\r\n{}\r\n0\r\n\r\n"]


async def test_failures_are_httpcores_own(autojump_clock: trio.testing.MockClock) -> None:
    socket = _Socket([trio.BrokenResourceError, trio.ClosedResourceError])
    stream = OneWriteStream(TrioStream(socket))
    with pytest.raises(httpcore2.ReadError):
        await stream.read(10)
    with pytest.raises(httpcore2.ReadError):
        await stream.read(10, timeout=5.0)
    with pytest.raises(httpcore2.ReadTimeout):
        await stream.read(10, timeout=5.0)  # nothing more comes
    socket.send_error = trio.BrokenResourceError
    await stream.write(HEAD)
    with pytest.raises(httpcore2.WriteError):
        await stream.write(b"")


async def test_a_stream_not_of_trio_is_written_through_its_own_methods() -> None:
    written: list[bytes] = []

    class Other(httpcore2.AsyncNetworkStream):
        async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
            written.append(buffer)

        async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
            return b"answer"

    stream = OneWriteStream(Other())
    await stream.write(HEAD)
    await stream.write(b"{}")
    assert await stream.read(10) == b"answer"
    assert written == [HEAD + b"{}"]


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
        pool = client._transport._pool  # type: ignore[attr-defined]
        assert isinstance(pool._network_backend, OneWriteBackend), "httpx's pool changed: see one_write.py"
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
