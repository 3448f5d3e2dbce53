"""Raw HTTP for the web-tier goldens: requests written byte for byte, answers read as sent.

A request is built as bytes (``http_request``, ``mcp_post``), so HTTP/1.0, an
absolute-form target or a NUL reach the server exactly as written, and written on a
new connection (``exchange``). The answer is read back as the server sent it: the
status line and header lines verbatim, the body de-chunked. ``Recorder`` does both
and records the case in a ``Golden``.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from tests.support.golden_config import ALICE
from tests.support.golden_files import Golden, show

TIMEOUT_S = 20.0
ACCEPT_BOTH = "application/json, text/event-stream"
Address = tuple[str, int]

UPGRADE = (
    ("Upgrade", "websocket"),
    ("Connection", "Upgrade"),
    ("Sec-WebSocket-Version", "13"),
    ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
)
"""The headers of a WebSocket upgrade (RFC 6455's sample key)."""
KEEPALIVE = b": keepalive\n\n"


def http_request(
    method: str,
    target: str,
    host: str | None,
    *,
    token: str | None = None,
    headers: Sequence[tuple[str, str]] = (),
    body: bytes | None = None,
    version: str = "1.1",
    chunked: bool = False,
) -> bytes:
    """A request as bytes: request line, ``Host`` (None: none), ``Authorization``,
    ``headers``, ``Connection: close`` (unless ``headers`` name one), the body's length
    (or chunked framing) and the body."""
    lines = [f"{method} {target} HTTP/{version}"]
    if host is not None:
        lines.append(f"Host: {host}")
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    lines += [f"{name}: {value}" for name, value in headers]
    if not any(name.lower() == "connection" for name, _ in headers):
        lines.append("Connection: close")
    if body is not None:
        lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    if body is None:
        return head
    if chunked:
        return head + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    return head + body


def mcp_post(
    host: str | None,
    message: Any,
    *,
    token: str | None = ALICE,
    headers: Sequence[tuple[str, str]] = (),
    accept: str | None = ACCEPT_BOTH,
    content_type: str | None = "application/json",
    target: str = "/mcp",
    version: str = "1.1",
    chunked: bool = False,
) -> bytes:
    """``POST /mcp`` of one JSON-RPC message (bytes: as is), as a client sends it."""
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    sent = [("Accept", accept)] if accept is not None else []
    sent += [("Content-Type", content_type)] if content_type is not None else []
    how: dict[str, Any] = {"token": token, "body": body, "version": version, "chunked": chunked}
    return http_request("POST", target, host, headers=[*sent, *headers], **how)


@attrs.frozen
class Answer:
    """What came back: the head as sent (status line and header lines) and the body."""

    status_line: bytes
    header_lines: tuple[bytes, ...]
    body: bytes
    complete: bool  # the body ended (not cut by the client)

    def header(self, name: str) -> str | None:
        for line in self.header_lines:
            key, _, value = line.partition(b":")
            if key.strip().lower() == name.lower().encode():
                return value.strip().decode("latin-1")
        return None


def _dechunk(data: bytes) -> tuple[bytes, bool]:
    """A chunked body's payload so far, and whether its last chunk came."""
    out, rest = b"", data
    while b"\r\n" in rest:
        size_line, _, after = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return out, True
        if len(after) < size + 2:
            break
        out += after[:size]
        rest = after[size + 2 :]
    return out, False


def _parse(data: bytes, head_only: bool) -> tuple[Answer | None, bool]:
    """The answer in ``data`` so far, and whether it is complete by its own framing."""
    if b"\r\n\r\n" not in data:
        return None, False
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.split(b"\r\n")
    status = int(status_line.split(b" ")[1])
    answer = Answer(status_line, tuple(header_lines), rest, False)
    if head_only or status < 200 or status in (204, 304):
        return attrs.evolve(answer, body=b"", complete=True), True
    if (answer.header("transfer-encoding") or "").lower() == "chunked":
        body, done = _dechunk(rest)
        return attrs.evolve(answer, body=body, complete=done), done
    length = answer.header("content-length")
    if length is not None:
        done = len(rest) >= int(length)
        return attrs.evolve(answer, body=rest[: int(length)], complete=done), done
    return answer, False


def exchange(
    address: Address, raw: bytes, *, head_only: bool = False, until: Callable[[bytes], bool] | None = None
) -> Answer:
    """Send ``raw`` on a new connection; read one answer until its framing ends, the
    server closes, or ``until(body so far)`` holds (then the client hangs up).
    ``head_only``: the answer to a HEAD, which has no body whatever it says."""
    with socket.create_connection(address, timeout=TIMEOUT_S) as sock:
        sock.sendall(raw)
        data = b""
        while True:
            answer, done = _parse(data, head_only)
            if done or (answer is not None and until is not None and until(answer.body)):
                assert answer is not None
                return answer
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                assert answer is not None, f"the connection closed without an answer: {data!r}"
                return attrs.evolve(answer, complete=True)
            data += chunk


def _events(body: bytes) -> list[bytes]:
    """The complete events of an SSE body, keep-alive comments left out."""
    blocks = body.split(b"\n\n")[:-1]  # after the last separator: not complete yet
    return [block + b"\n\n" for block in blocks if not block.startswith(b":")]


def show_request(raw: bytes) -> str:
    """A request as sent: its head one line a CRLF, then its body."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = [show(line) for line in head.split(b"\r\n")]
    return "\n".join(lines) + ("\n\n" + show(body) if body else "")


def show_answer(answer: Answer, body: bytes) -> str:
    """Status line, every header but ``Date``, and ``body`` with its length."""
    lines = [show(answer.status_line)]
    lines += [show(line) for line in answer.header_lines if not line.lower().startswith(b"date:")]
    ended = "" if answer.complete else ", then the client hung up"
    lines.append(f"--- body ({len(body)} bytes{ended})")
    return "\n".join(lines) + ("\n" + show(body) if body else "")


class Recorder:
    """Sends requests to ``address`` and records each with its answer in ``golden``;
    a session id an answer names is masked from then on."""

    def __init__(self, address: Address, golden: Golden) -> None:
        self.address = address
        self.golden = golden

    def send(self, title: str, raw: bytes, *, stream: int = 0, head_only: bool = False) -> Answer:
        """``raw`` sent and recorded; ``stream``: read that many SSE events, then hang up."""
        until = (lambda body: len(_events(body)) >= stream) if stream else None
        answer = exchange(self.address, raw, until=until, head_only=head_only)
        sid = answer.header("mcp-session-id")
        if sid is not None:
            self.golden.masker.name(sid, "session")
        body = answer.body
        if stream:
            body = b"".join(_events(body)[:stream])
        elif (answer.header("content-type") or "").startswith("text/event-stream"):
            body = body.replace(KEEPALIVE, b"")
        self.golden.case(title, (">>> request", show_request(raw)), ("<<< answer", show_answer(answer, body)))
        return answer
