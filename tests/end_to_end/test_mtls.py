"""Mutual TLS for remote servers, end to end on loopback.

The certificates (a CA, the server's for 127.0.0.1, ours) are made at run time
(``tests/support/tls_certs.py``). Servers: the official SDK's Streamable HTTP and legacy SSE
apps, and our OAuth server (``tests/servers/oauth_server.py``), behind Hypercorn with
client certificates required; and a bare TLS listener that refuses the way OpenSSL
socket servers (nginx) do, with the TLS alert on the wire. Covered: a tool call over
mutual TLS on both transports and with OAuth (its endpoints behind the same TLS);
no client certificate, an unknown one, and a server certificate from another CA fail
fast with a message that names the cause and the fix; the key never reaches a log.
"""

from __future__ import annotations

import functools
import logging
import socket
import ssl
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from actors.auth.http import AuthServerHttp, tls_transport
from actors.router.catalog import ServerView
from actors.spec import ServerSpec, Start
from actors.tls import ClientTls
from actors.transport_errors import AuthRequired, TransportClosed
from actors.transports.remote import RemoteConnector
from supervisor.cli.auth_login import login
from supervisor.service import Supervisor
from supervisor.settings.model import Config, ToolSearchSettings
from tests.end_to_end.test_http_transport_peers import sdk_server
from tests.support.paths import SERVERS
from tests.support.tls_certs import Authority, MutualTls

sys.path.insert(0, str(SERVERS))
from http_fault_server import serve_loopback
from oauth_server import OAuthOptions, OAuthServer, serve_oauth_server

SETTLE_S = 10.0  # far above what any of these takes (well under a second), far below a hang


@pytest.fixture
def certs(tmp_path: Path) -> MutualTls:
    return MutualTls.make(tmp_path)


def ours(certs: MutualTls) -> ClientTls:
    return ClientTls(cert=certs.client.cert, key=certs.client.key, ca=certs.ca.cert)


def spec(name: str, url: str, tls: ClientTls | None, **options: Any) -> ServerSpec:
    return ServerSpec(
        name=name, type="remote", url=url, tls=tls, trusted=True, start=Start.EAGER,
        init_timeout_s=5.0, call_timeout_s=5.0, reconnect_schedule_s=(30.0,), shutdown_grace_s=0.5,
        secrets=(tls.key,) if tls is not None and tls.key else (), **options,
    )  # fmt: skip


@asynccontextmanager
async def mtls_app(app: Any, certs: MutualTls) -> AsyncIterator[str]:
    """``app`` on https://127.0.0.1:<port>, client certificates required."""
    async with trio.open_nursery() as nursery:
        base: str = await nursery.start(functools.partial(serve_loopback, app, configure=certs.hypercorn))
        assert base.startswith("https://")
        yield base
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def supervising(*servers: ServerSpec, state_dir: Path) -> AsyncIterator[Supervisor]:
    config = Config(servers=servers, tool_search=ToolSearchSettings(enabled=False))
    async with Supervisor.open(config, state_dir=state_dir) as supervisor:
        yield supervisor


async def settled(supervisor: Supervisor, name: str) -> ServerView:
    """The server once it serves or failed (bounded: a hang fails the test)."""
    with trio.fail_after(SETTLE_S):
        await supervisor.router.cell.wait_until(
            lambda c: c.servers[name].available or c.servers[name].last_error is not None
        )
    return supervisor.router.cell.current.servers[name]


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_a_tool_call_over_mutual_tls(tmp_path: Path, certs: MutualTls, transport: str) -> None:
    sdk = sdk_server()
    app, path = (sdk.sse_app(), "/sse") if transport == "sse" else (sdk.streamable_http_app(), "/mcp")
    async with (
        mtls_app(app, certs) as base,
        supervising(spec("sdk", base + path, ours(certs), transport=transport), state_dir=tmp_path) as sup,
    ):
        view = await settled(sup, "sdk")
        assert view.available, view.last_error
        async with sup.session() as session:
            turn = await session.begin_turn()
            added = await turn.call("sdk_add", {"a": 2, "b": 40})
        assert added.ok and added.text == "42", added


