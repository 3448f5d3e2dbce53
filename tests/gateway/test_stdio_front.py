"""``mcp-supervisor stdio`` against real peers: the official SDK's stdio client over
the real command and mini_server behind it; and raw lines for what no SDK sends
(oversized lines, malformed JSON, batches, a cancel by id)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client

from supervisor import Supervisor
from supervisor.gateway.results import INTERNAL_ERROR
from supervisor.gateway.stdio_front import Oversized, deny_asks, lines, serve_stdio
from supervisor.sessions.approvals import ApprovalDesk, ApprovalRequest
from tests.actors.transports.test_stdio_transport import eventually
from tests.service.test_embedding import config_of, mini_spec
from tests.support.paths import REPO, SERVERS

ROOT = REPO
CLI = ROOT / ".venv" / "bin" / "mcp-supervisor"
MINI = str(SERVERS / "mini_server.py")
EVERYTHING = ROOT / ".venv" / "node" / "node_modules" / ".bin" / "mcp-server-everything"


def write_config(tmp_path: Path, servers: dict[str, Any], **extra: Any) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"servers": servers, "tool_search": {"enabled": False}, **extra}))
    return path


def mini(tmp_path: Path) -> dict[str, Any]:
    logs = ["--methods-log", str(tmp_path / "methods.log"), "--calls-log", str(tmp_path / "calls.log")]
    return {"command": sys.executable, "args": [MINI, *logs], "trusted": True}


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


async def test_the_sdk_stdio_client_lists_calls_hears_progress_and_list_changed(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"mini": mini(tmp_path)})
    params = StdioServerParameters(
        command=str(CLI), args=["stdio", "--config", str(config), "--state-dir", str(tmp_path / "state")]
    )
    heard: list[Any] = []
    changed = trio.Event()

    async def on_message(message: Any) -> None:
        heard.append(message)
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    with trio.fail_after(20):
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write, message_handler=on_message) as client,
        ):
            await client.initialize()
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert "mini_echo" in names and "mini_add" in names
            echoed = await client.call_tool("mini_echo", {"text": "hi"})
            assert echoed.content[0].text == "hi"  # type: ignore[union-attr]
            steps: list[float] = []

            async def progress(value: float, total: float | None, message: str | None) -> None:
                steps.append(value)

            done = await client.call_tool(
                "mini_progress", {"steps": 3, "interval": 0.01}, progress_callback=progress
            )
            assert done.content[0].text == "done after 3 steps"  # type: ignore[union-attr]
            assert steps == [1, 2, 3]
            await client.call_tool("mini_add_tool", {"name": "extra"})
            await changed.wait()
            assert "mini_extra" in [tool.name for tool in (await client.list_tools()).tools]
    # stdin closed: the front stopped and took its servers with it.
    with trio.fail_after(10):
        await eventually(lambda: not processes_with(str(tmp_path / "methods.log")))


class Front:
    """The command on raw pipes: one line out, one line in."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        assert process.stdin is not None and process.stdout is not None
        self._lines = lines(process.stdout, 1 << 24)

    async def send(self, message: Any) -> None:
        raw = message if isinstance(message, bytes) else json.dumps(message).encode()
        assert self.process.stdin is not None
        await self.process.stdin.send_all(raw + b"\n")

    async def receive(self) -> dict[str, Any]:
        line = await self._lines.__anext__()
        assert not isinstance(line, Oversized)
        answer: dict[str, Any] = json.loads(line)  # only JSON on stdout, or this fails
        return answer

    async def rest(self) -> AsyncIterator[dict[str, Any]]:
        """Every line until stdout ends."""
        async for line in self._lines:
            assert not isinstance(line, Oversized)
            yield json.loads(line)


