"""Traces reach the other records of a call (issue 30): the log lines of work done for a
traced request carry its trace and span ids, and its audit rows keep its trace id.
Untraced lines and rows carry none."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry import baggage

from actors.redaction import Redactor
from supervisor import Supervisor
from supervisor.runtime import tracing
from supervisor.runtime.logs import StructuredFormatter
from supervisor.sessions.approvals import ApprovalRequest
from supervisor.settings.model import Config, TrustRule, TrustSettings
from tests.runtime.test_tracing import spec
from tests.support.traces import Traces


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


class Lines:
    """What a ``--log-format json`` handler on the root logger writes, one dict a line."""

    def __init__(self, stream: io.StringIO) -> None:
        self.stream = stream

    def all(self) -> list[dict[str, Any]]:
        return [orjson.loads(line) for line in self.stream.getvalue().splitlines()]

    def event(self, name: str) -> dict[str, Any]:
        found = [line for line in self.all() if line["event"].startswith(name)]
        assert len(found) == 1, [line["event"] for line in self.all()]
        return found[0]


@pytest.fixture
def lines() -> Iterator[Lines]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(StructuredFormatter(Redactor(()), json_lines=True))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield Lines(stream)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def maybe(request: ApprovalRequest) -> str:
    """An approver whose answer is neither allow nor deny: the desk logs a warning, in
    the call's task, while the wait for it is the current span."""
    return "maybe"


async def test_a_line_logged_for_a_traced_call_carries_its_trace(
    tmp_path: Path, traces: Traces, lines: Lines
) -> None:
    config = Config(servers=(spec("mini"),), trust=TrustSettings(rules=(TrustRule("mcp:mini:*"),)))
    async with Supervisor.open(config, maybe, state_dir=tmp_path) as sup, sup.session() as session:
        turn = await session.begin_turn()
        carrying = baggage.set_baggage("user.tier", "platinum")  # the host's context, baggage in it
        with traces.tracer.start_as_current_span("host turn", context=carrying) as host:
            envelope = await turn.call("mini_echo", {"text": "hi"})
    assert envelope.error is not None and envelope.error.code == "denied"
    approval = traces.named("mcp_supervisor.approval")
    warned = lines.event("approver returned")
    assert warned["trace_id"] == f"{host.get_span_context().trace_id:032x}"
    assert warned["span_id"] == f"{approval.context.span_id:016x}"
    assert re.fullmatch(r"[0-9a-f]{32}", warned["trace_id"])
    assert re.fullmatch(r"[0-9a-f]{16}", warned["span_id"])
    started = lines.event("supervisor started")  # logged with no span current
    assert "trace_id" not in started and "span_id" not in started
    assert "platinum" not in lines.stream.getvalue()  # baggage is never logged


def format_line(json_lines: bool) -> str:
    record = logging.LogRecord("supervisor.test", logging.WARNING, __file__, 1, "state", None, None)
    record.fields = {"server": "time"}
    return StructuredFormatter(Redactor(()), json_lines=json_lines).format(record)


def test_key_value_lines_carry_the_ids_too(traces: Traces) -> None:
    with traces.tracer.start_as_current_span("work") as span:
        line = format_line(json_lines=False)
    context = span.get_span_context()
    assert line.endswith(f"state server=time trace_id={context.trace_id:032x} span_id={context.span_id:016x}")


def test_with_traces_off_a_line_has_no_ids_even_inside_a_hosts_span(traces: Traces) -> None:
    """The formatter asks the tracer only while traces are on: a host's own span is not
    ours to report once ``TRACING.active`` is None."""
    tracing.TRACING.active = None
    with traces.tracer.start_as_current_span("host's own"):
        assert "trace_id" not in orjson.loads(format_line(json_lines=True))
        assert "trace_id" not in format_line(json_lines=False)


def test_no_ids_without_a_valid_current_span(traces: Traces) -> None:
    assert "trace_id" not in orjson.loads(format_line(json_lines=True))
    assert tracing.TRACING.active is not None and tracing.TRACING.active.current_ids() is None


async def test_a_traced_calls_audit_row_keeps_its_trace_id(tmp_path: Path, traces: Traces) -> None:
    config = Config(servers=(spec("mini"),))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        turn = await session.begin_turn()
        with sup.events.subscribe() as listener:
            with traces.tracer.start_as_current_span("host turn"):
                assert (await turn.call("mini_echo", {"text": "traced"})).ok
            refused = await turn.call("no_such_tool", {})  # traced too: our span is its root
            assert refused.error is not None and refused.error.code == "unknown_tool"
            tracing.TRACING.active = None  # traces off (the fixture puts them back)
            assert (await turn.call("mini_echo", {"text": "untraced"})).ok
            events = [listener.events.receive_nowait() for _ in range(3)]
        await sup.store.flush()
        untraced, unknown, echoed = sup.store.store.audit_rows(session=session.id)
    echo_span = traces.named("mcp_supervisor tools/call mini_echo")
    assert echoed.trace_id == f"{echo_span.context.trace_id:032x}"
    assert echoed.trace_id == f"{traces.named('tools/call echo').context.trace_id:032x}"
    assert (
        unknown.trace_id == f"{traces.named('mcp_supervisor tools/call no_such_tool').context.trace_id:032x}"
    )
    assert unknown.trace_id != echoed.trace_id
    assert untraced.trace_id is None
    # the call events say the same: a traced call's names its trace, an untraced one's is as before
    assert [event.get("trace_id") for event in events] == [echoed.trace_id, unknown.trace_id, None]
    assert "trace_id" not in events[2]
