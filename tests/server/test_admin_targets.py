"""Requests as bytes on a socket, against the real Hypercorn-served admin API.

The ordinary test client (``Http``) writes well-formed origin-form requests; these
tests write the request line and headers by hand, because what is tested is what
Hypercorn and Quart make of bytes no polite client sends: an absolute-form target
whose authority is not the ``Host`` (RFC 9112 §3.2.2 says the target's authority
wins), and a header with a NUL in it, which Hypercorn refuses before the app runs.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import h11
import orjson
import pytest
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from supervisor.server.hypercorn_patches import install_all
from supervisor.web.auth import target_authority
from tests.support.admin import ALICE, TOKENS, Reply, admin_running, config_of


async def send_raw(url: str, head: bytes) -> Reply:
    """Write ``head`` (request line and headers, no body) and read one answer."""
    host, _, port = url.removeprefix("http://").rpartition(":")
    stream = await trio.open_tcp_stream(host, int(port))
    async with stream:
        await stream.send_all(head)
        conn = h11.Connection(h11.CLIENT)
        conn.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))  # to read a response
        conn.send(h11.EndOfMessage())
        status, headers, body = 0, {}, b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.Response):
                status = event.status_code
                headers = {k.decode().lower(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.Data):
                body += bytes(event.data)
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                return Reply(status, headers, body)


def request_head(target: str, host: str = "127.0.0.1", *headers: str) -> bytes:
    lines = [f"GET {target} HTTP/1.1", f"Host: {host}", *headers, "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1")


@pytest.mark.parametrize(
    ("target", "status"),
    [
        ("http://evil.example/v1/servers", 403),
        ("http://evil.example/v1/health", 403),  # the public route too
        ("HTTP://EVIL.EXAMPLE:8765/v1/servers", 403),
        ("http://127.0.0.1.evil.example/v1/servers", 403),
        ("http://127.0.0.1@evil.example/v1/servers", 403),
        ("http://evil.example?/v1/servers", 403),
        ("https://10.0.0.1/v1/servers", 403),
        ("http://127.0.0.1:8765/v1/servers", 200),
        ("http://localhost/v1/servers", 200),
        ("http://[::1]:1/v1/servers?x=1", 200),
        ("*", 400),
        ("evil.example:443", 400),
        ("ftp://127.0.0.1/v1/servers", 400),
    ],
)
async def test_an_absolute_form_target_must_name_a_loopback_authority(
    tmp_path: Path, target: str, status: int
) -> None:
    async with admin_running(config_of(), tmp_path) as api:
        with trio.fail_after(10):
            reply = await send_raw(api.url, request_head(target))
    assert reply.status == status, reply
    assert reply.headers["content-type"] == "application/json"
    if status == 403:
        assert reply.json()["error"] == {
            "code": "forbidden",
            "message": "the request target must name a loopback address (DNS-rebinding guard)",
        }
    elif status == 400:
        assert reply.json()["error"]["code"] == "bad_request"
    else:
        assert reply.json() == {"servers": []}


async def test_the_host_header_is_still_checked_with_a_loopback_target(tmp_path: Path) -> None:
    async with admin_running(config_of(), tmp_path) as api:
        with trio.fail_after(10):
            reply = await send_raw(api.url, request_head("http://127.0.0.1/v1/servers", "evil.example"))
    assert reply.status == 403 and "Host header" in reply.json()["error"]["message"]


async def test_a_foreign_target_is_refused_before_the_token_is_looked_at(tmp_path: Path) -> None:
    async with admin_running(config_of(tokens=TOKENS), tmp_path) as api:
        with trio.fail_after(10):
            bearer = f"Authorization: Bearer {ALICE}"
            head = request_head("http://evil.example/v1/servers", "127.0.0.1", bearer)
            reply = await send_raw(api.url, head)
    assert reply.status == 403 and orjson.loads(reply.body)["error"]["code"] == "forbidden"


def test_target_forms() -> None:
    assert target_authority("/v1/servers") is None
    assert target_authority("http://127.0.0.1:8765/v1/servers") == "127.0.0.1:8765"
    assert target_authority("HTTPS://[::1]") == "[::1]"
    assert target_authority("http://u@h/x") == "u@h"  # then refused: not a loopback authority
    for other in ("*", "h:80", "v1/servers", "ftp://h/", "http:/h/", "http://h/#frag"):
        with pytest.raises(ValueError):
            target_authority(other)


@pytest.mark.parametrize("tokens", [TOKENS, None], ids=["tokens", "no-tokens"])
@pytest.mark.parametrize(
    "header",
    [
        b"Authorization: Bearer alice-token-\x000123456789",
        b"Authorization: Bearer \x00",
        b"X-Other: a\x00b",
        b"Authorization: Bearer alice\rtoken",
    ],
    ids=["nul-in-token", "nul-token", "nul-elsewhere", "bare-cr"],
)
async def test_a_header_http_forbids_gets_a_json_400(
    tmp_path: Path, tokens: dict[str, str] | None, header: bytes
) -> None:
    async with admin_running(config_of(tokens=tokens), tmp_path) as api:
        with trio.fail_after(10):
            head = b"GET /v1/servers HTTP/1.1\r\nHost: 127.0.0.1\r\n" + header + b"\r\n\r\n"
            reply = await send_raw(api.url, head)
            # The server still serves the next connection.
            after = await send_raw(api.url, request_head("/v1/health"))
    assert reply.status == 400, reply
    assert reply.headers["content-type"] == "application/json"
    assert reply.json()["error"]["code"] == "bad_request"
    assert "not valid HTTP/1.1" in reply.json()["error"]["message"]
    assert b"alice" not in reply.body
    assert after.status == 200


async def test_a_control_character_in_a_bearer_token_is_a_400_not_a_401(tmp_path: Path) -> None:
    """h11 lets a \\x01 through; the guard refuses it as a broken header."""
    async with admin_running(config_of(tokens=TOKENS), tmp_path) as api:
        with trio.fail_after(10):
            head = request_head("/v1/servers", "127.0.0.1", f"Authorization: Bearer {ALICE}\x01")
            reply = await send_raw(api.url, head)
    assert reply.status == 400 and reply.json()["error"]["code"] == "bad_request"
    assert "control character" in reply.json()["error"]["message"]


async def test_another_hypercorn_in_the_process_keeps_its_own_refusals() -> None:
    """The JSON refusals are serve's; an embedding host's Hypercorn is untouched."""
    install_all()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("not reached")

    config = HypercornConfig()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = config.errorlog = None
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(partial(serve, app, config))
        with trio.fail_after(10):
            reply = await send_raw(binds[0], b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX: \x00\r\n\r\n")
        nursery.cancel_scope.cancel()
    assert reply.status == 400 and reply.body == b""
