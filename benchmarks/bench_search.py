"""Worker: ``tool_search`` index numbers and ``begin_turn()`` with a 10,000-tool catalog.

    python benchmarks/bench_search.py index [--queries N]
    python benchmarks/bench_search.py turns [--tools N] [--servers N] [--turns N]

``index`` reuses benchmarks/search_bench.py's synthetic catalogs and queries (same
seeds): build time, query p50/p99 (top 10) and the re-index of one server after its
list changed (one description edited, one tool added), at 1,000 and 10,000 tools over
50 servers.

``turns`` runs a real supervisor with ``--servers`` minimal servers publishing
``--tools`` tools in all (the same synthetic descriptions, via ``--tools-file``), with
search on, and measures: ``session.begin_turn()`` once every server is known (p50/p99
over ``--turns`` turns), the same on
a one-tool catalog, ``turn.search()`` through a
turn, and end to end re-index: a call whose server then sends
``notifications/tools/list_changed`` → the new epoch (re-listed, re-indexed) visible
to the next turn.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit, ours_config, quantiles, quiet_logging, server_argv, wait_steady
from search_bench import make_catalog, make_queries

from actors.router.search import SearchIndex, index_server


def _query_times(index: SearchIndex, queries: list[str]) -> list[float]:
    for q in queries[:50]:
        index.search(q, 10)
    clock = time.perf_counter
    samples = []
    for q in queries:
        start = clock()
        index.search(q, 10)
        samples.append((clock() - start) * 1000)
    return samples


def index_numbers(query_count: int) -> dict[str, Any]:
    queries = make_queries(query_count)
    out: dict[str, Any] = {}
    for tools in (1_000, 10_000):
        catalog = make_catalog(tools, 50)
        gc.collect()
        start = time.perf_counter()
        index = SearchIndex()
        for server, docs in catalog.items():
            index = index.with_server(index_server(server, docs))
        build_ms = (time.perf_counter() - start) * 1000
        query = quantiles(_query_times(index, queries))
        server = max(catalog, key=lambda name: len(catalog[name]))
        docs = list(catalog[server])
        docs[0] = (docs[0][0], docs[0][1] + " now with pagination")
        docs.append((f"{server}_new_tool", f"{server}_new_tool Brand new tool that lists widgets"))
        reindex, after = [], []
        for i in range(30):
            start = time.perf_counter()
            changed = index.with_server(index_server(server, docs))
            reindex.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            changed.search(queries[i], 10)
            after.append((time.perf_counter() - start) * 1000)
        out[str(tools)] = {
            "build_ms": build_ms,
            "query_ms": query,
            "reindex_ms": quantiles(reindex),
            "reindex_tools": len(docs),
            "first_query_after_ms": statistics.median(after),
        }
    return out


def _write_tool_files(directory: Path, tools: int, servers: int) -> list[tuple[str, Path]]:
    """One JSON tool list per server, from search_bench's catalog."""
    files = []
    for server, docs in make_catalog(tools, servers).items():
        wire = [
            {
                "name": tool_id.removeprefix(f"{server}_"),
                "description": text.removeprefix(f"{tool_id} "),
                "inputSchema": {"type": "object", "properties": {}},
            }
            for tool_id, text in docs
        ]
        path = directory / f"{server}.json"
        path.write_text(json.dumps(wire))
        files.append((server, path))
    return files


async def _begin_turns(session: Any, count: int) -> dict[str, float]:
    for _ in range(50):
        await session.begin_turn()
    clock = time.perf_counter
    samples = []
    for _ in range(count):
        start = clock()
        await session.begin_turn()
        samples.append((clock() - start) * 1e6)
    return quantiles(samples)


async def turn_numbers(tools: int, servers: int, turns: int) -> dict[str, Any]:
    import trio

    from supervisor import Supervisor

    quiet_logging()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-turns-") as tmp:
        root = Path(tmp)
        # The small catalog first: one server, one tool, search forced on.
        config = ours_config([("one", server_argv())], search=True)
        async with Supervisor.open(config, state_dir=root / "one") as sup, sup.session() as session:
            await session.begin_turn()
            out["begin_turn_us_1_tool"] = await _begin_turns(session, turns)
        files = _write_tool_files(root, tools, servers)
        # The first server announces list_changed after every call (to time re-indexing).
        entries = [
            (name, server_argv("--tools-file", str(path), *(["--list-changed-every", "1"] if i == 0 else [])))
            for i, (name, path) in enumerate(files)
        ]
        config = ours_config(entries)
        started = time.perf_counter()
        echo = f"{files[0][0]}_echo"  # pinned: a turn calls only the tools it shows
        async with (
            Supervisor.open(config, state_dir=root / "big") as sup,
            sup.session(pinned=[echo]) as session,
        ):
            turn = await session.begin_turn()
            out["first_turn_s"] = time.perf_counter() - started
            names = [name for name, _ in files]
            await wait_steady(sup, names)
            turn = await session.begin_turn()
            out["catalog_tools"] = len(turn.catalog.tools)
            out["search_enabled"] = turn.search_enabled
            out["begin_turn_us"] = await _begin_turns(session, turns)
            queries = make_queries(500, seed=23)
            samples = []
            for q in queries:
                start = time.perf_counter()
                turn.search(q)
                samples.append((time.perf_counter() - start) * 1000)
            out["turn_search_ms"] = quantiles(samples)
            first = names[0]
            relist_ms = []
            for _ in range(30):
                await wait_steady(sup, [first])
                generation = sup.servers()[first].generation
                epoch = sup.router.cell.current.epoch
                envelope = await turn.call(echo, {"text": "hi"})
                assert envelope.ok, envelope
                answered = time.perf_counter()
                await wait_steady(sup, [first], newer_than={first: generation})
                relist_ms.append((time.perf_counter() - answered) * 1000)
                assert sup.router.cell.current.epoch > epoch
                await trio.sleep(0.01)
            out["list_changed_to_epoch_ms"] = quantiles(relist_ms)
            out["relisted_tools"] = len(sup.servers()[first].entries)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["index", "turns"])
    parser.add_argument("--queries", type=int, default=3000)
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--servers", type=int, default=50)
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args()
    if args.what == "index":
        emit(index_numbers(args.queries))
    else:
        import trio

        emit(trio.run(turn_numbers, args.tools, args.servers, args.turns))


if __name__ == "__main__":
    sys.exit(main())
