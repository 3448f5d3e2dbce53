"""HTTP servers as processes of their own, for tests that need a real remote peer
(one they can SIGKILL): a free loopback port, and a process run until it listens."""

from __future__ import annotations

import functools
import socket
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import IO

import pytest
import trio

START_S = 20.0


def free_port() -> int:
    """A loopback port for a server that is told its port (it cannot report the one it
    bound); the tiny race with other binders is acceptable in tests."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@asynccontextmanager
async def listening_process(
    command: Sequence[str],
    port: int,
    what: str,
    env: Mapping[str, str] | None = None,
    stderr: IO[bytes] | int = subprocess.DEVNULL,
) -> AsyncIterator[trio.Process]:
    """Run ``command`` for the block, from the moment it accepts connections on
    ``port``; fails the test (naming ``what``) if it exits first. Leaving the block
    terminates (then kills) and reaps it, unless the test already killed it. Its stderr
    goes to ``stderr`` (a file, for a test that reads its log)."""
    run = functools.partial(
        trio.run_process,
        list(command),
        env=env,
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    async with trio.open_nursery() as nursery:
        process: trio.Process = await nursery.start(run)
        with trio.fail_after(START_S):
            while True:
                try:
                    await (await trio.open_tcp_stream("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    if process.returncode is not None:
                        pytest.fail(f"{what} exited with status {process.returncode}")
                    await trio.sleep(0.05)
        try:
            yield process
        finally:
            nursery.cancel_scope.cancel()