async def test_bad_lines_get_errors_a_cancel_reaches_the_backend_and_the_session_lives_on(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, {"mini": mini(tmp_path)}, gateway={"max_message_bytes": 4096})
    command = [str(CLI), "stdio", "--config", str(config), "--state-dir", str(tmp_path / "state")]
    process = await trio.lowlevel.open_process(command, stdin=-1, stdout=-1, stderr=-1)
    front = Front(process)
    try:
        with trio.fail_after(20):
            init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw"}}
            await front.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
            assert (await front.receive())["result"]["protocolVersion"] == "2025-06-18"
            await front.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

            big = {"name": "mini_echo", "arguments": {"text": "x" * 10_000}}
            await front.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": big})
            oversized = await front.receive()
            assert oversized["id"] == 2 and oversized["error"]["code"] == -32600
            assert "max_message_bytes" in oversized["error"]["message"]
            await front.send(b"{not json")
            assert (await front.receive())["error"]["code"] == -32700
            deep = (
                b'{"jsonrpc": "2.0", "id": 8, "method": "ping", "params": ' + b"[" * 1500 + b"]" * 1500 + b"}"
            )
            await front.send(deep)
            too_deep = await front.receive()
            assert (too_deep["id"], too_deep["error"]["code"]) == (8, -32700)
            assert too_deep["error"]["message"].startswith("the message is nested deeper than 1024 levels")
            await front.send([{"jsonrpc": "2.0", "id": 3, "method": "ping"}])
            assert (await front.receive())["error"]["code"] == -32600

            # A slow call, cancelled by the client's id while it waits; a ping is
            # answered meanwhile (each request is handled on its own).
            slow = {"name": "mini_sleep", "arguments": {"seconds": 30}}
            await front.send({"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": slow})
            await front.send({"jsonrpc": "2.0", "id": 4, "method": "ping"})
            assert await front.receive() == {"jsonrpc": "2.0", "id": 4, "result": {}}
            calls = tmp_path / "calls.log"
            await eventually(lambda: calls.exists() and "sleep" in calls.read_text())  # reached the backend
            cancel = {"requestId": "slow", "reason": "changed my mind"}
            await front.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
            told = tmp_path / "methods.log"
            await eventually(
                lambda: "notifications/cancelled" in told.read_text().split()
            )  # the backend was told

            # No line answers the cancelled request: the next one is this call's.
            call = {"name": "mini_add", "arguments": {"a": 2, "b": 3}}
            await front.send({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": call})
            assert await front.receive() == {
                "jsonrpc": "2.0",
                "id": 5,
                "result": {"content": [{"type": "text", "text": "5"}], "isError": False},
            }

            assert process.stdin is not None
            await process.stdin.aclose()
            assert [m async for m in front.rest() if m.get("id") == "slow"] == []  # nor after it
            assert await process.wait() == 0
        assert processes_with(str(tmp_path / "methods.log")) == []
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.skipif(not EVERYTHING.exists(), reason="server-everything is not installed (.ci/setup)")
async def test_a_backend_elicitation_reaches_the_clients_callback_and_is_answered(tmp_path: Path) -> None:
    everything = {"command": str(EVERYTHING), "args": ["stdio"], "trusted": True}
    config = write_config(tmp_path, {"everything": everything})
    params = StdioServerParameters(
        command=str(CLI), args=["stdio", "--config", str(config), "--state-dir", str(tmp_path / "state")]
    )
    asked: list[types.ElicitRequestParams] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"name": "name-from-client"})

    with trio.fail_after(30):
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write, elicitation_callback=elicit) as client,
        ):
            await client.initialize()
            result = await client.call_tool("everything_trigger-elicitation-request", {})
    assert len(asked) == 1
    assert "name-from-client" in json.dumps(result.model_dump(mode="json"))


def rpc(request_id: Any, method: str, params: Any = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode() + b"\n"


INITIALIZE = rpc(
    1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "p"}}
)


