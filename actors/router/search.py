"""BM25 ``tool_search`` over tool ids and descriptions, sharded by server.

Why our own BM25 rather than bm25s: tool catalogs change one server at a time, and
bm25s can only rebuild everything (~200 ms at 10,000 tools, against ~6 ms to
re-index one server of 200 tools here), and its numpy query path took about twice
our time at 10,000 tools (p50 ~0.7 ms against ~0.35 ms; benchmarks/search_bench.py).
No numpy/scipy to import either.

Scoring is Lucene's BM25, k1 = 1.2, b = 0.75, over distinct query terms::

    score(q, d) = sum of idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

Structure. ``index_server`` tokenizes one server's tools into an immutable
``ServerIndex``: per term, a block of that server's postings. ``SearchIndex`` maps
each term to a ``_Term``: the blocks of every server that has the term, and its
global df. ``with_server`` copies the term map (one C-level pointer copy), then
rebuilds only the ``_Term`` of each term of the old and new shard, in O(servers
holding that term); N and the total length (hence avgdl) are two integers. Untouched
terms and shards are shared, so old indexes stay valid and cheap.

Hot path. A query flattens each of its terms' blocks once, lazily; the flat copy
depends only on the blocks, so it is cached in the ``_Term`` and shared by every
index version holding it. ``k1 * (1 - b + b * dl / avgdl)`` depends on avgdl, which
every change moves, so nothing per document is precomputed: instead, for the
postings with tf == 1 (nearly all), the query builds one small table per term,
``idf * (k1 + 1) / (1 + norm(dl))`` for each length dl, and a posting costs one
list index and one dict update. The top k are cut with a threshold, not a sort.

Each document's score is summed over the query terms in query order, whatever
history built the index: the same documents give bit-identical scores. Results are
ordered by score descending, then id, then server.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from itertools import chain, islice
from operator import attrgetter
from typing import Any, NoReturn

import attrs

K1 = 1.2
B = 0.75

# Word chunks: letters and digits of any script; "_" and "-" separate like spaces do.
_CHUNK = re.compile(r"[^\W_]+")
# Inside an ASCII chunk: "URLs", "HTTPServer" -> HTTP + Server, "getCurrentTime", "v2".
_PART = re.compile(r"[A-Z]{2,}s(?![a-z])|[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

# Small on purpose: words that appear in nearly every tool description and carry no
# meaning for choosing a tool. Checked before normalizing.
STOPWORDS = frozenset(
    """a an and are as at be been but by can could do does for from has have if in into is it its
    may must not of on or should than that the their them then there these this those to use used
    uses using was were when which will with within without you your""".split()  # noqa: SIM905
)

_MIN_STEM = 3
_ES_AFTER = ("s", "x", "z", "ch", "sh")
_NO_UNDOUBLE = frozenset("lsz" + "aeiou")


def normalize(word: str) -> str:
    """Strip English inflections so that "zones"/"zone", "converting"/"convert" meet.

    A deliberately light, deterministic suffix stripper (not Porter), applied to
    alphabetic words, each step only when at least three letters remain (two for a
    plain plural ``s``, so that "ids" meets "id"):

    1. plural: ``ies``/``ied`` -> ``y``; ``es`` after s, x, z, ch, sh -> drop;
       else a final ``s`` (not ``ss``, ``us``, ``is``) -> drop;
    2. then ``ing`` or ``ed`` -> drop ("strings" -> "string" -> "str", like "string");
    3. then a final ``e`` -> drop ("create", "creates", "created", "creating" -> "creat");
    4. then a final doubled consonant other than l, s, z -> single ("running" -> "run").

    Steps 3 and 4 run on every word so that a word and its inflections end the same
    way whichever suffix came off. The stems are only ever compared, never shown.
    """
    if not word.isalpha():
        return word
    stem = word
    if stem.endswith(("ies", "ied")) and len(stem) - 3 >= _MIN_STEM:
        stem = stem[:-3] + "y"
    elif stem.endswith("es") and stem[:-2].endswith(_ES_AFTER) and len(stem) - 2 >= _MIN_STEM:
        stem = stem[:-2]
    elif stem.endswith("s") and not stem.endswith(("ss", "us", "is")) and len(stem) - 1 >= 2:
        stem = stem[:-1]
    if stem.endswith("ing") and len(stem) - 3 >= _MIN_STEM:
        stem = stem[:-3]
    elif stem.endswith("ed") and len(stem) - 2 >= _MIN_STEM:
        stem = stem[:-2]
    if stem.endswith("e") and len(stem) - 1 >= _MIN_STEM:
        stem = stem[:-1]
    if len(stem) > _MIN_STEM and stem[-1] == stem[-2] and stem[-1] not in _NO_UNDOUBLE:
        stem = stem[:-1]
    return stem


def _parts(text: str) -> list[str]:
    if text.isascii():
        # One C-level pass: _PART skips everything that is not a letter or digit.
        return _PART.findall(text)
    parts = []
    for chunk in _CHUNK.findall(text):
        if chunk.isascii():
            parts.extend(_PART.findall(chunk))
        else:
            # No camelCase split outside ASCII: Python's re has no \p{Lu}.
            parts.append(chunk)
    return parts


# Raw word -> its term ("" for a stopword). Vocabularies are small, so nearly every
# word is a hit; the term strings are shared by every document that uses them. A
# memo only: clearing it never changes an answer.
_TERM_OF: dict[str, str] = {}
_TERM_OF_LIMIT = 1 << 16


def _learn(part: str) -> str:
    if len(_TERM_OF) >= _TERM_OF_LIMIT:
        _TERM_OF.clear()
    word = part.lower()
    term = "" if word in STOPWORDS else normalize(word)
    _TERM_OF[part] = term
    return term


def tokenize(text: str) -> list[str]:
    """The normalized search terms of a text, in order, duplicates kept.

    Splits on anything that is not a letter or digit, and inside identifiers
    (snake_case, kebab-case, camelCase, letters/digits), so that a tool id such as
    ``time_convert_time`` or ``getCurrentTime`` is searchable by its words.
    """
    get = _TERM_OF.get
    terms = []
    for part in _parts(text):
        term = get(part)
        if term is None:
            term = _learn(part)
        if term:
            terms.append(term)
    return terms


@attrs.frozen(slots=True)
class Match:
    """One search hit."""

    id: str
    server: str
    score: float


@attrs.frozen(slots=True, eq=False)
class _Doc:
    """A document in the score accumulator, hashed by identity: fast, and two
    servers' tools never merge even if a caller gave them the same id."""

    id: str
    server: str
    length: int


