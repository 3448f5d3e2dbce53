"""Dial-out peers on the hub: who offers which server, and the sessions relayed to them.

A ``peer``-role socket registers the servers it exports (``mcp:peer:register``
``{servers: [{name, digest}]}``, the digest a hash of each server's launch config,
``launch_digest``). Two peers that offer one name with different digests are not the
same server: the later registration is refused, naming it. A client's ``open`` for a
server no local ``bridge: true`` entry serves goes to a peer that offers it, the one
with the fewest sessions; the hub chooses the session id and sends the peer
``mcp:session:open {serverName, sessionId}`` (the frame's ``id`` is that session id,
so a refusal without one is matched too). From then on every frame of the session
goes between the client's socket and that peer's, with the hub's session id on both
sides. A relayed session needs no task: it is a record that names both sockets. A
peer that drops has its sessions answered ``mcp:session:close`` (``peer_gone``) at
once; a client that drops has its relayed sessions closed on their peers.

One reader serves every session of a peer, so it never waits on a client: frames
for a client are queued on that client's socket without waiting (``relay``), and a
client that falls too far behind is cut off (``link.py``), not the peer. A peer's
``mcp:error`` for a session (``unknown_session``: it no longer has it) ends that
session on its client (``peer_error``); its other errors reach the client as they
are. Relayed sessions are audited, published and counted by the hub's own records
(``Records``), like its local ones.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from typing import Any, Protocol

import attrs
import orjson
import trio

from actors.log_events import get_logger
from actors.protocol import bridge_envelope as env
from actors.protocol.bridge_envelope import Frame, FrameId
from actors.spec import ServerSpec

log = get_logger("supervisor.bridge")

PEER_GONE = "peer_gone"
PEER_ERROR = "peer_error"
# What a peer may give as a close's reason or a refusal's code; others are recorded
# as ``peer_closed`` / ``peer_refused`` (they become audit values and metric labels).
PEER_REASONS = frozenset(
    {"server_exited", "server_message_too_large", "server_not_reading", "client_closed", "shutdown"}
)
PEER_CODES = frozenset({"not_exported", "spawn_failed", "too_many_processes", "disabled", "unavailable"})


class PeerSocket(Protocol):
    """What the registry uses of a socket (``link.BridgeLink``)."""

    client: str

    async def send(self, frame: Frame) -> None: ...

    def post(self, frame: Frame) -> None: ...

    def relay(self, frame: Frame) -> None:
        """Queue without waiting; a socket too far behind is cut off instead."""


class Records(Protocol):
    """The hub's records of a session (``hub.BridgeHub``): audit rows, events, metrics."""

    def record_opened(self, session: Relayed, peer: str, **fields: Any) -> None: ...

    def record_ended(self, session: Relayed, peer: str, reason: str, *, opened: bool = True) -> None: ...


def launch_digest(spec: ServerSpec) -> str:
    """The hash of what starts the server (command, env, cwd): equal digests, same server."""
    launch = {"command": list(spec.command), "env": dict(spec.env), "cwd": spec.cwd}
    return hashlib.sha256(orjson.dumps(launch, option=orjson.OPT_SORT_KEYS)).hexdigest()


@attrs.define(eq=False)
class Peer:
    socket: PeerSocket
    servers: dict[str, str]  # name -> digest
    born: float
    sessions: set[str] = attrs.field(factory=set)


@attrs.define(eq=False)
class Relayed:
    """One session of a client's socket served by a peer's."""

    id: str
    server: str
    tenant: str
    client: PeerSocket
    peer: Peer
    open_id: FrameId | None
    born: float
    state: str = "starting"
    messages_in: int = 0
    messages_out: int = 0
    person: str | None = None  # who signed in (None: the tenant's name)


