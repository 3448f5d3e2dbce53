"""``read_some``: the stdio transport's pipe read (read first, wait only when empty)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

from actors.transports.pipes import WriterGone, read_some


@pytest.fixture
async def pipe() -> AsyncIterator[tuple[trio.lowlevel.FdStream, int]]:
    """The read end as a trio stream, the write end as a plain descriptor."""
    read_fd, write_fd = os.pipe()
    stream = trio.lowlevel.FdStream(read_fd)
    try:
        yield stream, write_fd
    finally:
        await stream.aclose()
        os.close(write_fd)


async def test_data_already_in_the_pipe_is_returned(pipe: tuple[trio.lowlevel.FdStream, int]) -> None:
    stream, write_fd = pipe
    os.write(write_fd, b"hello\n")
    assert await read_some(stream, 1024) == b"hello\n"


async def test_a_read_that_found_data_is_still_a_checkpoint(
    pipe: tuple[trio.lowlevel.FdStream, int],
) -> None:
    stream, write_fd = pipe
    os.write(write_fd, b"x")
    with trio.CancelScope() as scope:
        scope.cancel()
        await read_some(stream, 1024)  # must raise Cancelled: a busy pipe cannot starve others
    assert scope.cancelled_caught


async def test_an_empty_pipe_waits_for_data(pipe: tuple[trio.lowlevel.FdStream, int]) -> None:
    stream, write_fd = pipe
    got: list[bytes] = []

    async def reader() -> None:
        got.append(await read_some(stream, 1024))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        assert got == []
        os.write(write_fd, b"late")
    assert got == [b"late"]


async def test_eof_is_empty_bytes() -> None:
    read_fd, write_fd = os.pipe()
    os.close(write_fd)
    stream = trio.lowlevel.FdStream(read_fd)
    async with stream:
        assert await read_some(stream, 1024) == b""


async def test_closing_the_stream_while_waiting_ends_the_read(
    pipe: tuple[trio.lowlevel.FdStream, int],
) -> None:
    stream, _ = pipe
    failures: list[BaseException] = []

    async def reader() -> None:
        try:
            await read_some(stream, 1024)
        except trio.ClosedResourceError as exc:
            failures.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        await stream.aclose()
    assert len(failures) == 1


async def test_a_closed_stream_is_never_read(pipe: tuple[trio.lowlevel.FdStream, int]) -> None:
    stream, write_fd = pipe
    os.write(write_fd, b"x")
    await stream.aclose()
    with pytest.raises(trio.ClosedResourceError):
        await read_some(stream, 1024)


async def test_other_streams_use_their_own_receive_some() -> None:
    send, receive = trio.testing.memory_stream_pair()
    await send.send_all(b"abc")
    assert await read_some(receive, 1024) == b"abc"


async def test_the_writers_exit_ends_a_waiting_read_though_the_pipe_stays_open(
    pipe: tuple[trio.lowlevel.FdStream, int],
) -> None:
    """The write end stays open (a daemonized grandchild holds it): no EOF will come."""
    stream, _ = pipe
    gone = WriterGone()
    got: list[bytes] = []

    async def reader() -> None:
        got.append(await read_some(stream, 1024, gone))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        gone.set()
    assert got == [b""]


async def test_what_the_writer_said_before_it_went_is_still_read(
    pipe: tuple[trio.lowlevel.FdStream, int],
) -> None:
    stream, write_fd = pipe
    os.write(write_fd, b"last words")
    gone = WriterGone()
    gone.set()
    assert await read_some(stream, 1024, gone) == b"last words"
    assert await read_some(stream, 1024, gone) == b""
