"""``mcp-supervisor stdio``: the gateway for hosts that launch a command.

Newline-delimited JSON-RPC on stdin is one ``GatewayPeer`` over one supervisor
session; answers and notices go to stdout, and nothing else does (logs go to
stderr). Every request is handled in a task of the front's own nursery, so a
``notifications/cancelled`` or the client's answer to one of our requests (an
elicitation) is read while a call waits; a cancelled request gets no line at all.

Bad input is answered, and the session lives on: a line over
``gateway.max_message_bytes`` gets an error (read with that bound: the rest of the
line is skipped, never buffered), malformed JSON ``-32700``, and so a line nested
deeper than the parser reads, saying so (with the request's id when it leads the
line), a batch array ``-32600``.
stdin's end stops the front once what was received is answered (``printf
'<initialize>\n<tools/list>\n' | mcp-supervisor stdio`` prints both answers): the
requests in flight get ``EOF_GRACE_S`` to finish, and one still running then is
cancelled (its call at the backend too) and answered with an error saying so; then
the session and the supervisor end, and every server is torn down. ``initialize`` is
answered before the next line is taken, so requests piped right behind it find the
session initialized. The process holds an instance lock of
its own (kind ``stdio``), so several fronts share a state directory, and its servers
get the parent-death signal, so they die with it even when it is SIGKILLed.

Nobody watches an approval desk here: a trust decision of ``ask`` is put to the client
when it declared elicitation (``supervisor/sessions/trust_prompts.py``), and is otherwise denied
at once, with a message saying so (``deny_asks``). The servers are told the client can
sample, elicit and list roots (``PASSED_ON``): such requests go to the client when it
declared the capability, and are refused otherwise.
"""

from __future__ import annotations

import getpass
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson
import trio

from actors.log_events import get_logger
from actors.protocol.json_depth import nested_too_deep, too_deep
from actors.protocol.jsonrpc import to_wire
from actors.protocol.server_session import error_response
from supervisor.gateway.core import plain_json
from supervisor.gateway.http_sessions import installed_version
from supervisor.gateway.notices import run_notices
from supervisor.gateway.peer import PASSED_ON, GatewayPeer
from supervisor.gateway.results import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR, JsonRpcError
from supervisor.runtime.tracing import TRACING
from supervisor.service import Supervisor
from supervisor.sessions.approvals import Approval, ApprovalRequest, Verdict
from supervisor.settings.model import Config

log = get_logger("supervisor.gateway.stdio")

READ_CHUNK = 65536
EOF_GRACE_S = 30.0
"""How long the requests in flight when stdin ends may take to be answered (the
default call timeout); one still running then is cut, with an error line."""
# The id of a request too large or too deeply nested to parse, read from its first
# bytes when it is the first member (or the second, after "jsonrpc"), as clients write
# it; otherwise null.
_LEADING_ID = re.compile(
    rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")'
)


async def deny_asks(request: ApprovalRequest) -> Verdict:
    """The stdio front's approver: there is no operator to wait for."""
    return Verdict(
        Approval("deny"),
        f"approval required for {request.tool} ({request.reason}), but the stdio gateway has no "
        "operator to ask; allow the tool with a trust rule in the config",
    )


class StdoutOutlet:
    """stdout: one JSON message a line, written whole (one writer at a time)."""

    def __init__(self, stream: trio.abc.SendStream) -> None:
        self._stream = stream
        self._lock = trio.Lock()

    async def send(self, message: Mapping[str, Any]) -> None:
        line = orjson.dumps(message, default=plain_json) + b"\n"
        async with self._lock:
            await self._stream.send_all(line)


class Oversized:
    """A line over the bound, skipped; ``head`` is its first bytes (for its id)."""

    def __init__(self, head: bytes) -> None:
        self.head = head


async def lines(stream: trio.abc.ReceiveStream, limit: int) -> AsyncIterator[bytes | Oversized]:
    """The lines of ``stream`` (without their newline), never holding more than
    ``limit`` bytes of one: a longer line comes as ``Oversized``, its rest skipped."""
    buffer = bytearray()
    skipping: Oversized | None = None
    while True:
        chunk = await stream.receive_some(READ_CHUNK)
        if not chunk:
            if buffer.strip() and skipping is None:
                yield bytes(buffer)
            elif skipping is not None:
                yield skipping
            return
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if skipping is not None:
                yield skipping
                skipping = None
            else:
                buffer += chunk[start:end]
                if len(buffer) > limit:
                    yield Oversized(bytes(buffer[:1024]))
                else:
                    yield bytes(buffer)
            buffer.clear()
            start = end + 1
        if skipping is None:
            buffer += chunk[start:]
            if len(buffer) > limit:
                skipping = Oversized(bytes(buffer[:1024]))
                buffer.clear()


def _leading_id(head: bytes) -> Any:
    match = _LEADING_ID.match(head)
    return None if match is None else orjson.loads(match.group(1))


