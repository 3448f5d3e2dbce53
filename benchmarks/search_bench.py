"""Benchmark of ``tool_search`` (actors/router/search.py), run by hand; not a test.

    .venv/bin/python benchmarks/search_bench.py [--bm25s-path /tmp/bm25s] [--quick]

Measures, on synthetic but vocabulary-rich catalogs (generated deterministically):
build time, query p50/p99, and the cost of re-indexing one server after its tool
list changed, at 1,000 and 10,000 tools over 50 servers, plus 10,000 tools over
1,000 servers (the many-small-shards case). When ``bm25s`` is importable (for
example after ``pip install --target /tmp/bm25s bm25s``; it is not a dependency of
this project) the same corpus and the same token lists are run through it: it has
no incremental update, so its re-index is a full rebuild.

Targets (issue 6): query p50 <= 0.5 ms at 10,000 tools; re-index one server <= 10 ms.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.router.search import SearchIndex, index_server, tokenize

# Plain words; split once (a list literal of 200 strings would be one per line).
VERBS = """get list create update delete search read write fetch run convert send move copy
rename merge close open query insert upload download sync find add remove set start stop
restart check validate describe inspect export import schedule cancel approve comment
assign archive restore resolve translate summarize render parse format compare lock""".split()  # noqa: SIM905
NOUNS = """file directory issue pull_request repository branch commit time zone timezone user
message channel thread database table row column query index document page note event
calendar meeting email attachment folder image video audio url webpage container pod
deployment service secret token key log metric alert incident ticket project task label
comment review release tag workflow job pipeline artifact package dependency invoice
customer order payment product cart shipment record contact lead report dashboard chart
snapshot backup volume bucket object cluster node process command shell terminal""".split()  # noqa: SIM905
GLUE = """the a an of to for in on with from by and or into that this its your all any each
given specified current new existing optional required default matching recent""".split()  # noqa: SIM905


def _pseudo_words(rng: random.Random, count: int) -> list[str]:
    """Rare domain words (project names, jargon): what makes real vocabularies large."""
    syllables = "ka lo mi ner tus vex qua dri zon pel gra sto bri fen hal jor wex yul cor tav lin mur sab ort"
    words: set[str] = set()
    while len(words) < count:
        words.add("".join(rng.choice(syllables.split()) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def make_catalog(tools: int, servers: int, seed: int = 7) -> dict[str, list[tuple[str, str]]]:
    """``tools`` tools over ``servers`` servers: ids and realistic descriptions."""
    rng = random.Random(seed)
    rare = _pseudo_words(rng, 6000)
    # Zipf-ish weights: a few words everywhere, a long tail of words almost nowhere.
    common = VERBS + NOUNS
    common_w = [1.0 / (i + 1) ** 0.8 for i in range(len(common))]
    rare_w = [1.0 / (i + 1) ** 1.05 for i in range(len(rare))]
    catalog: dict[str, list[tuple[str, str]]] = {}
    per = tools // servers
    for s in range(servers):
        server = f"srv{s:04d}_{rng.choice(rare)}"
        names: set[str] = set()
        docs: list[tuple[str, str]] = []
        while len(docs) < per:
            verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
            name = f"{verb}_{noun}"
            if name in names:
                name = f"{name}_{rng.choice(rare)}"
            if name in names:
                continue
            names.add(name)
            words = [verb.capitalize(), *rng.choices(GLUE, k=2), noun.replace("_", " ")]
            for _ in range(rng.randint(8, 40)):
                roll = rng.random()
                if roll < 0.35:
                    words.append(rng.choice(GLUE))
                elif roll < 0.75:
                    words.append(rng.choices(common, common_w)[0].replace("_", " "))
                else:
                    words.append(rng.choices(rare, rare_w)[0])
            tool_id = f"{server}_{name}"
            docs.append((tool_id, f"{tool_id} {' '.join(words)}."))
        catalog[server] = docs
    return catalog


def make_queries(count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    rare = _pseudo_words(random.Random(7), 6000)
    queries = []
    for _ in range(count):
        words = [rng.choice(VERBS), rng.choice(NOUNS).replace("_", " ")]
        if rng.random() < 0.5:
            words.append(rng.choice(NOUNS + VERBS))
        if rng.random() < 0.3:
            words.append(rng.choice(rare[:500]))
        queries.append(" ".join(words))
    return queries


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.3f} ms"


def _quantiles(samples: Sequence[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return statistics.median(samples), cuts[98]


def _time_queries(run: Callable[[str], Any], queries: Sequence[str]) -> tuple[float, float]:
    for q in queries[:50]:
        run(q)
    samples = []
    clock = time.perf_counter
    for q in queries:
        start = clock()
        run(q)
        samples.append(clock() - start)
    return _quantiles(samples)


def bench_ours(catalog: dict[str, list[tuple[str, str]]], queries: Sequence[str]) -> None:
    gc.collect()
    start = time.perf_counter()
    index = SearchIndex()
    for server, docs in catalog.items():
        index = index.with_server(index_server(server, docs))
    build = time.perf_counter() - start
    p50, p99 = _time_queries(lambda q: index.search(q, 10), queries)
    allowed = {tool_id for docs in catalog.values() for tool_id, _ in docs[::2]}
    a50, a99 = _time_queries(lambda q: index.search(q, 10, allowed.__contains__), queries)

    # Re-index: the biggest server's list changes (one description edited, one tool added).
    server = max(catalog, key=lambda name: len(catalog[name]))
    docs = list(catalog[server])
    docs[0] = (docs[0][0], docs[0][1] + " now with pagination")
    docs.append((f"{server}_new_tool", f"{server}_new_tool Brand new tool that lists widgets"))
    samples = []
    after_change = []
    for i in range(30):
        start = time.perf_counter()
        changed = index.with_server(index_server(server, docs))
        samples.append(time.perf_counter() - start)
        # The first query after a change also flattens the changed terms it uses.
        after_change.append(_timed(partial(changed.search, queries[i], 10)))
    reindex = statistics.median(samples)

    tracemalloc.start()
    fresh = SearchIndex()
    for name, server_docs in catalog.items():
        fresh = fresh.with_server(index_server(name, server_docs))
    built = tracemalloc.get_traced_memory()[0]
    for q in queries:
        fresh.search(q, 10)
    queried = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del fresh
    print(
        f"  ours   build {_ms(build)}  query p50 {_ms(p50)} p99 {_ms(p99)}"
        f"  (allow filter: p50 {_ms(a50)} p99 {_ms(a99)})"
    )
    print(
        f"         re-index one server ({len(docs)} tools) {_ms(reindex)};"
        f" next query p50 {_ms(statistics.median(after_change))}"
    )
    print(f"         memory: index {built / 1e6:5.1f} MB, with flattened terms {queried / 1e6:5.1f} MB")


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_bm25s(catalog: dict[str, list[tuple[str, str]]], queries: Sequence[str]) -> None:
    try:
        import bm25s  # type: ignore[import-not-found]
    except ImportError:
        print("  bm25s  not importable (pass --bm25s-path)")
        return
    ids = [tool_id for docs in catalog.values() for tool_id, _ in docs]
    # Same tokens as ours, so the comparison is of the index, not of the tokenizers.
    corpus = [tokenize(text) for docs in catalog.values() for _, text in docs]

    def build() -> Any:
        retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        retriever.index(corpus, show_progress=False)
        return retriever

    gc.collect()
    start = time.perf_counter()
    tokenized = [tokenize(text) for docs in catalog.values() for _, text in docs]
    retriever = build()
    build_time = time.perf_counter() - start
    del tokenized
    vocab = retriever.vocab_dict

    def run(q: str) -> list[str]:
        terms = [t for t in dict.fromkeys(tokenize(q)) if t in vocab]
        if not terms:
            return []
        docs, _scores = retriever.retrieve([terms], k=10, show_progress=False, n_threads=1)
        return [ids[i] for i in docs[0]]

    p50, p99 = _time_queries(run, queries)
    rebuild = statistics.median(_timed(build) for _ in range(3))
    print(f"  bm25s  build {_ms(build_time)}  query p50 {_ms(p50)} p99 {_ms(p99)}")
    print(f"         re-index one server = full rebuild {_ms(rebuild)} (tokens already cut)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bm25s-path", help="a directory holding bm25s (pip install --target DIR bm25s)")
    parser.add_argument("--quick", action="store_true", help="fewer queries")
    args = parser.parse_args()
    if args.bm25s_path:
        sys.path.insert(0, args.bm25s_path)
    queries = make_queries(300 if args.quick else 3000)
    print(f"python {sys.version.split()[0]}; {len(queries)} queries of 2-4 words, top 10")
    for tools, servers in ((1_000, 50), (10_000, 50), (10_000, 1_000)):
        catalog = make_catalog(tools, servers)
        vocabulary = {t for docs in catalog.values() for _, text in docs for t in tokenize(text)}
        print(f"\n{tools} tools over {servers} servers ({len(vocabulary)} distinct terms)")
        bench_ours(catalog, queries)
        bench_bm25s(catalog, queries)


if __name__ == "__main__":
    main()
