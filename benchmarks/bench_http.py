"""Worker: Streamable HTTP call latency of one client against the SDK's own server.

    python benchmarks/bench_http.py --client ours|sdk --url http://127.0.0.1:PORT/mcp
                                    [--protocol auto|2025-11-25|2026-07-28]
                                    [--seq N] [--tput N] [--inflight 16] [--warmup N]

The server is ``benchmarks/http_server.py`` (the official ``mcp`` SDK's Streamable HTTP
server, started once by ``run.py`` for every repetition of both clients), and both
clients call its ``echo`` tool with ``{"text": "hi"}``:

* ``ours``: ``turn.call`` through ``Supervisor.open`` with the server as a trusted
  ``remote`` (``transport: streamable-http``): validation, trust decision, the
  connection actor, the envelope and the audit row, as in ``bench_calls.py``;
* ``sdk``: the SDK's ``streamable_http_client`` + ``ClientSession`` (asyncio).

``--protocol`` picks the era: ours gets it as the server's ``protocol`` setting
(``auto`` probes ``server/discover``, and the SDK 2.3 server speaks 2026-07-28); the
SDK's client opens with ``initialize()`` (``auto``, ``2025-11-25``) or with
``discover()`` (``2026-07-28``).

Measured as in ``bench_calls.py`` (sequential latency, then throughput with
``--inflight`` calls in flight on one session, client CPU per call).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from typing import Any

from _common import emit, load_json_config, quiet_logging
from bench_calls import _measure, _trio_spawn, measure_sdk_session


async def run_ours(args: argparse.Namespace) -> dict[str, Any]:
    from supervisor import Supervisor

    quiet_logging()
    server = {"url": args.url, "transport": "streamable-http", "trusted": True, "protocol": args.protocol}
    config = load_json_config({"servers": {"bench": server}})
    with tempfile.TemporaryDirectory(prefix="bench-http-") as state_dir:
        async with (
            Supervisor.open(config, state_dir=state_dir) as sup,
            sup.session() as session,
        ):
            turn = await session.begin_turn()
            era = sup.servers()["bench"].protocol_version
            assert args.protocol == "auto" or era == args.protocol, era

            async def call() -> Any:
                return await turn.call("bench_echo", {"text": "hi"})

            first = await call()
            assert first.ok and first.text == "hi", first
            return await _measure(call, args, _trio_spawn)


async def run_sdk(args: argparse.Namespace) -> dict[str, Any]:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(args.url) as streams, ClientSession(streams[0], streams[1]) as session:
        return await measure_sdk_session(session, args, discover=args.protocol == "2026-07-28")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", required=True, choices=["ours", "sdk"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--protocol", default="auto", choices=["auto", "2025-11-25", "2026-07-28"])
    parser.add_argument("--seq", type=int, default=500)
    parser.add_argument("--tput", type=int, default=2000)
    parser.add_argument("--inflight", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    if args.client == "sdk":
        import anyio

        result = anyio.run(run_sdk, args, backend="asyncio")
    else:
        import trio

        result = trio.run(run_ours, args)
    result["client"] = args.client
    result["protocol"] = args.protocol
    emit(result)


if __name__ == "__main__":
    sys.exit(main())
