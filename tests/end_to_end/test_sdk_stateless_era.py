"""Our client against the official SDK 2.3's Streamable HTTP server in its stateless
2026-07-28 era (served in-process by Hypercorn on Trio), with every JSON-RPC message
the server received recorded by tests/servers/method_log.py: a call goes through with
no ``initialize`` and no session on the wire."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, cast

import pytest
import trio

from actors.connection.calls import server_error
from actors.connection.messages import CallTool
from actors.protocol.era import Era
from actors.protocol.messages import ErrorObject
from actors.spec import ServerSpec
from supervisor import Supervisor
from supervisor.settings.model import Config
from tests.end_to_end.test_http_transport_peers import START_S, hypercorn_app, remote, sdk_server
from tests.servers.method_log import MethodLog, read_body, replaying
from tests.support.paths import SERVERS


async def test_a_call_reaches_the_sdk_server_with_no_initialize_on_the_wire(tmp_path: Path) -> None:
    logged = MethodLog(sdk_server().streamable_http_app())
    async with hypercorn_app(logged) as base:
        spec = remote("sdk", f"{base}/mcp", transport="streamable-http")
        async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup, sup.session() as s:
            with trio.fail_after(START_S):
                turn = await s.begin_turn()
                added = await turn.call("sdk_add", {"a": 2, "b": 40})
            assert added.ok and added.text == "42", added
            assert sup.servers()["sdk"].protocol_version == "2026-07-28"
    assert logged.methods[0] == "server/discover"
    assert "tools/list" in logged.methods and "tools/call" in logged.methods
    assert "initialize" not in logged.methods
    assert "notifications/initialized" not in logged.methods
    assert {seen.session for seen in logged.seen} == {None}  # no protocol session either
    requests = [seen for seen in logged.seen if seen.method is not None]
    assert {seen.version for seen in requests} == {"2026-07-28"}


@pytest.mark.parametrize("ended_first", [False, True], ids=["listening", "after-a-graceful-end"])
async def test_a_tool_added_at_runtime_arrives_through_the_listen_stream(
    tmp_path: Path, ended_first: bool
) -> None:
    """The per-request era has no GET stream: ``notifications/tools/list_changed``
    comes on the ``subscriptions/listen`` stream we open after adoption, and the new
    tool reaches the catalog (a new epoch) without any request of ours.
    ``ended_first``: the server ends the first stream gracefully (its result) right
    after acknowledging it; we listen again on the same connection."""
    server = sdk_server(grow=True)

    logged = MethodLog(server.streamable_http_app())
    acks = 0
    listening = trio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        body = b""
        ended = False

        async def recorded() -> Any:
            nonlocal body
            message = await receive()
            body += message.get("body", b"")
            return message

        async def watched(message: Any) -> None:
            nonlocal acks, ended
            if ended:
                return  # the app writes on into a stream we already ended
            await send(message)
            if b"notifications/subscriptions/acknowledged" in message.get("body", b""):
                acks += 1  # the server subscribed this stream before it acked
                if ended_first and acks == 1:
                    answer = {"jsonrpc": "2.0", "id": json.loads(body)["id"], "result": {}}
                    data = f"event: message\ndata: {json.dumps(answer)}\n\n".encode()
                    await send({"type": "http.response.body", "body": data, "more_body": False})
                    ended = True
                elif acks == 1 + ended_first:
                    listening.set()

        await logged(scope, recorded, watched)

    async with hypercorn_app(app) as base:
        spec = remote("sdk", f"{base}/mcp", transport="streamable-http")
        async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup, sup.session() as s:
            with trio.fail_after(START_S):
                turn = await s.begin_turn()
                assert "sdk_late" not in {t.id for t in turn.tools}
                await listening.wait()
            assert (await turn.call("sdk_grow", {})).ok
            with trio.fail_after(2.0):  # no timer relists: only the notification can do this
                catalog = await sup.router.cell.wait_until(lambda c: "sdk_late" in c.tools)
            assert catalog.epoch > turn.epoch
            later = await s.begin_turn()
            reversed_ = await later.call("sdk_late", {"text": "abc"})
            assert reversed_.ok and reversed_.text == "cba", reversed_
    assert "initialize" not in logged.methods
    # One connection all along; a stream acknowledged again has server/discover asked again.
    assert logged.methods.count("server/discover") == 1 + ended_first
    assert logged.methods.count("subscriptions/listen") == 1 + ended_first


NEW_ERA_INITIALIZE = {
    "protocolVersion": "2026-07-28",
    "capabilities": {"tools": {"listChanged": True}},
    "serverInfo": {"name": "front", "version": "1"},
}
REFUSED_INITIALIZE = {"code": -32020, "message": "Missing MCP-Protocol-Version header"}


def new_era_front(
    app: Any, acknowledged: trio.Event, *, discover_after_s: float | None = None, refuse: bool = False
) -> Any:
    """The SDK's app behind a front that answers ``server/discover`` only after
    ``discover_after_s`` (None: never; the probe of a busy machine times out) and
    answers ``initialize`` itself, as the conformance suite's mock servers of the
    2026-07-28 era do: with that version, or (``refuse``) with HTTP 400. The rest
    reaches the SDK; ``acknowledged`` is set once it acknowledged a listen stream."""

    async def front(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body = await read_body(receive)
        request = json.loads(body)
        if request.get("method") == "server/discover":
            await trio.sleep(math.inf if discover_after_s is None else discover_after_s)
        if request.get("method") == "initialize":
            answer = {"error": REFUSED_INITIALIZE} if refuse else {"result": NEW_ERA_INITIALIZE}
            data = json.dumps({"jsonrpc": "2.0", "id": request["id"], **answer}).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 400 if refuse else 200, "headers": headers})
            await send({"type": "http.response.body", "body": data})
            return

        async def watched(message: Any) -> None:
            await send(message)
            if b"notifications/subscriptions/acknowledged" in message.get("body", b""):
                acknowledged.set()

        await app(scope, replaying(body, receive), watched)

    return front


async def test_initialize_answered_with_the_new_era_speaks_it_and_listens(tmp_path: Path) -> None:
    """Over HTTP, a connection whose ``initialize`` was answered with 2026-07-28 speaks
    the per-request era (``_meta`` and its headers on every request) and opens the
    ``subscriptions/listen`` stream its capabilities offer: a tool added at run time
    reaches the catalog (it used to be a version mismatch: backoff, no tools)."""
    server = sdk_server(grow=True)

    listening = trio.Event()
    logged = MethodLog(new_era_front(server.streamable_http_app(), listening))
    async with hypercorn_app(logged) as base:
        spec = remote("sdk", f"{base}/mcp", transport="streamable-http", init_timeout_s=2.0)
        async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup, sup.session() as s:
            with trio.fail_after(START_S):
                turn = await s.begin_turn()
                assert sup.servers()["sdk"].protocol_version == "2026-07-28"
                await listening.wait()
                assert (await turn.call("sdk_grow", {})).ok
                await sup.router.cell.wait_until(lambda c: "sdk_late" in c.tools)
            reversed_ = await (await s.begin_turn()).call("sdk_late", {"text": "abc"})
            assert reversed_.ok and reversed_.text == "cba", reversed_
    assert logged.methods[:2] == ["server/discover", "initialize"]
    assert "notifications/initialized" not in logged.methods
    after = [seen for seen in logged.seen[2:] if seen.method is not None]
    assert {seen.version for seen in after} == {"2026-07-28"}


async def test_initialize_refused_while_the_probe_is_unanswered_waits_for_the_probe(tmp_path: Path) -> None:
    """On a busy machine the probe times out (half of the 2 s init timeout) before the
    server answers it; a server of the 2026-07-28 era only refuses the ``initialize``
    that follows with HTTP 400. The server took our ``server/discover`` POST, so that
    400 is no sign of the legacy transport: it is the refusal of ``initialize``, and
    the probe's answer (at 1.5 s) settles the era (the connection used to fail: "speaks
    neither Streamable HTTP (initialize was answered HTTP 400) nor HTTP+SSE")."""
    server = sdk_server()
    logged = MethodLog(
        new_era_front(server.streamable_http_app(), trio.Event(), discover_after_s=1.5, refuse=True)
    )
    async with hypercorn_app(logged) as base:
        spec = remote("sdk", f"{base}/mcp", init_timeout_s=2.0)  # transport: auto
        async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup, sup.session() as s:
            with trio.fail_after(START_S):
                added = await (await s.begin_turn()).call("sdk_add", {"a": 2, "b": 40})
            assert added.ok and added.text == "42", added
            view = sup.servers()["sdk"]
            assert view.protocol_version == "2026-07-28" and view.reconnects == 0
    assert logged.methods[:2] == ["server/discover", "initialize"]


