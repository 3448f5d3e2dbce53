"""The wrappers of Hypercorn's private methods (``supervisor/server/hypercorn_patches.py``):
each wrapped attribute exists in the Hypercorn installed, so an upgrade that renames one
fails here, loudly, before a user meets Hypercorn's behaviour where ours was meant."""

from __future__ import annotations

from importlib.metadata import version

import h11
import pytest
from hypercorn.config import Config as HypercornConfig
from hypercorn.events import RawData
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.protocol.ws_stream import WSStream
from hypercorn.trio.tcp_server import TCPServer

from supervisor.server import hypercorn_patches
from supervisor.server.hypercorn_patches import PATCHED, ServeConfig, install_all


@pytest.mark.parametrize(("owner", "name"), PATCHED, ids=[f"{o.__name__}.{n}" for o, n in PATCHED])
def test_every_patched_attribute_exists(owner: type, name: str) -> None:
    assert callable(getattr(owner, name, None)), (
        f"hypercorn {version('hypercorn')} has no {owner.__name__}.{name}: "
        "supervisor/server/hypercorn_patches.py needs a look before the pin moves"
    )


def test_install_all_wraps_each_once() -> None:
    install_all()
    wrapped = {name: getattr(owner, name) for owner, name in PATCHED}
    install_all()
    assert {name: getattr(owner, name) for owner, name in PATCHED} == wrapped
    assert all(getattr(method, hypercorn_patches._MARK) for method in wrapped.values())
    assert {H11Protocol, WSStream, TCPServer} == {owner for owner, _ in PATCHED}


def test_a_missing_attribute_is_skipped_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(hypercorn_patches, "PATCHED", ((WSStream, "_renamed_in_a_later_release"),))
    install_all()
    assert "WSStream._renamed_in_a_later_release" in caplog.text
    assert not hasattr(WSStream, "_renamed_in_a_later_release")


class _Protocol:
    """What ``H11Protocol._send_h11_event`` uses of its protocol: a config, an h11
    connection that has read a request, and ``send`` (here, every write kept)."""

    def __init__(self, config: HypercornConfig) -> None:
        install_all()
        self.config = config
        self.connection = h11.Connection(h11.SERVER)
        self.connection.receive_data(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert isinstance(self.connection.next_event(), h11.Request)
        self.writes: list[bytes] = []

    async def send(self, event: RawData) -> None:
        self.writes.append(event.data)

    async def answer(self, head: list[tuple[str, str]], chunks: list[bytes]) -> None:
        await H11Protocol._send_h11_event(self, h11.Response(status_code=200, headers=head))  # type: ignore[arg-type]
        for chunk in chunks:
            await H11Protocol._send_h11_event(self, h11.Data(data=chunk))  # type: ignore[arg-type]
        await H11Protocol._send_h11_event(self, h11.EndOfMessage())  # type: ignore[arg-type]


async def test_a_sized_answer_is_one_write_and_a_stream_head_goes_at_once() -> None:
    sized = _Protocol(ServeConfig())
    await sized.answer([("Content-Length", "5")], [b"hello"])
    assert len(sized.writes) == 1
    assert sized.writes[0].startswith(b"HTTP/1.1 200 \r\nContent-Length: 5\r\n")
    assert sized.writes[0].endswith(b"\r\n\r\nhello")

    stream = _Protocol(ServeConfig())  # no length: its head is written before any event
    head = h11.Response(status_code=200, headers=[("Content-Type", "text/event-stream")])
    await H11Protocol._send_h11_event(stream, head)  # type: ignore[arg-type]
    assert len(stream.writes) == 1 and stream.writes[0].startswith(b"HTTP/1.1 200 \r\n")
    assert b"Transfer-Encoding: chunked" in stream.writes[0]


async def test_another_servers_answer_is_written_as_hypercorn_writes_it() -> None:
    theirs = _Protocol(HypercornConfig())
    await theirs.answer([("Content-Length", "5")], [b"hello"])
    assert [len(write) > 0 for write in theirs.writes] == [True, True, False]
