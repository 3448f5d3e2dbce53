"""One exchange of a plain ASGI app (``supervisor/web/exchange.py``), on virtual time:
the body timeout, a client's hang-up, a handler that fails."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from supervisor.web.exchange import BodyTimeout, Request, exchange
from supervisor.web.http import Headers, Response, json_response

SCOPE: dict[str, Any] = {"type": "http", "method": "POST", "path": "/x", "headers": []}


class Client:
    """The ASGI side of one client: what it sends, and what it was sent."""

    def __init__(self, *messages: dict[str, Any]) -> None:
        self.inbox: list[dict[str, Any]] = list(messages)
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        if self.inbox:
            return self.inbox.pop(0)
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int | None:
        return self.sent[0]["status"] if self.sent else None


async def read_all(request: Request) -> Response:
    data = b""
    try:
        async for chunk in request.body:
            data += chunk
    except BodyTimeout as exc:
        return json_response({"timeout": str(exc)}, 408)
    return json_response({"read": data.decode()})


async def run(client: Client, handler: Any = read_all, **how: Any) -> None:
    await exchange(
        SCOPE,
        client.receive,
        client.send,
        handler,
        headers=Headers([]),
        on_error=lambda: Response(500),
        **how,
    )


async def test_a_body_in_pieces_is_read_whole(autojump_clock: trio.testing.MockClock) -> None:
    client = Client(
        {"type": "http.request", "body": b"ab", "more_body": True},
        {"type": "http.request", "body": b"c", "more_body": False},
    )
    await run(client)
    assert client.status == 200 and client.sent[1]["body"] == b'{"read":"abc"}'


async def test_a_body_that_never_ends_times_out(autojump_clock: trio.testing.MockClock) -> None:
    client = Client({"type": "http.request", "body": b"ab", "more_body": True})
    began = trio.current_time()
    with trio.fail_after(60):  # without the body timeout it would wait for ever
        await run(client, body_timeout_s=30.0)
    assert client.status == 408 and trio.current_time() - began == 30.0
    assert b"did not arrive within 30 s" in client.sent[1]["body"]


async def test_a_hang_up_cancels_the_handler_and_sends_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cancelled = []

    async def slow(request: Request) -> Response:
        try:
            await trio.sleep(100)
        except trio.Cancelled:
            cancelled.append(True)
            raise
        return Response(200)

    client = Client({"type": "http.request", "body": b"", "more_body": False}, {"type": "http.disconnect"})
    with trio.fail_after(5):
        await run(client, slow)
    assert cancelled == [True] and client.sent == []


async def test_a_handler_that_fails_gets_the_last_resort_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def broken(request: Request) -> Response:
        raise RuntimeError("a bug")

    client = Client({"type": "http.request", "body": b"", "more_body": False})
    await run(client, broken)
    assert client.status == 500