async def test_a_tool_that_asks_the_handshake_era_way_is_told_how_to_fix_it(tmp_path: Path) -> None:
    """tests/servers/sdk_server.py's ``sample`` calls ``session.create_message`` mid-call,
    which the SDK refuses in the 2026-07-28 era (-32600, no back-channel): the caller is
    told what happened and which setting fixes it."""
    spec = ServerSpec(name="sdk", command=(sys.executable, str(SERVERS / "sdk_server.py")), trusted=True)

    async def sampling(server: str, params: Any) -> dict[str, Any]:
        return {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}

    async with (
        Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup,
        sup.session(sampling=sampling) as s,
    ):
        with trio.fail_after(START_S):
            refused = await (await s.begin_turn()).call("sdk_sample", {"prompt": "hello"})
        assert sup.servers()["sdk"].protocol_version == "2026-07-28"
    assert not refused.ok and refused.error is not None and refused.error.code == "server_error"
    assert refused.error.message == (
        "mcp server sdk asked for sampling/createMessage during tools/call sample the handshake-era "
        "way (a request of its own mid-call), which protocol 2026-07-28 cannot carry; set "
        '"protocol": "2025-11-25" for server sdk (its answer: error -32600: Cannot send '
        "'sampling/createMessage': this transport context has no back-channel for server-initiated "
        "requests.)"
    )


def test_only_the_per_request_eras_refusal_to_send_gets_the_fix() -> None:
    call = CallTool("sample", {}, cast(Any, None))
    refusal = ErrorObject(-32600, "Cannot send 'elicitation/create': no back-channel")
    hinted = server_error("s", call, refusal, Era.PER_REQUEST)
    assert hinted.rpc_error is refusal and '"protocol": "2025-11-25" for server s' in hinted.message
    assert "asked for elicitation/create during tools/call sample" in hinted.message
    plain = "mcp server s answered tools/call sample with error -32600: Cannot send 'elicitation/create'"
    assert server_error("s", call, refusal, Era.HANDSHAKE).message.startswith(plain)
    other = ErrorObject(-32602, "Cannot send 'elicitation/create': no")
    assert "protocol" not in server_error("s", call, other, Era.PER_REQUEST).message