def local_user() -> str:
    """Who the stdio front's calls are for: no sign-in, so the OS user it runs as
    (docs/identity.md); ``uid:N`` where the system knows no name for it."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no LOGNAME/USER and no passwd entry (a bare container)
        return f"uid:{os.getuid()}"


async def serve_stdio(
    sup: Supervisor,
    stdin: trio.abc.ReceiveStream,
    stdout: trio.abc.SendStream,
    *,
    eof_grace_s: float = EOF_GRACE_S,
) -> None:
    """One client on ``stdin``/``stdout`` until stdin ends and what came is answered
    (at most ``eof_grace_s`` more; see the module docstring)."""
    gateway = sup.config.gateway
    outlet = StdoutOutlet(stdout)
    began = trio.current_time()
    async with sup.session(person=local_user()) as session:
        peer = GatewayPeer(
            session,
            lambda key: sup.requests.cancel(key, session.tenant),
            prefix=gateway.prefix,
            version=installed_version(),
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_notices, peer, outlet, sup.router.cell)
            async with trio.open_nursery() as requests:
                async for line in lines(stdin, gateway.max_message_bytes):
                    await _take(peer, outlet, requests, line, gateway.max_message_bytes)
                log.info("stdin closed: answering what came, then stopping")
                peer.close("the client closed stdin")  # it cannot answer our requests now
                requests.cancel_scope.deadline = trio.current_time() + eof_grace_s
            nursery.cancel_scope.cancel()
        if (tracing := TRACING.active) is not None and peer.initialized:
            tracing.session_ended(trio.current_time() - began, "pipe", peer.protocol_version)


async def _take(
    peer: GatewayPeer, outlet: StdoutOutlet, requests: trio.Nursery, line: bytes | Oversized, limit: int
) -> None:
    """One line from the client: answered now when it is bad, else handed to the peer
    (a request in a task of its own)."""
    if isinstance(line, Oversized):
        why = (
            f"message over gateway.max_message_bytes ({limit} bytes): "
            "send smaller messages or raise the limit"
        )
        await _refuse(outlet, _leading_id(line.head), JsonRpcError(INVALID_REQUEST, why))
        return
    if not line.strip():
        return
    try:
        message = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        if too_deep(exc):  # good JSON, maybe: its id, if it leads, is the client's to match
            deep = JsonRpcError(PARSE_ERROR, nested_too_deep("the message"))
            await _refuse(outlet, _leading_id(line), deep)
        else:
            await _refuse(outlet, None, JsonRpcError(PARSE_ERROR, f"parse error: {exc}"))
        return
    if isinstance(message, list):
        why = "batch arrays are not supported: send one JSON-RPC message a line"
        await _refuse(outlet, None, JsonRpcError(INVALID_REQUEST, why))
        return
    if not isinstance(message, dict):
        why = "a message must be a JSON-RPC object"
        await _refuse(outlet, None, JsonRpcError(INVALID_REQUEST, why))
        return
    if message.get("method") == "initialize" and "id" in message:
        await _answer(peer, outlet, message)  # before the next line: it may need the session
    elif isinstance(message.get("method"), str) and "id" in message:
        requests.start_soon(_answer, peer, outlet, message)
    else:  # notifications and the client's answers: taken at once
        await peer.receive(message, outlet)


async def _refuse(outlet: StdoutOutlet, request_id: Any, error: JsonRpcError) -> None:
    """Answer ``request_id`` (None: a line whose id we could not read) with ``error``."""
    await outlet.send(to_wire(error_response(request_id, error)))


async def _answer(peer: GatewayPeer, outlet: StdoutOutlet, message: dict[str, Any]) -> None:
    try:
        response = await peer.receive(message, outlet)
    except trio.Cancelled:
        if peer.closed:  # cut by the bound after stdin's end: say so, if stdout takes it
            why = "stdin was closed, and this request was still running when the time to finish ran out"
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await _refuse(outlet, message["id"], JsonRpcError(INTERNAL_ERROR, why))
        raise
    if response is not None:
        await outlet.send(response)


async def _main(config: Config, state_dir: str | None, stdin_fd: int, stdout_fd: int) -> None:
    stdin, stdout = trio.lowlevel.FdStream(stdin_fd), trio.lowlevel.FdStream(stdout_fd)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with (
            Supervisor.open(
                config,
                deny_asks,
                state_dir=state_dir,
                instance_kind="stdio",
                subreaper=True,
                client_capabilities=PASSED_ON,
            ) as sup,
            trio.open_nursery() as nursery,
        ):

            async def stop_on_signal() -> None:
                async for signum in signals:
                    log.info("stopping", extra={"fields": {"signal": signal.Signals(signum).name}})
                    nursery.cancel_scope.cancel()

            nursery.start_soon(stop_on_signal)
            await serve_stdio(sup, stdin, stdout)
            nursery.cancel_scope.cancel()


def run_stdio(config: Config, state_dir: str | None) -> None:
    """Run the front on this process's stdin and stdout. stdout is kept for JSON-RPC
    alone: file descriptor 1 becomes stderr, so nothing else (a library's print, a
    stray write) can reach the client."""
    stdin_fd, stdout_fd = os.dup(0), os.dup(1)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = sys.stderr
    trio.run(_main, config, state_dir, stdin_fd, stdout_fd)