@pytest.mark.parametrize(
    ("make_tls", "words"),
    [
        # Hypercorn (like uvicorn) hangs up without sending its alert: named as the likely cause.
        (lambda c: ClientTls(ca=c.ca.cert), "a server that requires a TLS client certificate hangs up"),
        (lambda c: ClientTls(*_stranger(), ca=c.ca.cert), "refuses our TLS client certificate hangs up"),
        (
            lambda c: ClientTls(c.client.cert, c.client.key, Authority.make().cert),
            "its TLS certificate is not trusted (self-signed certificate in certificate chain); set tls.ca",
        ),
    ],
    ids=["no-client-cert", "unknown-client-cert", "wrong-ca"],
)
async def test_a_refused_handshake_fails_fast_and_says_why(
    tmp_path: Path, certs: MutualTls, make_tls: Any, words: str
) -> None:
    """The server failed to connect, saying ``words``, and a call of its tool (known
    from the run before, with the right certificate) fails at once: ``unavailable``."""
    async with mtls_app(sdk_server().streamable_http_app(), certs) as base:
        async with supervising(spec("sdk", f"{base}/mcp", ours(certs)), state_dir=tmp_path) as sup:
            assert (await settled(sup, "sdk")).available  # its tool list is remembered
        async with supervising(spec("sdk", f"{base}/mcp", make_tls(certs)), state_dir=tmp_path) as sup:
            view = await settled(sup, "sdk")
            assert not view.available
            assert view.last_error is not None and words in view.last_error, view.last_error
            assert "Traceback" not in view.last_error
            async with sup.session() as session:
                turn = await session.begin_turn()
                with trio.fail_after(SETTLE_S):
                    result = await turn.call("sdk_add", {"a": 1, "b": 1})
            assert not result.ok and result.error.code == "unavailable", result
            assert result.error.message.startswith("mcp server sdk is unavailable"), result


async def test_a_server_that_is_down_is_not_blamed_on_the_client_certificate(
    tmp_path: Path, certs: MutualTls
) -> None:
    """Nothing listens: a refused connection is not a TLS hang-up, so no tls hint."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    async with supervising(
        spec("sdk", f"https://127.0.0.1:{port}/mcp", ours(certs)), state_dir=tmp_path
    ) as sup:
        view = await settled(sup, "sdk")
    assert not view.available and view.last_error is not None
    assert "cannot connect" in view.last_error and "tls." not in view.last_error, view.last_error


def _stranger() -> tuple[str, str]:
    """A client certificate of a CA the server does not know."""
    issued = Authority.make("another CA").issue("stranger", server=False)
    return issued.cert, issued.key


async def serve_alerting_tls(
    context: ssl.SSLContext, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
) -> None:
    """A TLS listener that refuses as OpenSSL socket servers (nginx) do: a failed
    handshake's alert goes out before the hang-up. It answers nothing else."""

    async def handle(stream: trio.SocketStream) -> None:
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = context.wrap_bio(incoming, outgoing, server_side=True)
        try:
            while True:
                try:
                    tls.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    pass
                if outgoing.pending:
                    await stream.send_all(outgoing.read())
                data = await stream.receive_some()
                if not data:
                    return
                incoming.write(data)
        except ssl.SSLError:
            if outgoing.pending:
                await stream.send_all(outgoing.read())  # the alert
            # Read what the client already sent before closing: closing on unread data
            # resets the connection, and a reset can overtake the alert.
            await stream.send_eof()
            with trio.move_on_after(1.0):
                while await stream.receive_some():
                    pass
        finally:
            await stream.aclose()

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(handle, listeners)


async def test_a_refused_client_certificate_is_an_auth_failure_when_the_server_says_so(
    tmp_path: Path, certs: MutualTls
) -> None:
    """With the TLS alert on the wire, the refusal is ours to fix, not a retry matter:
    the transport and the OAuth client both say so (``auth_failed``)."""
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_alerting_tls, certs.server_context())
        url = f"https://127.0.0.1:{port}/mcp"
        async with supervising(spec("sdk", url, ClientTls(ca=certs.ca.cert)), state_dir=tmp_path) as sup:
            view = await settled(sup, "sdk")
        assert view.last_error is not None
        assert "authentication failed: it refused our TLS client certificate" in view.last_error
        http = AuthServerHttp(
            "sdk", timeout_s=5.0, transport=tls_transport("sdk", ClientTls(ca=certs.ca.cert))
        )
        with (
            trio.fail_after(SETTLE_S),
            pytest.raises(AuthRequired, match="refused our TLS client certificate"),
        ):
            async with http.client() as client:
                await http.get_json(client, url, "authorization server metadata")
        wrong = tls_transport("sdk", ClientTls(certs.client.cert, certs.client.key, Authority.make().cert))
        http = AuthServerHttp("sdk", timeout_s=5.0, transport=wrong)
        with trio.fail_after(SETTLE_S), pytest.raises(TransportClosed, match=r"set tls\.ca"):
            async with http.client() as client:
                await http.get_json(client, url, "authorization server metadata")
        nursery.cancel_scope.cancel()


