"""``serve``: Hypercorn serving the admin API, ``/mcp`` and ``/v1/bridge`` inside the
caller's nursery, and the drain that ends them.

The apps it serves are composed by ``apps.py``, behind one mount table.

Lifetimes nest like Hypercorn's own (lifespan ⊃ server ⊃ trigger): our task owns a
*shielded* scope that holds the hosted sessions and, inside them, Hypercorn. The
shield is the point: when the caller's nursery is cancelled (SIGTERM), cancelling
Hypercorn outright would cut every connection mid-answer. Instead the caller's
cancellation lands in ``serve``'s own wait, which then begins a graceful drain: live
event streams end and Hypercorn's shutdown trigger fires (it stops accepting and lets
requests in progress finish within ``graceful_timeout``). Calls still running after
``CALL_GRACE_S`` are cancelled and approvals still pending are denied, so every
caller gets an answer (a stream its ``result`` and ``done``) before Hypercorn's
deadline cuts connections; then the hosted sessions close (their private servers
stop). A deadline on the shielded scope bounds all of it, so shutdown can never hang
here. The drain begins by saying so: ``GET /v1/ready`` answers 503 from then on, and a
replica's heartbeat row is written as ``draining`` (within its TTL) before Hypercorn
stops accepting, so load balancers and the other replicas send it nothing new.

Binding comes first: ``listen`` binds and listens before anything starts (the CLI's
``serve`` calls it before the supervisor starts a single server), so an address in
use fails the start at once with one line naming it. Readiness:
``task_status.started(url)`` with the real bound address (port 0 becomes the port the
kernel chose). Access logs are off; Hypercorn's own warnings and errors go through our
structured (redacted) logging, never a request's headers.
"""

from __future__ import annotations

import logging
import socket
from functools import partial
from typing import TYPE_CHECKING

import trio
from hypercorn.config import Sockets
from hypercorn.trio.run import worker_serve
from hypercorn.utils import wrap_app

from actors.log_events import get_logger
from supervisor.admin.app import admin_api
from supervisor.gateway.roaming import roaming
from supervisor.gateway.tenant_sharing import tenant_sharing
from supervisor.server.apps import compose
from supervisor.server.hypercorn_patches import ServeConfig, install_all
from supervisor.settings.net import bind_is_loopback
from supervisor.settings.signin import SigninSettings

if TYPE_CHECKING:
    from supervisor.cluster.heartbeats import Heartbeats
    from supervisor.gateway.http_sessions import GatewaySessions
    from supervisor.service import Supervisor

log = get_logger("supervisor.admin")

GRACEFUL_TIMEOUT_S = 5.0
# Into the drain: calls still running are cancelled, then (a second later) cut.
CALL_GRACE_S = 3.0
CUT_AFTER_S = 1.0
# Beyond Hypercorn's own drain: hosted sessions closing, and a margin.
DRAIN_DEADLINE_S = GRACEFUL_TIMEOUT_S + 12.0
# Connections the kernel holds for us before we accept them. Hypercorn's 100 is too
# few for a burst (500 bridge clients connecting at once): the rest see their SYN
# dropped and wait a second or more to retry. The kernel caps it at net.core.somaxconn.
LISTEN_BACKLOG = 1024

# Hypercorn logs "Running on … (CTRL + C to quit)" at info; we log our own line.
_hypercorn_log = get_logger("supervisor.admin.hypercorn")
_hypercorn_log.setLevel(logging.WARNING)


def hypercorn_config(bind: str) -> ServeConfig:
    """Hypercorn settings of ``serve``, with Hypercorn's wrappers installed."""
    install_all()
    config = ServeConfig()
    config.bind = [bind]
    config.accesslog = None
    config.errorlog = _hypercorn_log
    config.graceful_timeout = GRACEFUL_TIMEOUT_S
    config.include_server_header = False
    config.keep_alive_timeout = 5.0
    config.backlog = LISTEN_BACKLOG
    return config


class BindError(Exception):
    """The server cannot listen on its address (in use, not ours, not resolvable)."""


def listen(bind: str) -> socket.socket:
    """A socket listening on ``bind``, or ``BindError`` naming the address and the
    fix. Called before the servers start, so a taken port costs nothing."""
    config = hypercorn_config(bind)
    try:
        (sock,) = config.create_sockets().insecure_sockets
        sock.listen(config.backlog)
    except OSError as error:
        reason = error.strerror or str(error)
        raise BindError(
            f"the admin API cannot listen on {bind}: {reason}; is another mcp-supervisor running "
            "there? choose another address with --bind (or admin.bind in the config)"
        ) from None
    return sock


