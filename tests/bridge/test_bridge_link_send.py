"""``BridgeLink.send_text`` takes a free send lock without yielding, and stays fair:
frames are written in the order their senders came, a later sender never overtakes
one waiting, and a frame dropped (the socket closed) is still a checkpoint."""

from __future__ import annotations

import trio
import trio.testing

from supervisor.bridge.link import BridgeLink


class _Socket:
    """Records what is written; the first send waits until ``release`` is set."""

    def __init__(self) -> None:
        self.written: list[str] = []
        self.release = trio.Event()

    async def send(self, data: str) -> None:
        if not self.written and data == "a":
            await self.release.wait()
        self.written.append(data)

    async def receive(self) -> str | bytes:
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async def close(self, code: int, reason: str = "") -> None:
        pass


def _link(socket: _Socket) -> BridgeLink:
    link = object.__new__(BridgeLink)  # only the send path: no hub, no tasks
    link.socket = socket
    link._send_lock = trio.Lock()
    link._cut = None
    link._closed = False
    return link


async def test_frames_keep_their_senders_order() -> None:
    socket = _Socket()
    link = _link(socket)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(link.send_text, "a")  # holds the lock inside its send
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(link.send_text, "b")  # waits for the lock
        await trio.testing.wait_all_tasks_blocked()
        socket.release.set()
        await link.send_text("c")  # came last: the lock went to "b" first
    assert socket.written == ["a", "b", "c"]


async def test_a_dropped_frame_is_still_a_checkpoint() -> None:
    socket = _Socket()
    link = _link(socket)
    link._closed = True
    with trio.CancelScope() as scope:
        scope.cancel()
        await link.send_text("x")
    assert scope.cancelled_caught and socket.written == []