# One shard's postings for one term. Postings with tf == 1 (nearly all of them in
# tool descriptions) are a bare tuple of documents: 8 bytes each. The few with
# tf > 1 are kept apart as (document, tf) pairs.
_Ones = tuple[_Doc, ...]
_Multi = tuple[tuple[_Doc, int], ...]

_LENGTH = attrgetter("length")


@attrs.frozen(slots=True, eq=False)
class ServerIndex:
    """One server's tools, tokenized: the shard ``SearchIndex`` swaps as a whole.

    Built by ``index_server``; every field is read-only.
    """

    server: str
    ids: tuple[str, ...]
    total_length: int = attrs.field(repr=False)
    _ones: Mapping[str, _Ones] = attrs.field(repr=False, alias="ones")
    _multi: Mapping[str, _Multi] = attrs.field(repr=False, alias="multi")

    def __len__(self) -> int:
        return len(self.ids)


def index_server(server: str, docs: Sequence[tuple[str, str]]) -> ServerIndex:
    """Build one server's shard from ``(tool_id, text)`` pairs.

    ``text`` should be the id plus the *full* description: the listing may cut an
    untrusted server's description, but search must see all of it. Duplicate ids
    are a caller bug and raise ``ValueError``.
    """
    ids = tuple(tool_id for tool_id, _ in docs)
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate tool ids in the index of server {server!r}")
    ones: dict[str, list[_Doc]] = {}
    multi: dict[str, list[tuple[_Doc, int]]] = {}
    total = 0
    for tool_id, text in docs:
        terms = tokenize(text)
        doc = _Doc(tool_id, server, len(terms))
        total += len(terms)
        for term, tf in Counter(terms).items():
            if tf == 1:
                postings = ones.get(term)
                if postings is None:
                    ones[term] = [doc]
                else:
                    postings.append(doc)
            else:
                multi.setdefault(term, []).append((doc, tf))
    return ServerIndex(
        server,
        ids,
        total,
        {term: tuple(postings) for term, postings in ones.items()},
        {term: tuple(postings) for term, postings in multi.items()},
    )