async def test_what_a_pipe_sends_is_answered_before_its_end_stops_the_front(tmp_path: Path) -> None:
    """``printf '<initialize>\\n<tools/list>\\n' | mcp-supervisor stdio``: stdin ends right
    after the requests; both are answered (tools/list after initialize), then it exits."""
    config = write_config(tmp_path, {"mini": mini(tmp_path)})
    command = [str(CLI), "stdio", "--config", str(config), "--state-dir", str(tmp_path / "state")]
    piped = (
        INITIALIZE
        + rpc(2, "tools/list")
        + rpc(3, "tools/call", {"name": "mini_add", "arguments": {"a": 1, "b": 2}})
    )
    with trio.fail_after(20):
        done = await trio.run_process(command, stdin=piped, capture_stdout=True, capture_stderr=True)
    answers = {answer["id"]: answer for answer in map(json.loads, done.stdout.splitlines())}
    assert sorted(answers) == [1, 2, 3], done.stdout
    assert answers[1]["result"]["serverInfo"]["name"] == "mcp-supervisor"
    assert "mini_echo" in [tool["name"] for tool in answers[2]["result"]["tools"]]
    assert answers[3]["result"]["content"] == [{"type": "text", "text": "3"}]


async def test_a_request_still_running_when_the_time_after_stdins_end_runs_out_is_cut_and_said_so(
    tmp_path: Path,
) -> None:
    """The bound (``EOF_GRACE_S``; 0.3 s here): a request that would run on for ever does
    not hold the exit; its call is cancelled at the backend and its id gets an error."""
    methods = tmp_path / "methods.log"
    spec = mini_spec("mini", "--methods-log", str(methods), python=sys.executable)
    stdin_send, stdin = trio.testing.memory_stream_pair()
    stdout, stdout_receive = trio.testing.memory_stream_pair()
    async with Supervisor.open(config_of(spec), state_dir=tmp_path) as sup, trio.open_nursery() as nursery:
        nursery.start_soon(partial(serve_stdio, sup, stdin, stdout, eof_grace_s=0.3))
        answers = lines(stdout_receive, 1 << 20)
        await stdin_send.send_all(INITIALIZE)
        assert json.loads(await anext(answers))["id"] == 1  # type: ignore[arg-type]
        await stdin_send.send_all(
            rpc("slow", "tools/call", {"name": "mini_sleep", "arguments": {"seconds": 60}})
        )
        with trio.fail_after(10):
            await eventually(lambda: methods.exists() and "tools/call" in methods.read_text())
        began = trio.current_time()
        await stdin_send.aclose()
        with trio.fail_after(10):
            cut = json.loads(await anext(answers))  # type: ignore[arg-type]
            await eventually(lambda: "notifications/cancelled" in methods.read_text().split())
    assert 0.3 <= trio.current_time() - began < 5  # the bound, not the 60 s call
    assert cut["id"] == "slow" and cut["error"]["code"] == INTERNAL_ERROR
    assert "stdin was closed" in cut["error"]["message"]


async def test_lines_are_read_with_a_bound_and_an_oversized_one_is_skipped_not_kept() -> None:
    send, receive = trio.testing.memory_stream_pair()
    got: list[bytes | Oversized] = []

    async def read() -> None:
        async for line in lines(receive, 100):
            got.append(line)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        await send.send_all(b'{"id": 7, "x": "' + b"y" * 70_000)  # over the bound, no newline yet
        await trio.testing.wait_all_tasks_blocked()
        assert got == []  # the line is not over yet
        await send.send_all(b'"}\nshort\n')
        await send.aclose()
    oversized, short = got
    assert isinstance(oversized, Oversized) and oversized.head.startswith(b'{"id": 7')
    assert short == b"short"


async def test_an_ask_is_denied_at_once_saying_there_is_no_operator(
    autojump_clock: trio.testing.MockClock,
) -> None:
    desk = ApprovalDesk(deny_asks, timeout_s=120)
    request = ApprovalRequest("apr-1", "mini_rm", "mini", "mcp:mini:rm", {}, "risky", "s1", "default")
    started = trio.current_time()
    verdict = await desk.ask(request)
    assert trio.current_time() - started < 1  # not after the 120 s approval timeout
    assert verdict.approval.decision == "deny"
    assert verdict.denial is not None and "no operator" in verdict.denial and "trust rule" in verdict.denial
