"""Traces (issue 30): a call through the embedding API to a real stdio server, under
the real SDK's in-memory exporter; every span ends on every path; and the package
loads no OpenTelemetry until ``Supervisor.open`` asks for it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from opentelemetry import baggage, trace
from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind

from actors.spec import ServerSpec
from supervisor import Supervisor
from supervisor.runtime.otel import extract_parent
from supervisor.settings.model import Config, TrustRule, TrustSettings
from tests.actors.transports.test_stdio_transport import eventually
from tests.support.paths import REPO, SERVERS
from tests.support.traces import Traces

MINI = str(SERVERS / "mini_server.py")


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def spec(name: str, **options: Any) -> ServerSpec:
    command = (sys.executable, MINI, "--whoami", "--calls-log", str(Path.cwd() / f"{name}-calls.jsonl"))
    options.setdefault("trusted", True)
    return ServerSpec(name=name, command=command, shutdown_grace_s=0.5, **options)


def received(name: str) -> list[dict[str, Any]]:
    log = Path.cwd() / f"{name}-calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def test_a_call_is_our_span_over_a_client_span_under_the_hosts(tmp_path: Path, traces: Traces) -> None:
    config = Config(servers=(spec("mini"),))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        turn = await session.begin_turn()
        token = otel_context.attach(baggage.set_baggage("user.tier", "gold"))
        try:
            with traces.tracer.start_as_current_span("host turn") as host:
                envelope = await turn.call("mini_echo", {"text": "hi"})
        finally:
            otel_context.detach(token)
        assert envelope.ok, envelope
    ours = traces.named("mcp_supervisor tools/call mini_echo")
    client = traces.named("tools/call echo")
    host_context = host.get_span_context()
    assert {span.context.trace_id for span in (ours, client)} == {host_context.trace_id}
    assert ours.parent is not None and ours.parent.span_id == host_context.span_id
    assert client.parent is not None and client.parent.span_id == ours.context.span_id
    assert client.kind is SpanKind.CLIENT and ours.kind is SpanKind.INTERNAL
    attributes = dict(client.attributes or {})
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == "echo"
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["network.transport"] == "pipe"
    assert attributes["mcp_supervisor.server"] == "mini"
    assert attributes["jsonrpc.request.id"] == str(received("mini")[0]["id"])
    assert isinstance(attributes["mcp.protocol.version"], str)
    assert "error.type" not in attributes
    mine = dict(ours.attributes or {})
    assert mine["mcp_supervisor.trust.decision"] == "allow"
    assert mine["mcp_supervisor.envelope_code"] == "ok"
    assert mine["mcp_supervisor.server"] == "mini"
    assert isinstance(mine["mcp_supervisor.epoch"], int)
    # the server got the CLIENT span as its parent, and the baggage, in params._meta
    carried = received("mini")[0]["trace"]
    trace_id, span_id = f"{host_context.trace_id:032x}", f"{client.context.span_id:016x}"
    assert carried["traceparent"].startswith(f"00-{trace_id}-{span_id}-")  # flags: sampled (and random)
    assert carried["baggage"] == "user.tier=gold"
    assert not any("gold" in str(span.attributes) for span in traces.spans())  # baggage never logged
    assert traces.counter.open == 0


async def chaos(tmp_path: Path, case: str) -> str:
    """Run one call that goes wrong by ``case``; its envelope code."""
    options: dict[str, Any] = {"call_timeout_s": 0.5} if case == "timeout" else {}
    if case == "busy":
        options["concurrency"] = 1
    rules = (TrustRule("mcp:mini:*", action="deny"),) if case == "denied" else ()
    config = Config(servers=(spec("mini", **options),), trust=TrustSettings(rules=rules))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        turn = await session.begin_turn()
        if case in ("denied", "timeout"):
            return (await turn.call("mini_sleep", {"seconds": 5})).error.code  # type: ignore[union-attr]
        if case == "crash":
            return (await turn.call("mini_crash", {})).error.code  # type: ignore[union-attr]
        pid = json.loads((await turn.call("mini_whoami", {})).text)["pid"]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(turn.call, "mini_sleep", {"seconds": 30})
            with trio.fail_after(10):
                await eventually(lambda: any(line["name"] == "sleep" for line in received("mini")))
            if case == "busy":
                code = (await turn.call("mini_echo", {"text": "x"})).error.code  # type: ignore[union-attr]
                nursery.cancel_scope.cancel()
                return code
            if case == "cancelled":
                nursery.cancel_scope.cancel()
                return "cancelled"
            os.kill(pid, signal.SIGKILL)
        return "unavailable"


@pytest.mark.parametrize("case", ["sigkill", "crash", "cancelled", "timeout", "busy", "denied"])
async def test_every_span_ends_whatever_ends_the_call(tmp_path: Path, traces: Traces, case: str) -> None:
    with traces.tracer.start_as_current_span("host"):
        code = await chaos(tmp_path, case)
    assert traces.counter.open == 0, [span.name for span in traces.spans()]
    # the liveness ping after a timeout makes no span, though the supervisor was opened in one
    assert "ping" not in {span.name for span in traces.spans()}
    failed = [
        span
        for span in traces.spans()
        if span.name
        == "mcp_supervisor tools/call mini_"
        + {
            "sigkill": "sleep",
            "crash": "crash",
            "cancelled": "sleep",
            "timeout": "sleep",
            "busy": "echo",
            "denied": "sleep",
        }[case]
    ]
    assert failed and (failed[-1].attributes or {})["error.type"] == code, code
    if case == "denied":  # the rule that decided: the first (and only) of the config's
        assert (failed[-1].attributes or {})["mcp_supervisor.trust.rule"] == 0
    if case in ("sigkill", "crash", "timeout", "busy", "cancelled"):
        client = [span for span in traces.spans() if span.kind is SpanKind.CLIENT]
        assert (client[-1].attributes or {})["error.type"] in (code, "unavailable", "cancelled")


def test_the_parent_comes_from_meta_before_headers() -> None:
    meta = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    header = {"TraceParent": "00-" + "3" * 32 + "-" + "4" * 16 + "-01"}
    for given, trace_id in (
        (extract_parent(meta, header), 0x1 * int("1" * 32, 16)),
        (extract_parent(None, header), int("3" * 32, 16)),
    ):
        assert given is not None
        assert trace.get_current_span(given).get_span_context().trace_id == trace_id
    assert extract_parent({}, {}) is None


def run_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True, timeout=120
    )
    return done.stdout.strip()


def test_importing_the_packages_loads_no_opentelemetry() -> None:
    probe = (
        "import sys, supervisor, actors, supervisor.cli.main\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    assert run_python(probe) == "[]"


def test_without_the_extra_everything_works_untraced(tmp_path: Path) -> None:
    probe = f"""