class Refused(Exception):
    """An open or a registration the hub will not serve: ``code`` for the other side,
    the text says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class PeerRegistry:
    """Every registered peer and relayed session of one hub."""

    def __init__(self, records: Records) -> None:
        self._records = records
        self._peers: dict[PeerSocket, Peer] = {}
        self.sessions: dict[str, Relayed] = {}

    # ------------------------------------------------------------ registration

    def register(self, socket: PeerSocket, servers: list[Any]) -> list[str]:
        """The names taken (all of them); Refused when one is malformed or conflicts."""
        offered: dict[str, str] = {}
        for item in servers:
            if not (
                isinstance(item, dict)
                and isinstance(item.get("name"), str)
                and isinstance(item.get("digest"), str)
            ):
                raise Refused(env.MALFORMED, "each of data.servers must be {name: string, digest: string}")
            offered[item["name"]] = item["digest"]
        for name, digest in offered.items():
            for other in self._peers.values():
                if other.socket is not socket and other.servers.get(name, digest) != digest:
                    raise Refused(
                        "digest_conflict",
                        f"server {name!r} is offered by another peer with a different launch config "
                        f"(digest {other.servers[name][:12]}…, yours {digest[:12]}…); give it another name",
                    )
        peer = self._peers.get(socket)
        if peer is None:
            self._peers[socket] = Peer(socket, offered, trio.current_time())
        else:
            peer.servers = offered
        return sorted(offered)

    def offers(self, server: str) -> bool:
        return any(server in p.servers for p in self._peers.values())

    def registered(self, socket: PeerSocket) -> bool:
        """Whether ``socket`` is a registered peer (which the hub never closes as idle)."""
        return socket in self._peers

    # ---------------------------------------------------------------- sessions

    def held(self, tenant: str) -> int:
        return sum(1 for s in self.sessions.values() if s.tenant == tenant)

    def open(
        self, client: PeerSocket, tenant: str, server: str, open_id: FrameId | None, person: str | None = None
    ) -> Relayed:
        """A session of ``server`` on its least busy peer; the peer is asked to open it."""
        offering = [p for p in self._peers.values() if server in p.servers]
        if not offering:
            raise Refused("not_exported", f"no server {server!r} is exported through the bridge")
        peer = min(offering, key=lambda p: len(p.sessions))
        session = Relayed(
            secrets.token_urlsafe(12),
            server,
            tenant,
            client,
            peer,
            open_id,
            trio.current_time(),
            person=person,
        )
        self.sessions[session.id] = session
        peer.sessions.add(session.id)
        peer.socket.post(Frame(env.OPEN, {"serverName": server, "sessionId": session.id}, session.id))
        return session

    def of_client(self, client: PeerSocket, sid: str) -> Relayed | None:
        session = self.sessions.get(sid)
        return session if session is not None and session.client is client else None

    async def from_client(self, session: Relayed, frame: Frame) -> None:
        """A client's message or close, passed to the session's peer (waiting while the
        peer's queue is full: nothing is dropped)."""
        if frame.type == env.MESSAGE:
            session.messages_in += 1
            await session.peer.socket.send(env.message(session.id, frame.data["jsonrpc"]))
        else:
            self._end(session, "client_closed")
            session.peer.socket.post(env.session_close(session.id, "client_closed", id=frame.id))
            session.client.post(env.session_close(session.id, "client_closed", id=frame.id))

    def from_peer(self, socket: PeerSocket, frame: Frame) -> None:
        """A peer's answer to an open, message, close or error, passed to the session's
        client without waiting (see the module docstring)."""
        sid = frame.data.get("sessionId") if frame.type != env.OPEN_RESULT or frame.id is None else frame.id
        session = self.sessions.get(sid) if isinstance(sid, str) else None
        if session is None or session.peer.socket is not socket:
            if frame.type == env.ERROR:
                fields = {"peer": socket.client, "code": frame.data["code"], "problem": frame.data["message"]}
                log.warning("bridge: a peer reported an error", extra={"fields": fields})
            return  # else a session the client closed already: nothing to pass on
        if frame.type == env.OPEN_RESULT:
            if "error" in frame.data:
                self._end(session, _known(frame.data["error"], PEER_CODES, "peer_refused"))
                session.client.post(Frame(env.OPEN_RESULT, frame.data, session.open_id))
            else:
                session.state = "open"
                self._records.record_opened(session, socket.client, pid=None)
                session.client.post(env.open_result(session.id, session.open_id))
        elif frame.type == env.MESSAGE:
            session.messages_out += 1
            session.client.relay(env.message(session.id, frame.data["jsonrpc"]))
        elif frame.type == env.CLOSE:
            self._end(session, _known(frame.data, PEER_REASONS, "peer_closed", key="reason"))
            session.client.post(Frame(env.CLOSE, frame.data))
        elif frame.data["code"] == "unknown_session":
            self._end(session, PEER_ERROR)
            text = f"the bridge peer serving {session.server!r} lost the session: {frame.data['message']}"
            session.client.post(_ended(session, PEER_ERROR, text))
        else:
            session.client.relay(frame)  # about a session that lives on (bad_server_output…)

    # ------------------------------------------------------------------- drops

    def gone(self, socket: PeerSocket, reason: str = "socket_closed") -> None:
        """A socket ended (``reason``: why, for the records): as a peer, its sessions are
        closed on their clients; as a client, its sessions are closed on their peers."""
        peer = self._peers.pop(socket, None)
        for session in list(self.sessions.values()):
            if peer is not None and session.peer is peer:
                self._end(session, PEER_GONE)
                text = f"the bridge peer serving {session.server!r} disconnected"
                session.client.post(_ended(session, PEER_GONE, text))
            elif session.client is socket:
                self._end(session, reason)
                session.peer.socket.post(env.session_close(session.id, "client_gone"))

    def _end(self, session: Relayed, reason: str) -> None:
        """Forget the session and record its end (its open's refusal if it never opened)."""
        if self.sessions.pop(session.id, None) is None:
            return
        session.peer.sessions.discard(session.id)
        opened = session.state != "starting"
        self._records.record_ended(session, session.peer.socket.client, reason, opened=opened)

    def session_listing(self, scope: str | None) -> list[dict[str, Any]]:
        """Relayed sessions in the shape of ``GET /v1/bridge/sessions`` (``pid`` None:
        the process is the peer's)."""
        now = trio.current_time()
        return [
            {
                "session_id": s.id,
                "server": s.server,
                "tenant": s.tenant,
                "peer": s.peer.socket.client,
                "client": s.client.client,
                "age_s": round(now - s.born, 3),
                "messages_in": s.messages_in,
                "messages_out": s.messages_out,
                "pid": None,
                "state": s.state,
            }
            for s in self.sessions.values()
            if scope is None or s.tenant == scope
        ]

    def listing(self) -> list[dict[str, Any]]:
        now = trio.current_time()
        return [
            {
                "peer": p.socket.client,
                "servers": [{"name": n, "digest": d} for n, d in sorted(p.servers.items())],
                "sessions": len(p.sessions),
                "age_s": round(now - p.born, 3),
            }
            for p in self._peers.values()
        ]


def _ended(session: Relayed, reason: str, text: str) -> Frame:
    """What the client is told when a relayed session ends without it asking."""
    if session.state == "starting":
        return env.open_failed(reason, text, session.open_id)
    return env.session_close(session.id, reason, text)


def _known(data: Any, allowed: frozenset[str], fallback: str, key: str = "code") -> str:
    """``data[key]`` if it is one of ``allowed`` (a peer's word is untrusted), else ``fallback``."""
    value = data.get(key) if isinstance(data, Mapping) else None
    return value if isinstance(value, str) and value in allowed else fallback
