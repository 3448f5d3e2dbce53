"""The admin API's listening socket holds a burst of connections until it accepts them."""

from __future__ import annotations

import selectors
import socket
import time

from supervisor.server.serving import LISTEN_BACKLOG, listen

BURST = 300  # three times Hypercorn's default backlog, well under ours


def test_a_burst_of_connections_is_held_until_accepted() -> None:
    """Nobody accepts here: every connect completes only if the kernel's queue holds it
    (with Hypercorn's default of 100, the SYNs past 101 are dropped and retried a second later)."""
    assert LISTEN_BACKLOG >= BURST
    with listen("127.0.0.1:0") as listener, selectors.DefaultSelector() as selector:
        address = listener.getsockname()
        clients = [socket.socket() for _ in range(BURST)]
        try:
            for client in clients:
                client.setblocking(False)
                client.connect_ex(address)
                selector.register(client, selectors.EVENT_WRITE)
            connected = 0
            deadline = time.monotonic() + 0.5  # a dropped SYN is retried after 1 s
            while connected < BURST and (left := deadline - time.monotonic()) > 0:
                for key, _ in selector.select(left):
                    selector.unregister(key.fileobj)
                    assert isinstance(key.fileobj, socket.socket)
                    if key.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                        connected += 1
            assert connected == BURST
        finally:
            for client in clients:
                client.close()