async def test_oauth_endpoints_go_over_the_same_mutual_tls(
    tmp_path: Path, certs: MutualTls, caplog: pytest.LogCaptureFixture
) -> None:
    """Metadata, token endpoint and MCP endpoint all behind client certificates: the
    client-credentials grant and the call go through, and the key is in no log line."""
    caplog.set_level(logging.DEBUG)
    options = OAuthOptions(dcr=False, preregistered={"svc": "svc-secret-1234"})
    async with trio.open_nursery() as nursery:
        server: OAuthServer = await nursery.start(
            functools.partial(serve_oauth_server, options, configure=certs.hypercorn)
        )
        assert server.mcp_url.startswith("https://")
        oauth = {"flow": "client_credentials", "client_id": "svc", "client_secret": "svc-secret-1234"}
        remote = spec("docs", server.mcp_url, ours(certs), transport="streamable-http", oauth=oauth)
        async with supervising(remote, state_dir=tmp_path) as sup:
            view = await settled(sup, "docs")
            assert view.available, view.last_error
            async with sup.session() as session:
                turn = await session.begin_turn()
                echoed = await turn.call("docs_echo", {"text": "over mtls"})
            assert echoed.ok and "over mtls" in echoed.text, echoed
        assert [r.get("grant_type") for r in server.token_requests] == ["client_credentials"]
        nursery.cancel_scope.cancel()
    key_lines = [line for line in certs.client.key.splitlines() if not line.startswith("-----")]
    logged = "\n".join(record.getMessage() + repr(record.__dict__) for record in caplog.records)
    assert key_lines and not any(line in logged for line in key_lines)


async def test_auth_login_reaches_the_server_and_its_oauth_endpoints_over_mutual_tls(
    tmp_path: Path, certs: MutualTls
) -> None:
    """``mcp-supervisor auth login``: its probe and the whole flow carry our certificate."""
    async with trio.open_nursery() as nursery:
        server: OAuthServer = await nursery.start(
            functools.partial(serve_oauth_server, OAuthOptions(), configure=certs.hypercorn)
        )
        remote = spec("docs", server.mcp_url, ours(certs), transport="streamable-http", oauth={})
        urls, printed = trio.open_memory_channel[str](10)

        async def browse() -> None:  # the person's browser, holding the same certificate
            async for line in printed:
                if "/authorize?" in line:
                    url = next(word for word in line.split() if "/authorize?" in word)
                    async with httpx2.AsyncClient(verify=ours(certs).context(), follow_redirects=True) as b:
                        assert (await b.get(url)).status_code == 200
                    return

        nursery.start_soon(browse)
        with trio.fail_after(SETTLE_S):
            await login(
                Config(servers=(remote,)), "docs",
                state_dir=tmp_path, show=urls.send_nowait, admin_url="http://127.0.0.1:9",
            )  # fmt: skip
        assert [r.get("grant_type") for r in server.token_requests] == ["authorization_code"]
        nursery.cancel_scope.cancel()


def test_a_reloaded_tls_block_gets_a_new_oauth_client(certs: MutualTls) -> None:
    """The connector keeps one OAuth provider per server across reconnects; a changed
    ``tls`` (a reload restarts the server) must not keep the old certificate's client."""
    connector = RemoteConnector()
    before = spec("docs", "https://127.0.0.1:9/mcp", ours(certs), oauth={})
    renewed = spec("docs", "https://127.0.0.1:9/mcp", ClientTls(ca=certs.ca.cert), oauth={})
    assert connector.provider(before) is connector.provider(before)
    assert connector.provider(renewed) is not connector.provider(before)
