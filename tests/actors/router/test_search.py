"""tool_search: tokenizer, BM25 scores over id and description, sharded incremental updates."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.router.search import K1, B, SearchIndex, index_server, normalize, tokenize

Docs = dict[str, list[tuple[str, str]]]

# Real tools as real servers publish them (time, filesystem, github, fetch, everything).
REALISTIC: Docs = {
    "time": [
        ("time_get_current_time", "Get current time in a specific timezones"),
        ("time_convert_time", "Convert time between timezones"),
    ],
    "filesystem": [
        ("filesystem_read_file", "Read the complete contents of a file from the file system."),
        (
            "filesystem_write_file",
            "Create a new file or completely overwrite an existing file with new content.",
        ),
        (
            "filesystem_list_directory",
            "Get a detailed listing of all files and directories in a specified path.",
        ),
        ("filesystem_move_file", "Move or rename files and directories."),
    ],
    "github": [
        ("github_search_issues", "Search for issues and pull requests across GitHub repositories"),
        ("github_create_issue", "Create a new issue in a GitHub repository"),
        ("github_create_pull_request", "Create a new pull request in a GitHub repository"),
    ],
    "fetch": [("fetch_fetch_url", "Fetches a URL from the internet and extracts its contents as markdown.")],
    "shell": [("shell_run_command", "Run a shell command and return its output")],
    "everything": [
        ("everything_echo", "Echoes back the input"),
        ("everything_add", "Adds two numbers"),
        ("everything_longRunningOperation", "Demonstrates a long running operation with progress updates"),
    ],
}


def build(docs: Docs) -> SearchIndex:
    index = SearchIndex()
    for server, tools in docs.items():
        index = index.with_server(index_server(server, [(tid, f"{tid} {text}") for tid, text in tools]))
    return index


def reference(docs: Docs, query: str) -> dict[str, float]:
    """BM25 straight from the formula, over all documents at once."""
    tokens = {tid: tokenize(f"{tid} {text}") for tools in docs.values() for tid, text in tools}
    n = len(tokens)
    if n == 0:
        return {}
    avgdl = sum(map(len, tokens.values())) / n
    scores: dict[str, float] = {}
    for term in dict.fromkeys(tokenize(query)):
        df = sum(term in t for t in tokens.values())
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for tid, t in tokens.items():
            tf = Counter(t)[term]
            if tf:
                norm = K1 * (1 - B + B * len(t) / avgdl)
                scores[tid] = scores.get(tid, 0.0) + idf * tf * (K1 + 1) / (tf + norm)
    return scores


# -- tokenizer ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("getCurrentTime", ["get", "current", "tim"]),
        ("convert_time", ["convert", "tim"]),
        ("time_convert_time", ["tim", "convert", "tim"]),
        ("list-directory", ["list", "directory"]),
        ("HTTPServer parseURLs", ["http", "server", "pars", "url"]),
        ("sha256 v2 ipv4", ["sha", "256", "v", "2", "ipv", "4"]),
        ("Read the complete contents of a file.", ["read", "complet", "content", "fil"]),
        ("café naïveTest", ["café", "naïvetest"]),
        ("the of and to", []),
        ("", []),
    ],
)
def test_tokenize(text: str, terms: list[str]) -> None:
    assert tokenize(text) == terms


@pytest.mark.parametrize(
    "group",
    [
        ["zone", "zones", "Zones"],
        ["convert", "converting", "converted", "converts"],
        ["file", "files", "filed"],
        ["create", "creates", "created", "creating"],
        ["query", "queries", "queried"],
        ["run", "runs", "running"],
        ["search", "searches", "searching", "searched"],
        ["process", "processes"],
        ["status", "statuses"],
        ["id", "ids", "IDs"],
        ["string", "strings"],
    ],
)
def test_inflections_meet(group: list[str]) -> None:
    assert len({tuple(tokenize(word)) for word in group}) == 1, {w: tokenize(w) for w in group}


def test_normalize_leaves_short_and_non_alphabetic_words() -> None:
    assert normalize("bus") == "bus"
    assert normalize("class") == "class"
    assert normalize("ring") == "ring"
    assert normalize("x86") == "x86"


@given(st.text(max_size=80))
def test_tokenize_is_total_and_deterministic(text: str) -> None:
    terms = tokenize(text)
    assert terms == tokenize(text)
    assert all(term and term == term.lower() for term in terms)


# -- ranking -------------------------------------------------------------------


def test_convert_time_zones_ranks_convert_time_first() -> None:
    matches = build(REALISTIC).search("convert time zones")
    assert (matches[0].id, matches[0].server) == ("time_convert_time", "time")
    assert matches[1].id == "time_get_current_time"


@pytest.mark.parametrize(
    ("query", "best"),
    [
        ("read a file", "filesystem_read_file"),
        ("write file contents", "filesystem_write_file"),
        ("open a github issue", "github_create_issue"),
        ("search issues", "github_search_issues"),
        ("download web page url", "fetch_fetch_url"),
        ("execute shell command", "shell_run_command"),
        ("listing directories", "filesystem_list_directory"),
        ("long running", "everything_longRunningOperation"),
    ],
)
def test_realistic_queries(query: str, best: str) -> None:
    assert build(REALISTIC).search(query)[0].id == best


def test_exact_scores_of_a_hand_computed_corpus() -> None:
    index = SearchIndex().with_server(
        index_server("s", [("d1", "apple banana"), ("d2", "apple apple cherry"), ("d3", "cherry date")])
    )
    # N = 3, dl = 2, 3, 2, avgdl = 7/3; "apple" and "cherry" each have df = 2.
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # ln 1.6
    assert idf == pytest.approx(0.47000362924573563, abs=1e-15)
    d1 = idf * 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2 / (7 / 3)))
    d2 = idf * 2 * 2.2 / (2 + 1.2 * (0.25 + 0.75 * 3 / (7 / 3)))
    assert d1 == pytest.approx(0.4991762683, abs=1e-9)
    assert d2 == pytest.approx(0.5981864372, abs=1e-9)
    apple = index.search("apple")
    assert [m.id for m in apple] == ["d2", "d1"]
    assert [m.score for m in apple] == pytest.approx([d2, d1], abs=1e-12)
    # d1 and d3 tie exactly (same tf, dl and df): the id breaks the tie.
    both = index.search("apple cherry")
    assert [m.id for m in both] == ["d2", "d1", "d3"]
    d2_cherry = idf * 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 3 / (7 / 3)))
    assert both[0].score == pytest.approx(d2 + d2_cherry, abs=1e-12)
    assert both[1].score == both[2].score
    assert index.df("appl") == 2 and index.df("banana") == 1 and index.df("kiwi") == 0


def test_scores_match_the_reference_formula() -> None:
    index = build(REALISTIC)
    for query in ("convert time zones", "create new file", "github issues pull requests", "run"):
        got = {m.id: m.score for m in index.search(query, limit=100)}
        assert got == pytest.approx(reference(REALISTIC, query), abs=1e-9)


# -- query edges ------------------------------------------------------------


def test_limit_and_allow() -> None:
    index = build(REALISTIC)
    everything = index.search("file", limit=100)
    assert len(everything) > 3
    assert index.search("file", limit=2) == everything[:2]
    assert index.search("file", limit=0) == []
    allowed = {everything[1].id, everything[3].id}
    assert index.search("file", allow=allowed.__contains__) == [everything[1], everything[3]]
    assert index.search("file", limit=1, allow=allowed.__contains__) == [everything[1]]
    assert index.search("file", allow=lambda _: False) == []


def test_allow_is_asked_about_few_candidates() -> None:
    # Different lengths, so different scores: the threshold cuts the candidates.
    docs: Docs = {
        f"s{i}": [(f"s{i}_t{j}", "tool number" + " pad" * (i + j)) for j in range(50)] for i in range(20)
    }
    asked: list[str] = []

    def allow(tool_id: str) -> bool:
        asked.append(tool_id)
        return True

    assert len(build(docs).search("tool number", limit=5, allow=allow)) == 5
    assert len(asked) < 1000 / 2


@pytest.mark.parametrize("query", ["", "   ", "the of and", "nothing-matches-this", "¿?"])
def test_no_match_is_empty(query: str) -> None:
    assert build(REALISTIC).search(query) == []
    assert SearchIndex().search("time") == []


def test_ties_are_ordered_by_id_whatever_the_insertion_order() -> None:
    docs = [(f"t_{c}", "same words here") for c in "dbeac"]
    a = SearchIndex().with_server(index_server("s", docs))
    b = SearchIndex().with_server(index_server("s", docs[::-1]))
    assert [m.id for m in a.search("words")] == ["t_a", "t_b", "t_c", "t_d", "t_e"]
    assert a.search("words") == b.search("words")


def test_only_positive_scores_and_sorted() -> None:
    matches = build(REALISTIC).search("create file issue time", limit=100)
    assert all(m.score > 0 for m in matches)
    assert [(-m.score, m.id) for m in matches] == sorted((-m.score, m.id) for m in matches)


def test_full_description_is_searchable() -> None:
    long = "Summary. " + "filler words " * 100 + "ends with the word zeppelin"
    index = SearchIndex().with_server(index_server("s", [("s_t", f"s_t {long}")]))
    assert [m.id for m in index.search("zeppelin")] == ["s_t"]


# -- shards -------------------------------------------------------------------


def test_servers_len_and_without_server() -> None:
    index = build(REALISTIC)
    assert index.servers == tuple(sorted(REALISTIC))
    assert len(index) == sum(map(len, REALISTIC.values()))
    smaller = index.without_server("github")
    assert "github" not in smaller.servers
    assert len(smaller) == len(index) - 3
    assert all(m.server != "github" for m in smaller.search("issue pull request", limit=100))
    assert smaller.without_server("nope") is smaller
    assert SearchIndex().without_server("x").search("x") == []


def test_old_index_answers_the_same_after_later_changes() -> None:
    first = build(REALISTIC)
    before = first.search("create file issue", limit=100)
    later = first.with_server(index_server("github", [("github_x", "issue issue issue file")]))
    later = later.with_server(index_server("new", [("new_create", "create create file")]))
    later = later.without_server("filesystem")
    assert later.search("create file issue", limit=100) != before
    assert first.search("create file issue", limit=100) == before
    with pytest.raises(AttributeError):
        first._docs = 0


def test_duplicate_ids_in_one_server_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        index_server("s", [("s_a", "x"), ("s_a", "y")])


def test_an_empty_server_is_a_shard_without_documents() -> None:
    index = build(REALISTIC)
    with_empty = index.with_server(index_server("empty", []))
    assert "empty" in with_empty.servers
    assert len(with_empty) == len(index)
    assert with_empty.search("time file") == index.search("time file")


# -- incremental == from scratch ------------------------------------------------

WORDS = ["get", "list", "create", "file", "files", "issue", "time", "zone", "convert", "run", "the", "a"]
SERVERS = ["s0", "s1", "s2", "s3"]
QUERIES = ["file", "create issue", "convert time zones", "get list run", "files the", "zone zone"]


@st.composite
def server_docs(draw: st.DrawFn, server: str) -> list[tuple[str, str]]:
    names = draw(st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=6))
    docs = []
    for name in names:
        words = draw(st.lists(st.sampled_from(WORDS), max_size=8))
        docs.append((f"{server}_{name}", f"{server}_{name} {' '.join(words)}"))
    return docs


operation = st.sampled_from(SERVERS).flatmap(
    lambda server: st.one_of(
        st.tuples(st.just(server), server_docs(server)),
        st.tuples(st.just(server), st.none()),
    )
)


@settings(max_examples=200, deadline=None)
@given(st.lists(operation, max_size=12))
def test_incremental_updates_equal_a_fresh_index(ops: list[tuple[str, list[tuple[str, str]] | None]]) -> None:
    index = SearchIndex()
    history = [index]
    final: dict[str, list[tuple[str, str]]] = {}
    for server, docs in ops:
        if docs is None:
            index = index.without_server(server)
            final.pop(server, None)
        else:
            index = index.with_server(index_server(server, docs))
            final[server] = docs
        history.append(index)
        for query in QUERIES[:2]:  # exercise the lazy flat caches of old versions too
            index.search(query)
    fresh = SearchIndex()
    for server in sorted(final, reverse=True):
        fresh = fresh.with_server(index_server(server, final[server]))
    assert len(index) == len(fresh) == sum(map(len, final.values()))
    assert index.servers == fresh.servers
    as_docs: Docs = {
        s: [(tid, text.split(" ", 1)[1] if " " in text else "") for tid, text in d] for s, d in final.items()
    }
    for query in QUERIES:
        got = index.search(query, limit=100)
        want = fresh.search(query, limit=100)
        assert [(m.id, m.server) for m in got] == [(m.id, m.server) for m in want]
        for a, b in zip(got, want, strict=True):
            assert abs(a.score - b.score) <= 1e-9
        assert {m.id: m.score for m in got} == pytest.approx(reference(as_docs, query), abs=1e-9)
        assert index.search(query, limit=3) == got[:3]