class _Term:
    """A term over the whole index: the shards' blocks, and a lazily flattened copy.

    The flat copy depends only on the blocks, so it stays valid in every index that
    shares this object; a change to a shard makes a new ``_Term`` for each of its
    terms. Only queries pay for flattening, and only for the terms they use.
    """

    __slots__ = ("_flat", "df", "multi", "ones")

    def __init__(self, ones: tuple[_Ones, ...], multi: tuple[_Multi, ...], df: int) -> None:
        self.ones = ones
        self.multi = multi
        self.df = df
        self._flat: _Flat | None = None

    def flat(self) -> _Flat:
        if self._flat is None:
            ones = self.ones
            docs = ones[0] if len(ones) == 1 else tuple(chain.from_iterable(ones))
            lengths = tuple(map(_LENGTH, docs))
            pairs = tuple(chain.from_iterable(self.multi))
            self._flat = _Flat(
                docs,
                lengths,
                max(lengths, default=0),
                tuple(doc for doc, _ in pairs),
                tuple(doc.length for doc, _ in pairs),
                tuple(tf for _, tf in pairs),
            )
        return self._flat


@attrs.frozen(slots=True)
class _Flat:
    docs: tuple[_Doc, ...]
    lengths: tuple[int, ...]
    max_length: int
    multi_docs: tuple[_Doc, ...]
    multi_lengths: tuple[int, ...]
    multi_tfs: tuple[int, ...]


def _swap(blocks: tuple[Any, ...], old: Any, new: Any) -> tuple[Any, ...]:
    if old is not None:
        i = blocks.index(old)  # identity: O(servers holding the term), in C
        blocks = blocks[:i] + blocks[i + 1 :]
    if new is not None:
        blocks = (*blocks, new)
    return blocks


