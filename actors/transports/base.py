"""The transport contract.

A transport moves JSON-RPC messages (the frozen classes of
``actors/protocol/messages.py``) between a connection actor and one MCP server. It
owns the framing: it turns the wire's frames into messages and back with a pure codec
(``actors/protocol/ndjson.py`` for stdio, ``http_framing.py`` for HTTP), decoding
each frame once. A frame that does not decode is the codec's ProtocolError, which
ends the connection. Low-level errors (OSError, trio's resource errors, a process exit)
are mapped at the edge into ``actors/transport_errors.py``'s tree. How to add a
transport: "How to add a transport" in ``docs/architecture.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import ClassVar, Protocol

import attrs

from actors.protocol.messages import Message
from actors.spec import ServerSpec


@attrs.frozen(slots=True)
class Abilities:
    """What a transport can do beyond the contract every transport keeps. Declared by
    the transport once, as a class attribute, and read once by whoever uses it; never
    discovered by probing for methods."""

    writes_at_once: bool = False
    """``send_nowait`` writes without waiting (a local pipe): a lone call leaves from
    the task that made it, with no writer task woken. Only stdio: an HTTP request is
    a task of its own anyway."""

    listens: bool = False
    """The transport opens the 2026-07-28 era's ``subscriptions/listen`` itself (HTTP:
    a stream of its own) and hands on its change notifications and the
    acknowledgement of each stream it opens (the connection's later ones say that
    changes may have gone unheard). Without it, the connection sends the request on
    the transport like any other (``actors/connection/listener.py``)."""


class Transport(Protocol):
    """Messages to and from one MCP server (see the module docstring).

    ``send`` and ``receive`` may be called from different tasks, but each from one task
    at a time. What each method raises is listed below; anything else is a bug (the
    connection actor crashes, and its supervisor restarts it).

    Concrete transports subclass this class, so a method an ability leaves out keeps
    its default here.
    """

    abilities: ClassVar[Abilities] = Abilities()

    async def send(self, messages: Sequence[Message]) -> None:
        """Send ``messages``, in order.

        Raises TransportError (TransportClosed, AuthRequired, …): the connection is
        unusable. A transport that sends from tasks of its own (HTTP) reports such
        failures through ``receive`` instead. Raises Unencodable if a message cannot be
        encoded as JSON; then nothing of this call was sent.
        """
        ...

    def send_nowait(self, messages: Sequence[Message]) -> bool:
        """With ``abilities.writes_at_once``: write what can go without waiting; True
        when all of it went. False: the transport keeps the rest and the next ``send``
        writes it first (``send([])`` just that). Never raises for I/O (a failure shows
        at that next ``send``); Unencodable as ``send``. Not while a ``send`` is under
        way: the caller keeps to one writer."""
        raise RuntimeError(f"{type(self).__name__} does not write at once (see its abilities)")

    async def receive(self) -> Sequence[Message]:
        """The next messages (at least one), or ``[]`` at a clean end of stream.

        Raises TransportError (TransportClosed, AuthRequired, …) when the connection
        is unusable, and the codec's ProtocolError for a frame that does not decode
        (the messages before it in the same read were returned first). Either ends
        the connection.
        """
        ...

    async def authenticate(self) -> None:
        """Ready credentials before the handshake (the ``authenticate`` state): a stored
        OAuth token, a refresh, a headless grant. A transport with none to ready
        returns at once. Raises TransportError (AuthRequired with ``needs_login`` when
        only a person can help)."""
        return None

    def stderr_tail(self) -> Sequence[str]:
        """The last lines the server wrote to stderr (redacted); empty for remote
        servers. Never raises."""
        ...

    def describe(self) -> str:
        """One short line for logs: pid, URL, … (never secrets). Never raises."""
        ...


class Connector(Protocol):
    """Opens a transport for a server spec; leaving the context tears it down.

    Entering raises SpawnError (a local server could not be started) or another
    TransportError (a remote one could not be reached or is misconfigured); anything
    else is a bug. Teardown must finish even when the surrounding scope is cancelled
    (it runs shielded, under its own deadline): no process or socket outlives the
    context.
    """

    def __call__(self, spec: ServerSpec) -> AbstractAsyncContextManager[Transport]: ...