import sys
sys.modules["opentelemetry"] = None  # the extra is not installed
import trio
from actors.spec import ServerSpec
from supervisor import Supervisor
from supervisor.runtime.tracing import TRACING
from supervisor.settings.model import Config

async def main():
    spec = ServerSpec(name="mini", command=(sys.executable, {MINI!r}), trusted=True, shutdown_grace_s=0.5)
    config = Config(servers=(spec,))
    async with Supervisor.open(config, state_dir={str(tmp_path)!r}) as sup, sup.session() as s:
        envelope = await (await s.begin_turn()).call("mini_echo", {{"text": "untraced"}})
    print(envelope.text, TRACING.active)

trio.run(main)
"""
    assert run_python(probe) == "untraced None"


def test_the_otel_variables_configure_the_sdk() -> None:
    """What an operator sets: the exporter and the service name (the console exporter
    writes to stderr: stdout is the stdio front's protocol)."""
    probe = """
import os, sys
os.environ.update(OTEL_TRACES_EXPORTER="console", OTEL_SERVICE_NAME="edge-gateway")
from opentelemetry import trace
from supervisor.runtime.tracing import traces_from_environment
with traces_from_environment():
    with trace.get_tracer("t").start_as_current_span("hello"):
        pass
    print(trace.get_tracer_provider().resource.attributes["service.name"])
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True, timeout=120
    )
    assert done.stdout.strip() == "edge-gateway"
    assert '"name": "hello"' in done.stderr  # flushed when the block ended


def test_without_otel_variables_nothing_is_imported() -> None:
    probe = (
        "import sys\nfrom supervisor.runtime.tracing import traces_from_environment\n"
        "with traces_from_environment({}): pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk')))"
    )
    assert run_python(probe) == "[]"


def test_an_unknown_exporter_is_refused() -> None:
    from supervisor.runtime.otel import configure_from_environment

    with pytest.raises(ValueError, match="unknown exporter 'zipkin'"):
        configure_from_environment({"OTEL_TRACES_EXPORTER": "zipkin"})


def test_with_the_extra_but_no_provider_traces_stay_off(tmp_path: Path) -> None:
    """OpenTelemetry's default provider records nothing: a call pays for no span (the
    host sets its provider before ``Supervisor.open``, ``serve`` from ``OTEL_*``)."""
    probe = f"""
import sys
import trio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from actors.spec import ServerSpec
from supervisor import Supervisor
from supervisor.runtime.tracing import TRACING
from supervisor.settings.model import Config

async def main():
    spec = ServerSpec(name="mini", command=(sys.executable, {MINI!r}), trusted=True, shutdown_grace_s=0.5)
    async with Supervisor.open(Config(servers=(spec,)), state_dir={str(tmp_path / "a")!r}):
        print(TRACING.active is None)
    trace.set_tracer_provider(TracerProvider())
    async with Supervisor.open(Config(servers=(spec,)), state_dir={str(tmp_path / "b")!r}):
        print(TRACING.active is None)

trio.run(main)
"""
    assert run_python(probe).split() == ["True", "False"]
