"""Worker: what each step of our call path costs on its own (µs per operation).

    python benchmarks/bench_breakdown.py [--rounds N]

The pure steps of ``Turn.call`` (supervisor/calls/turns.py) and of the connection actor,
run in a tight loop on the same objects a real call uses (the minimal server's echo
tool, a trusted server, no rules), plus the Trio hand-offs a call makes between tasks
and the SQLite write of one audit row per transaction versus 64 per transaction; and
the steps of one relist of a 200-tool server (what the router does after
``notifications/tools/list_changed``).
The I/O itself (two pipe writes and reads, the server's work) is what the floor
measures; the sum below is what we add on top, before contention.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from _common import emit

from actors.connection.calls import InFlightTable
from actors.connection.messages import CallSucceeded, CallTool
from actors.protocol.messages import Tool
from actors.protocol.ndjson import LineDecoder, encode_lines
from actors.protocol.payloads import structure_call_result
from actors.protocol.session import ClientSession
from actors.router.catalog import make_entry
from actors.router.envelope import success
from actors.router.tool_entries import entries_for
from actors.router.validation import validate_arguments
from actors.spec import ServerSpec
from supervisor.calls.turns import _envelope
from supervisor.sessions.policy import Policy
from supervisor.settings.model import TrustSettings
from supervisor.store import AuditRow, Store, audit_hash, hash_arguments
from supervisor.store.journal_lines import encode_fields, line_fields

ECHO = Tool(
    "echo",
    "Echo the given text back.",
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)
RESPONSE = b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"hi"}]}}\n'


def per_op_us(fn: Callable[[], Any], rounds: int) -> float:
    """Best of 5 runs of ``rounds`` calls, in µs per call (the least disturbed run)."""
    for _ in range(min(rounds, 200)):
        fn()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(rounds):
            fn()
        best = min(best, (time.perf_counter() - start) / rounds)
    return best * 1e6


def _ready_session() -> ClientSession:
    session = ClientSession()
    session.start_initialize()
    session.messages_to_send()
    session.receive_messages(
        LineDecoder().feed(
            b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},'
            b'"serverInfo":{"name":"m","version":"0"}}}\n'
        )
    )
    session.next_event()
    session.messages_to_send()
    return session


def pure_steps(rounds: int) -> dict[str, float]:
    import trio

    spec = ServerSpec(name="bench", command=("x",), trusted=True)
    entry = make_entry("bench_echo", spec, ECHO, 200)
    assert entry.schema is not None
    schema = entry.schema
    policy = Policy(TrustSettings(), trusted=lambda server: True)
    arguments = {"text": "hi"}
    session = _ready_session()
    decoder = LineDecoder()  # the stdio framing, as the transport runs it
    table = InFlightTable(30.0, 300.0)
    reply_send, _reply_receive = trio.open_memory_channel[Any](1)
    call = CallTool("echo", arguments, reply_send, None)
    out: dict[str, float] = {}

    out["validate_arguments (the schema's fast check)"] = per_op_us(
        lambda: validate_arguments("bench_echo", schema, arguments), rounds
    )
    slow = attrs.evolve(schema, fast=None)
    out["validate_arguments without the fast check (jsonschema iter_errors + best_match)"] = per_op_us(
        lambda: validate_arguments("bench_echo", slow, arguments), rounds
    )
    out["validator.is_valid (jsonschema, no best_match)"] = per_op_us(
        lambda: schema.validator.is_valid(arguments),
        rounds,  # type: ignore[attr-defined, union-attr]
    )

    def decide() -> None:
        policy.decide(entry, arguments, tenant="default", memory={})
        policy.allowed(entry)

    out["policy.decide + allowed (no rules: no subject computed)"] = per_op_us(decide, rounds)
    out["audit_hash (orjson sorted keys + sha256)"] = per_op_us(lambda: audit_hash(arguments), rounds)
    out["hash_arguments (stdlib json sort_keys + sha256)"] = per_op_us(
        lambda: hash_arguments(arguments), rounds
    )

    def channel() -> None:
        trio.open_memory_channel[Any](1)

    out["trio.open_memory_channel(1) per call"] = per_op_us(channel, rounds)

    def send() -> None:
        request_id = session.send_request(
            "tools/call", {"name": "echo", "arguments": dict(arguments)}, progress=True
        )
        encode_lines(session.messages_to_send())
        table.add(request_id, call, 0.0)
        session.receive_messages(decoder.feed(RESPONSE % request_id))
        event = session.next_event()
        table.pop(request_id)
        CallSucceeded(structure_call_result(event.result))  # type: ignore[union-attr]

    out["protocol: send_request+encode, decode+receive_messages, in-flight table, result"] = per_op_us(
        send, rounds
    )
    outcome = CallSucceeded(structure_call_result({"content": [{"type": "text", "text": "hi"}]}))

    class _View:  # what _envelope reads of a ServerView
        spec = ServerSpec(name="bench", command=("x",))

    out["envelope (_envelope → success)"] = per_op_us(
        lambda: _envelope("bench_echo", _View(), outcome, 0), rounds
    )  # type: ignore[arg-type]
    envelope = success("bench_echo", outcome.result.content, None, 0, 16384)

    def audit_line() -> None:
        digest, size = audit_hash(arguments)
        fields = line_fields(
            "i.1", time.time(), "default", "sid", "bench_echo", "bench", "allow", "ok", 0, digest, size, 0
        )
        fields["result_bytes"] = len(envelope.text.encode())
        encode_fields(fields)

    out["audit line (hash + its fields, encoded: line_fields, encode_fields)"] = per_op_us(audit_line, rounds)
    return out


def trio_hops(rounds: int) -> dict[str, float]:
    """Task-to-task hand-offs: what a call pays in scheduling, per call."""
    import trio

    out: dict[str, float] = {}

    async def main() -> None:
        # One request/reply through a mailbox to another task, with a fresh reply channel
        # (the shape of Turn → ConnectionActor → reply).
        mailbox_send, mailbox_receive = trio.open_memory_channel[Any](256)

        async def actor() -> None:
            async for reply in mailbox_receive:
                reply.send_nowait(1)

        # The floor's shape: an Event set by another task.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(actor)
            start = time.perf_counter()
            for _ in range(rounds):
                send, receive = trio.open_memory_channel[int](1)
                await mailbox_send.send(send)
                await receive.receive()
            out["mailbox request + size-1 reply channel (1 task hop)"] = (
                (time.perf_counter() - start) / rounds * 1e6
            )
            start = time.perf_counter()
            for _ in range(rounds):
                await trio.lowlevel.checkpoint()
            out["one trio checkpoint (schedule round)"] = (time.perf_counter() - start) / rounds * 1e6
            start = time.perf_counter()
            for _ in range(rounds):
                await trio.to_thread.run_sync(int)
            out["trio.to_thread.run_sync round trip (store batch)"] = (
                (time.perf_counter() - start) / rounds * 1e6
            )
            mailbox_send.close()

    trio.run(main)
    return out


def store_commits(rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        store = Store.open(Path(tmp) / "s.db")
        row = AuditRow(
            time.time(), "default", "sid", "bench_echo", "bench", "allow", "ok", 0, "0" * 64, 13, 2
        )
        out = {}
        count = max(rounds // 20, 200)
        start = time.perf_counter()
        for _ in range(count):
            store.add_audit([row])
        out["SQLite: 1 audit row per transaction (per row)"] = (time.perf_counter() - start) / count * 1e6
        start = time.perf_counter()
        for _ in range(count // 8):
            store.add_audit([row] * 64)
        out["SQLite: 64 audit rows per transaction (per row)"] = (
            (time.perf_counter() - start) / (count // 8 * 64) * 1e6
        )
        store.close()
    return out


def relist_steps(repeat: int = 20) -> dict[str, float]:
    """What one relist of a 200-tool server costs the router, step by step (µs)."""
    import orjson
    import trio
    from search_bench import make_catalog

    from actors.protocol.pages import parse_tools_page
    from actors.router import risk, trust
    from actors.router.catalog import ServerView, shard_of

    server, docs = next(iter(make_catalog(10_000, 50).items()))
    wire = [
        {
            "name": tool_id.removeprefix(f"{server}_"),
            "description": text.removeprefix(f"{tool_id} "),
            "inputSchema": {"type": "object", "properties": {}},
        }
        for tool_id, text in docs
    ]
    raw = orjson.dumps({"tools": wire})
    spec = ServerSpec(name=server, command=("x",), trusted=True)
    page = parse_tools_page(orjson.loads(raw))
    tools = page.tools
    entries = tuple(make_entry(f"{server}_{t.name}", spec, t, 200) for t in tools)
    send, _receive = trio.open_memory_channel[Any](1)
    view = ServerView(server, spec, send, entries=entries)
    n = len(tools)
    ids = {t.name: f"{server}_{t.name}" for t in tools}

    def timed(fn: Callable[[], Any]) -> float:
        fn()
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        return (time.perf_counter() - start) / repeat * 1e6

    return {
        f"relist {n} tools: orjson.loads of the page": timed(lambda: orjson.loads(raw)),
        f"relist {n} tools: parse_tools_page (cattrs structure)": timed(
            lambda: parse_tools_page(orjson.loads(raw))
        ),
        f"relist {n} tools: make_entry for each": timed(
            lambda: [make_entry(f"{server}_{t.name}", spec, t, 200) for t in tools]
        ),
        f"relist {n} tools: of which risk.classify": timed(
            lambda: [risk.classify(t.name, t.description, t.annotations) for t in tools]
        ),
        f"relist {n} tools: of which trust.fingerprint": timed(
            lambda: [trust.fingerprint(t.description, t.input_schema) for t in tools]
        ),
        f"relist {n} tools: search shard (shard_of: tokenize + index)": timed(lambda: shard_of(view)),
        f"relist {n} tools, none changed: entries reused (router entries_for; no re-index)": timed(
            lambda: entries_for(view, tools, ids, 200)
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20000)
    args = parser.parse_args()
    emit(
        {**pure_steps(args.rounds), **trio_hops(args.rounds), **store_commits(args.rounds), **relist_steps()}
    )


if __name__ == "__main__":
    sys.exit(main())