class SearchIndex:
    """An immutable set of server shards with BM25 search over all of them.

    ``SearchIndex()`` is empty; ``with_server`` and ``without_server`` return new
    indexes that share every untouched shard and term with this one.
    """

    __slots__ = ("_docs", "_shards", "_terms", "_total_length")

    _shards: dict[str, ServerIndex]
    _terms: dict[str, _Term]
    _docs: int
    _total_length: int

    def __init__(self) -> None:
        self._init({}, {}, 0, 0)

    def _init(self, shards: dict[str, ServerIndex], terms: dict[str, _Term], docs: int, total: int) -> None:
        object.__setattr__(self, "_shards", shards)
        object.__setattr__(self, "_terms", terms)
        object.__setattr__(self, "_docs", docs)
        object.__setattr__(self, "_total_length", total)

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError("SearchIndex is immutable; use with_server / without_server")

    def __len__(self) -> int:
        return self._docs

    def __repr__(self) -> str:
        return f"<SearchIndex servers={len(self._shards)} tools={self._docs}>"

    @property
    def servers(self) -> tuple[str, ...]:
        """The indexed servers' names, sorted."""
        return tuple(sorted(self._shards))

    def df(self, term: str) -> int:
        """How many indexed tools contain ``term`` (a normalized term)."""
        entry = self._terms.get(term)
        return 0 if entry is None else entry.df

    def with_server(self, index: ServerIndex) -> SearchIndex:
        """A new index in which ``index`` replaces (or adds) its server's shard."""
        old = self._shards.get(index.server)
        shards = dict(self._shards)
        shards[index.server] = index
        docs = self._docs + len(index)
        total = self._total_length + index.total_length
        if old is not None:
            docs -= len(old)
            total -= old.total_length
        new = SearchIndex.__new__(SearchIndex)
        new._init(shards, self._edit(old, index), docs, total)
        return new

    def without_server(self, server: str) -> SearchIndex:
        """A new index without that server's shard (the same index if it has none)."""
        old = self._shards.get(server)
        if old is None:
            return self
        shards = dict(self._shards)
        del shards[server]
        new = SearchIndex.__new__(SearchIndex)
        new._init(shards, self._edit(old, None), self._docs - len(old), self._total_length - old.total_length)
        return new

    def _edit(self, old: ServerIndex | None, new: ServerIndex | None) -> dict[str, _Term]:
        # One C-level copy of the term map (pointers only), then O(servers holding
        # the term) per term of the old and the new shard.
        terms = dict(self._terms)
        changed: set[str] = set()
        for shard in (old, new):
            if shard is not None:
                changed.update(shard._ones, shard._multi)
        no_ones: dict[str, _Ones] = {}
        no_multi: dict[str, _Multi] = {}
        old_ones, old_multi = (old._ones, old._multi) if old is not None else (no_ones, no_multi)
        new_ones, new_multi = (new._ones, new._multi) if new is not None else (no_ones, no_multi)
        for term in changed:
            entry = terms.get(term)
            o1, o2 = old_ones.get(term), old_multi.get(term)
            n1, n2 = new_ones.get(term), new_multi.get(term)
            if entry is None:
                ones: tuple[_Ones, ...] = () if n1 is None else (n1,)
                multi: tuple[_Multi, ...] = () if n2 is None else (n2,)
                df = 0
            else:
                ones = entry.ones if o1 is None and n1 is None else _swap(entry.ones, o1, n1)
                multi = entry.multi if o2 is None and n2 is None else _swap(entry.multi, o2, n2)
                df = entry.df - len(o1 or ()) - len(o2 or ())
            if ones or multi:
                terms[term] = _Term(ones, multi, df + len(n1 or ()) + len(n2 or ()))
            else:
                del terms[term]
        return terms

    def search(self, query: str, limit: int = 10, allow: Callable[[str], bool] | None = None) -> list[Match]:
        """The best ``limit`` matches for ``query``, best first, ties by id.

        Only documents that contain at least one query term (score > 0) and, when
        ``allow`` is given, whose id it accepts. ``allow`` is asked only about the
        best-scoring candidates, so a filter costs little whatever the index size.
        """
        if limit <= 0 or self._total_length == 0:
            return []
        terms = self._terms
        found = [entry for term in dict.fromkeys(tokenize(query)) if (entry := terms.get(term))]
        if not found:
            return []
        n = self._docs
        c0 = K1 * (1.0 - B)
        c1 = K1 * B * n / self._total_length  # k1 * b / avgdl
        one = 1.0 + c0
        acc: dict[_Doc, float] = {}
        get = acc.get
        # Terms in query order, each document's sum in that order: a score does not
        # depend on the history of with_server/without_server calls.
        for entry in found:
            df = entry.df
            w = math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * (K1 + 1.0)
            p = entry.flat()
            if p.docs:
                if p.max_length <= 2 * len(p.docs):
                    # w / (1 + c0 + c1 * dl) for every length at once: one list index
                    # per posting instead of three float operations.
                    table = [w / (one + c1 * dl) for dl in range(p.max_length + 1)]
                    if not acc:
                        acc = dict(zip(p.docs, map(table.__getitem__, p.lengths), strict=True))
                        get = acc.get
                    else:
                        for d, dl in zip(p.docs, p.lengths, strict=True):
                            acc[d] = get(d, 0.0) + table[dl]
                else:
                    for d, dl in zip(p.docs, p.lengths, strict=True):
                        acc[d] = get(d, 0.0) + w / (one + c1 * dl)
            for d, dl, tf in zip(p.multi_docs, p.multi_lengths, p.multi_tfs, strict=True):
                acc[d] = get(d, 0.0) + w * tf / (tf + c0 + c1 * dl)
        return _best(acc, limit, allow)


def _best(acc: dict[_Doc, float], limit: int, allow: Callable[[str], bool] | None) -> list[Match]:
    """The top ``limit`` (allowed) documents, without sorting every candidate.

    Every document of the top k scores at least the k-th best score t, so the
    documents scoring >= t hold the answer. With a filter, start from 2k and widen
    fourfold until enough pass. Finding t and one pass over the candidates are the
    only per-candidate work (measured: cheaper than sorting everything, a heap of
    tuples, or a C-level ``compress``).
    """
    want = limit if allow is None else 2 * limit
    while True:
        if want >= len(acc):
            chosen = list(acc)
        else:
            kth = heapq.nlargest(want, acc.values())[-1]
            chosen = [doc for doc, score in acc.items() if score >= kth]
        chosen.sort(key=lambda doc: (-acc[doc], doc.id, doc.server))
        if allow is not None:
            # Best first, so that ties at the threshold cost no more calls than needed.
            chosen = list(islice(filter(lambda doc: allow(doc.id), chosen), limit))
        if len(chosen) >= limit or want >= len(acc):
            return [Match(doc.id, doc.server, acc[doc]) for doc in chosen[:limit]]
        want *= 4
