"""The MCP conventions' metrics beside the spans (issue 30): every request we send and
receive is measured in seconds with the span's bounded attributes, and so is each
session, ours with a server and a gateway client's with us; ``serve`` exports them
where the ``OTEL_*`` variables say, and refuses an exporter it does not have."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import trio

from tests.support.admin import admin_running, config_of, mini_spec
from tests.support.gateway_http import McpHttp
from tests.support.paths import REPO
from tests.support.traces import Traces


async def test_requests_and_sessions_are_measured_in_seconds(tmp_path: Path, traces: Traces) -> None:
    async with admin_running(config_of(mini_spec("mini")), tmp_path) as api:
        mcp = McpHttp(api.http())
        await mcp.open()
        with trio.fail_after(20):
            answer = await mcp.call(2, "tools/call", {"name": "mini_echo", "arguments": {"text": "x"}})
            assert answer["result"]["isError"] is False
            failed = await mcp.call(3, "tools/call", {"name": "mini_fail", "arguments": {}})
            assert failed["result"]["isError"] is True
            ended = await mcp.http.request("DELETE", "/mcp", headers=mcp.headers())
            assert ended.status in (200, 204), ended
    served = {
        (attributes["mcp.method.name"], attributes.get("error.type")): (attributes, count, total)
        for attributes, count, total in traces.points("mcp.server.operation.duration")
    }
    attributes, count, total = served[("tools/call", None)]
    assert count == 1 and 0 < total < 20  # seconds, not milliseconds
    assert attributes["gen_ai.tool.name"] == "mini_echo" and attributes["network.transport"] == "tcp"
    assert not {"jsonrpc.request.id", "mcp.session.id", "client.address"} & set(attributes)  # per request
    assert served[("tools/call", "tool_error")][1] == 1
    sent = {
        (attributes["mcp.method.name"], attributes.get("gen_ai.tool.name")): count
        for attributes, count, _ in traces.points("mcp.client.operation.duration")
    }
    assert sent[("tools/call", "echo")] == 1 and sent[("tools/call", "fail")] == 1
    assert sent[("tools/list", None)] >= 1  # the connection's own requests too
    (gateway_session,) = traces.points("mcp.server.session.duration")
    assert gateway_session[0] == {"network.transport": "tcp", "mcp.protocol.version": "2025-11-25"}
    (server_session,) = traces.points("mcp.client.session.duration")  # recorded when mini stopped
    assert server_session[0] == {"mcp_supervisor.server": "mini"} and server_session[1] == 1


def test_an_exporter_we_do_not_have_is_refused_before_anything_starts(tmp_path: Path) -> None:
    demo = str(REPO / "config" / "demo.json")
    command = [sys.executable, "-m", "supervisor.cli.main", "serve", "--config", demo]
    environment = {"PATH": "/usr/bin:/bin", "OTEL_METRICS_EXPORTER": "prometheus"}
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=environment, timeout=60)
    assert done.returncode == 2, done
    assert "OTEL_METRICS_EXPORTER: unknown exporter 'prometheus' (otlp, console or none)" in done.stderr
    assert "Traceback" not in done.stderr