class Server:
    """The apps of one ``serve``, composed; ``stop`` turns cancellation into a drain."""

    def __init__(self, supervisor: Supervisor, bind: str, listener: socket.socket) -> None:
        self.apps = compose(supervisor, bind_is_loopback=bind_is_loopback(bind))
        self.config = hypercorn_config(bind)
        # The bridge's heartbeats are Hypercorn's pings. A frame over the bridge's bound
        # is answered mcp:error by the hub, so Hypercorn's own bound (which closes the
        # socket) sits well above it.
        self.config.websocket_ping_interval = supervisor.config.bridge.heartbeat_s
        frame_cap = max(self.config.websocket_max_message_size, 2 * self.apps.bridge.max_message_bytes)
        self.config.websocket_max_message_size = frame_cap
        self.listener = listener
        self.supervisor = supervisor
        self.call_grace_s = CALL_GRACE_S
        if (cluster := supervisor.config.cluster) is not None:  # a replica's calls may finish
            self.call_grace_s = cluster.drain_s
            self.config.graceful_timeout = max(GRACEFUL_TIMEOUT_S, cluster.drain_s + 2 * CUT_AFTER_S)
        self.heartbeats = supervisor.heartbeats
        if self.heartbeats is not None:
            count_gateway(self.heartbeats, self.apps.gateway)
        self.shutdown = trio.Event()
        self.scope = trio.CancelScope(shield=True)

    def stop(self) -> None:
        """Begin the graceful drain, bounded by ``DRAIN_DEADLINE_S`` from now."""
        admin_api(self.apps.admin).draining = True  # GET /v1/ready: 503 from now on
        admin_api(self.apps.admin).feeds.close()
        self.apps.gateway.close_streams()
        self.apps.bridge.close_all()
        self.shutdown.set()
        longer = self.call_grace_s - CALL_GRACE_S
        self.scope.deadline = min(self.scope.deadline, trio.current_time() + DRAIN_DEADLINE_S + longer)

    async def run(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        with self.scope:
            sharing = tenant_sharing(self.supervisor, self.apps.new_era.tenants)
            async with roaming(self.supervisor, self.apps.gateway), sharing, trio.open_nursery() as sessions:
                await sessions.start(self.apps.hosted.run)
                await sessions.start(self.apps.gateway.run)
                await sessions.start(self.apps.new_era.run)
                sessions.start_soon(self._wind_down_calls)
                async with trio.open_nursery() as server:
                    # hypercorn.trio.serve, with the socket bound beforehand.
                    binds: list[str] = await server.start(
                        partial(
                            worker_serve,
                            wrap_app(self.apps.app, self.config.wsgi_max_body_size, None),
                            self.config,
                            sockets=Sockets([], [self.listener], []),
                            shutdown_trigger=self.shutdown.wait,
                        )
                    )
                    task_status.started(binds[0])
                # Hypercorn has drained (or hit its deadline): now close the sessions.
                sessions.cancel_scope.cancel()

    async def _wind_down_calls(self) -> None:
        await self.shutdown.wait()
        api, gateway = admin_api(self.apps.admin), self.apps.gateway
        if gateway.roaming is None:
            await trio.sleep(CALL_GRACE_S)
        else:  # a replica hands each session over once its calls are done, within the grace
            with trio.move_on_after(self.call_grace_s):
                await gateway.hand_over()
        api.cancel_calls()
        gateway.end_all()
        await trio.sleep(CUT_AFTER_S)
        api.cut_streams()


def drain_notice_s(supervisor: Supervisor) -> float:
    """How long a draining replica still accepts connections (``cluster.drain_notice_s``)."""
    cluster = supervisor.config.cluster
    return 0.0 if cluster is None else cluster.drain_notice_s


def count_gateway(heartbeats: Heartbeats, gateway: GatewaySessions) -> None:
    """Let the heartbeat row count the gateway's sessions and the requests they answer."""
    heartbeats.sessions = lambda: len(gateway.listing(None))
    heartbeats.in_flight = lambda: sum(record.peer.core.in_flight for record in gateway.listing(None))


def sign_in_base(url: str, signin: SigninSettings | None) -> str:
    """Where people's browsers come back to after signing in to a ``per_user`` server
    (``GET /v1/oauth/callback`` under it): the public ``signin.resource`` when sign-in
    is on (behind a TLS proxy the bound address is not what a browser reaches), else
    the bound address."""
    return url if signin is None else signin.resource.rstrip("/")


async def serve(
    supervisor: Supervisor,
    bind: str,
    *,
    listener: socket.socket | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the admin API, ``/mcp`` and ``/v1/bridge`` on ``bind`` until cancelled,
    then drain gracefully.

    Start it with ``await nursery.start(serve, supervisor, bind)``, which returns the
    URL it listens on (``http://127.0.0.1:54321``). ``listener``: a socket from
    ``listen(bind)``, bound before the supervisor started (else it binds now;
    ``BindError`` if it cannot). While it serves, approval requests with no embedding
    approver wait for an operator (``GET /v1/approvals``) instead of being denied at
    once.
    """
    with listener if listener is not None else listen(bind) as sock:
        server = Server(supervisor, bind, sock)
        approvals = supervisor.approvals
        was_remote, approvals.remote = approvals.remote, True
        started = False
        try:
            async with trio.open_nursery() as nursery:
                try:
                    url: str = await nursery.start(server.run)
                    if server.heartbeats is not None:
                        server.heartbeats.set_address(url)
                    supervisor.people.sign_ins.base_url = sign_in_base(url, supervisor.config.signin)
                    task_status.started(url)
                    started = True
                    await trio.sleep_forever()
                finally:
                    if server.heartbeats is not None:  # readiness 503, the row says draining
                        with trio.CancelScope(shield=True):
                            await server.heartbeats.drain_written()
                            # a balancer's health check, or a replica that read "serving" a
                            # moment ago, may still send a request: it is accepted and answered
                            await trio.sleep(drain_notice_s(supervisor))
                    server.stop()
        finally:
            approvals.remote = was_remote
            if started:
                log.info("admin api stopped", extra={"fields": {}})
