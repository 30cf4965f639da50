"""An in-process BM25F keyword index over short multi-field documents, with exact top-k
pruning.

Scores follow the classic BM25 formula (``k1``, ``b``, the same idf as SQLite FTS5's
``bm25()``), with per-column weights folded into term frequencies and document lengths. It is
an inverted index rather than an FTS5 table because FTS5 ranks every matching row through
its auxiliary function (~10 µs a row): a query sharing a common word with thousands of
entities would take tens of milliseconds.

Top-k without scoring every match (block-max pruning): documents take increasing slot numbers,
each term keeps its postings in slot order and, for every block of :data:`BLOCK` slots it
appears in, the largest term frequency and the shortest document length of its postings there.
A BM25 weight grows with the frequency and shrinks with the length, so these two bound what any
document of the block takes from the term; summed over the query's terms, they bound the
block. Blocks are scored exactly, best bound first, until the next bound is below the k-th best
score found: the answer is the exhaustive ranking (same documents, order and scores) while a
query made of common words reads a fraction of their postings. The bounds are computed with
the query's own statistics (idf, average length), so they stay valid as documents come and
go: a removed document's postings are zeroed in place (its bounds only loosen), and the slots
are renumbered once more than half of them are free.

Ties rank by document id: a stable key, the same after a restart whatever slots the
documents took. numpy (the ``vector`` extra) vectorises the search; without it a plain loop
scores every match, with the same ranking.

Queries are free text from a model: they are reduced to word tokens, so punctuation and any
query syntax (``"``, ``NEAR(``, ``*``, ``AND``, ``col:``) are plain characters, never operators.
"""

from __future__ import annotations

import bisect
import heapq
import math
import re
import unicodedata
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_MAX_TERMS = 32
_STOPWORD_TEXT = (
    "a an and are as at be by can could did do does for from had has have how i if in into is "
    "it its me my of on or our should so than that the their them then there these they this "
    "to us was we were what when where which who whom why will with would you your"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split(" "))
_VOWELS = frozenset("aeiouy")


def stem(token: str) -> str:
    """A light English suffix stripper: plurals, ``-ing``, ``-ed`` (``shoppers``: ``shopper``)."""
    if len(token) <= 3 or token.isdigit():
        return token
    if token.endswith("ies") and len(token) > 4:
        return token[:-3] + "y"
    if token.endswith("sses"):
        return token[:-2]
    if token.endswith(("ches", "shes", "xes", "zes")):
        return token[:-2]
    for suffix in ("ing", "ed"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            root = token[: -len(suffix)]
            if not _VOWELS.intersection(root):
                return token
            if len(root) > 3 and root[-1] == root[-2] and root[-1] not in "lsz":
                root = root[:-1]
            return root
    if token.endswith("s") and not token.endswith(("ss", "us", "is")):
        return token[:-1]
    return token


def tokens(text: str) -> list[str]:
    """Index terms of ``text``: lowercase words without accents or stopwords, stemmed."""
    folded = text.casefold()
    if not folded.isascii():
        folded = unicodedata.normalize("NFKD", folded)
        folded = "".join(c for c in folded if not unicodedata.combining(c))
    return [stem(t) for t in _TOKEN.findall(folded) if t not in _STOPWORDS]


def query_terms(text: str) -> list[str]:
    """The distinct search terms of ``text`` (at most 32)."""
    return list(dict.fromkeys(tokens(text[:4000])))[:_MAX_TERMS]


_UNRESOLVED: Any = object()

BLOCK = 16
"""Slots per block of the pruned search."""
BLOCK_STATS_FROM = 32
"""A term with this many postings keeps statistics per block; a rarer one is bounded by its
postings' own weights."""
FIRST_BLOCKS = 16
"""Blocks of best bound scored first, for a k-th best score to prune the others with."""
PRUNE_FROM = 50_000
"""A query whose terms have fewer postings than this, together, is scored exhaustively: numpy
scores them in about the time bounding and picking the blocks takes (measured: at 10,000
entities scoring every match costs 0.4 ms, pruning 0.6)."""
COMPACT_FROM = 1024
"""Slots are renumbered once more than this many, and more than the live documents, are free."""


def _numpy() -> Any | None:
    try:
        import numpy  # lazy: extra vector (numpy)
    except ImportError:  # the vector extra is not installed: score with a plain loop
        return None
    return numpy


def term_weights(tfs: Any, lengths: Any, idf: float, k1: float, c1: float, c2: float) -> Any:
    """What documents take from a term (numpy arrays of frequencies and lengths): the plain
    loop's formula, operation for operation, so both paths compute the same floats."""
    return idf * (tfs * (k1 + 1.0) / (tfs + c1 + c2 * lengths))


def _pushed(values: array[Any], value: Any) -> array[Any]:
    """``values`` with ``value`` appended: the same array, or a copy when a numpy view of an
    interrupted search (kept alive by its traceback) still holds the buffer."""
    try:
        values.append(value)
    except BufferError:
        values = array(values.typecode, values)
        values.append(value)
    return values


class Postings:
    """One term's postings in slot order: slots and weighted term frequencies (0 once the
    document is removed); from :data:`BLOCK_STATS_FROM` postings on, per block of slots it
    appears in, its first position, largest frequency and shortest document length."""

    __slots__ = ("block_len", "block_starts", "block_tf", "blocks", "live", "slots", "tfs")

    def __init__(self) -> None:
        self.slots: array[int] = array("i")
        self.tfs: array[float] = array("d")
        self.live = 0
        """Postings of present documents (the term's document frequency)."""
        self.blocks: array[int] | None = None
        self.block_starts: array[int] = array("i")
        self.block_tf: array[float] = array("d")
        self.block_len: array[float] = array("d")

    def add(self, slot: int, tf: float, lengths: array[float]) -> None:
        """Append a posting; ``slot`` is larger than every slot already here."""
        if self.blocks is not None:
            self._note(len(self.slots), slot, tf, lengths[slot])
        self.slots = _pushed(self.slots, slot)
        self.tfs = _pushed(self.tfs, tf)
        self.live += 1
        if self.blocks is None and len(self.slots) >= BLOCK_STATS_FROM:
            self.blocks = array("i")
            for pos, (old, old_tf) in enumerate(zip(self.slots, self.tfs, strict=True)):
                self._note(pos, old, old_tf, lengths[old])

    def _note(self, pos: int, slot: int, tf: float, length: float) -> None:
        blocks = self.blocks
        assert blocks is not None
        block = slot // BLOCK
        if blocks and blocks[-1] == block:
            self.block_tf[-1] = max(self.block_tf[-1], tf)
            self.block_len[-1] = min(self.block_len[-1], length)
            return
        self.blocks = _pushed(blocks, block)
        self.block_starts = _pushed(self.block_starts, pos)
        self.block_tf = _pushed(self.block_tf, tf)
        self.block_len = _pushed(self.block_len, length)

    def drop(self, slot: int) -> None:
        """Zero the posting of ``slot`` (its block statistics stay: a looser bound)."""
        self.tfs[bisect.bisect_left(self.slots, slot)] = 0.0
        self.live -= 1


class KeywordIndex:
    """Documents with weighted text columns, ranked by BM25F (higher score is better; ties by
    document id).

    Not thread-safe by design: an owner (a tool actor) calls it from one thread at a time.
    """

    def __init__(
        self,
        columns: Sequence[str] = ("text",),
        weights: Sequence[float] | None = None,
        k1: float = 1.2,
        b: float = 0.75,
    ) -> None:
        if not columns:
            raise ValueError("at least one column")
        if weights is not None and len(weights) != len(columns):
            raise ValueError("one weight per column")
        self.columns = tuple(columns)
        self._weights = tuple(float(w) for w in (weights or [1.0] * len(columns)))
        if not all(w > 0.0 for w in self._weights):
            raise ValueError("column weights must be positive")
        if k1 <= 0.0 or not 0.0 <= b <= 1.0:
            raise ValueError("k1 must be positive and b within [0, 1]")
        self.k1 = k1
        self.b = b
        self._numpy: Any = _UNRESOLVED
        self.clear()

    @property
    def _np(self) -> Any:
        """numpy, imported at the first search (building an index does not need it), or None
        without the vector extra."""
        if self._numpy is _UNRESOLVED:
            self._numpy = _numpy()
        return self._numpy

    @_np.setter
    def _np(self, module: Any) -> None:
        """Set the module to score with (None: the plain loop)."""
        self._numpy = module

    def __len__(self) -> int:
        return len(self._slots)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._slots

    def clear(self) -> None:
        """Drop every document."""
        self._slots: dict[str, int] = {}
        self._ids: list[str | None] = []
        self._lengths: array[float] = array("d")
        self._total = 0.0
        self._terms_of: dict[int, list[str]] = {}
        self._postings: dict[str, Postings] = {}
        self._free = 0

    def upsert(self, doc_id: str, *values: str) -> None:
        """Insert or replace a document; one value per column."""
        if len(values) != len(self.columns):
            raise ValueError(f"expected {len(self.columns)} values, got {len(values)}")
        self.remove(doc_id)
        freq: dict[str, float] = {}
        length = 0.0
        for weight, value in zip(self._weights, values, strict=True):
            for term in tokens(value):
                freq[term] = freq.get(term, 0.0) + weight
                length += weight
        self._put(doc_id, freq, length)

    def _put(self, doc_id: str, freq: dict[str, float], length: float) -> None:
        slot = len(self._ids)
        self._ids.append(doc_id)
        self._lengths = _pushed(self._lengths, length)
        self._slots[doc_id] = slot
        self._total += length
        self._terms_of[slot] = list(freq)
        postings = self._postings
        for term, count in freq.items():
            found = postings.get(term)
            if found is None:
                found = postings[term] = Postings()
            found.add(slot, count, self._lengths)

    def upsert_many(self, docs: Iterable[tuple[str, Sequence[str]]]) -> None:
        """Insert or replace many documents."""
        for doc_id, values in docs:
            self.upsert(doc_id, *values)

    def remove(self, doc_id: str) -> None:
        """Drop a document (no error when it is absent)."""
        slot = self._slots.pop(doc_id, None)
        if slot is None:
            return
        for term in self._terms_of.pop(slot):
            posting = self._postings[term]
            posting.drop(slot)
            if not posting.live:
                del self._postings[term]
        self._total -= self._lengths[slot]
        self._ids[slot] = None
        self._free += 1
        if self._free > max(COMPACT_FROM, len(self._slots)):
            self._compact()

    def _compact(self) -> None:
        """Renumber the present documents' slots from 0, in order, without the free ones."""
        old_ids, old_lengths = self._ids, self._lengths
        renumbered = {slot: n for n, slot in enumerate(sorted(self._terms_of))}
        terms_of = {renumbered[slot]: terms for slot, terms in self._terms_of.items()}
        self._ids = [old_ids[slot] for slot in renumbered]
        self._lengths = array("d", (old_lengths[slot] for slot in renumbered))
        self._slots = {doc_id: n for n, doc_id in enumerate(self._ids) if doc_id is not None}
        self._free = 0
        for term, old in self._postings.items():
            fresh = Postings()
            for slot, tf in zip(old.slots, old.tfs, strict=True):
                if tf > 0.0:
                    fresh.add(renumbered[slot], tf, self._lengths)
            self._postings[term] = fresh
        self._terms_of = terms_of

    def search(
        self,
        query: str,
        top_k: int = 10,
        allowed: set[str] | None = None,
        exhaustive: bool = False,
    ) -> list[tuple[str, float]]:
        """Documents matching any term of ``query``, best first, as ``(doc_id, score)``.

        ``allowed`` restricts hits to those ids (applied before the cut to ``top_k``).
        ``exhaustive`` scores every match instead of pruning (the same answer, at the cost of
        every posting of the query's terms: the reference the pruned search is checked
        against).
        """
        count = len(self._slots)
        if top_k <= 0 or count == 0:
            return []
        found = [self._postings[t] for t in query_terms(query) if t in self._postings]
        if not found:
            return []
        avg = self._total / count or 1.0
        c1 = self.k1 * (1.0 - self.b)
        c2 = self.k1 * self.b / avg
        weighted = [(p, self._idf(p.live, count)) for p in found]
        if self._np is None:
            return self._search_loop(weighted, c1, c2, top_k, allowed)
        keep = None
        if allowed is not None:
            keep = self._np.zeros(len(self._ids), dtype=bool)
            picked = [self._slots[d] for d in allowed if d in self._slots]
            keep[self._np.asarray(picked, dtype=self._np.int64)] = True
        if exhaustive or sum(len(p.slots) for p, _ in weighted) < PRUNE_FROM:
            return self._search_all(weighted, c1, c2, top_k, keep)
        return self._search_blocks(weighted, c1, c2, top_k, keep)

    def score_bound(self, query: str) -> float:
        """The most any document could score for ``query``: ``idf * (k1 + 1)`` summed over its
        terms (each matched with a saturated frequency; an unseen term with the idf of a term
        no document holds). 0 for an empty index or a query without terms."""
        count = len(self._slots)
        if count == 0:
            return 0.0
        postings = self._postings
        k1p = self.k1 + 1.0
        return sum(
            self._idf(p.live if (p := postings.get(t)) is not None else 0, count) * k1p
            for t in query_terms(query)
        )

    @staticmethod
    def _idf(df: int, count: int) -> float:
        return math.log(1.0 + (count - df + 0.5) / (df + 0.5))

    def _search_loop(
        self,
        weighted: list[tuple[Postings, float]],
        c1: float,
        c2: float,
        top_k: int,
        allowed: set[str] | None,
    ) -> list[tuple[str, float]]:
        keep = None if allowed is None else {self._slots[d] for d in allowed if d in self._slots}
        lengths = self._lengths
        scores: dict[int, float] = {}
        k1p = self.k1 + 1.0
        for posting, idf in weighted:
            for slot, tf in zip(posting.slots, posting.tfs, strict=True):
                if tf > 0.0 and (keep is None or slot in keep):
                    part = idf * (tf * k1p / (tf + c1 + c2 * lengths[slot]))
                    scores[slot] = scores.get(slot, 0.0) + part
        ids = self._ids
        best = heapq.nsmallest(top_k, scores.items(), key=lambda item: (-item[1], ids[item[0]]))
        return [(str(ids[slot]), score) for slot, score in best]

    def _search_all(
        self,
        weighted: list[tuple[Postings, float]],
        c1: float,
        c2: float,
        top_k: int,
        keep: Any,
    ) -> list[tuple[str, float]]:
        """Score every posting of the query's terms."""
        np = self._np
        lengths = np.frombuffer(self._lengths, dtype=np.float64)
        scores = np.zeros(len(lengths), dtype=np.float64)
        for posting, idf in weighted:
            slots = np.frombuffer(posting.slots, dtype=np.int32)
            tfs = np.frombuffer(posting.tfs, dtype=np.float64)
            scores[slots] += term_weights(tfs, lengths[slots], idf, self.k1, c1, c2)
        if keep is not None:
            scores[~keep] = 0.0
        hits = np.flatnonzero(scores >= self._floor(scores, top_k))
        return self._ranked(hits, scores[hits], top_k)

    def _search_blocks(
        self,
        weighted: list[tuple[Postings, float]],
        c1: float,
        c2: float,
        top_k: int,
        keep: Any,
    ) -> list[tuple[str, float]]:
        """Score blocks in rounds, best bound first, until no block left has a bound reaching
        the k-th best score found; every posting instead when most blocks still would."""
        np = self._np
        lengths = np.frombuffer(self._lengths, dtype=np.float64)
        bound = np.zeros(len(lengths) // BLOCK + 1, dtype=np.float64)
        terms = [BlockView(np, p, idf) for p, idf in weighted]
        for term in terms:
            term.add_bounds(bound, lengths, self.k1, c1, c2)
        blocks = int(np.count_nonzero(bound))
        slots = np.zeros(0, dtype=np.int64)
        scores = np.zeros(0, dtype=np.float64)
        kth = float(np.nextafter(0.0, 1.0))
        step = max(FIRST_BLOCKS, 2 * top_k)
        while True:
            left = np.flatnonzero(bound >= kth)
            if not len(left):
                break
            if len(slots) and len(left) * 2 > blocks:  # most blocks still to score: score all
                return self._search_all(weighted, c1, c2, top_k, keep)
            if len(left) > step:
                left = left[np.argpartition(-bound[left], step)[:step]]
            chosen = np.sort(left)
            bound[chosen] = 0.0  # scored
            step *= 4
            more_slots, more_scores = self._score_blocks(chosen, terms, lengths, c1, c2)
            if keep is not None:
                kept = keep[more_slots]
                more_slots, more_scores = more_slots[kept], more_scores[kept]
            slots = np.concatenate((slots, more_slots))
            scores = np.concatenate((scores, more_scores))
            if len(scores) >= top_k:
                kth = float(np.partition(scores, len(scores) - top_k)[len(scores) - top_k])
                best = scores >= kth
                slots, scores = slots[best], scores[best]
        return self._ranked(slots, scores, top_k)

    def _score_blocks(
        self, chosen: Any, terms: list[BlockView], lengths: Any, c1: float, c2: float
    ) -> tuple[Any, Any]:
        """Slots and exact scores of the matching documents in the blocks ``chosen`` (sorted)."""
        np = self._np
        where = np.full(len(lengths) // BLOCK + 1, -1, dtype=np.int64)
        where[chosen] = np.arange(len(chosen))
        scores = np.zeros(len(chosen) * BLOCK, dtype=np.float64)
        for term in terms:
            slots, tfs = term.postings_in(chosen, where)
            local = where[slots // BLOCK] * BLOCK + slots % BLOCK
            scores[local] += term_weights(tfs, lengths[slots], term.idf, self.k1, c1, c2)
        hits = np.flatnonzero(scores > 0.0)
        return chosen[hits // BLOCK] * BLOCK + hits % BLOCK, scores[hits]

    def _floor(self, scores: Any, top_k: int) -> float:
        """A positive lower bound of the ``top_k``-th best of ``scores`` (0 is not a hit): the
        ``top_k``-th best of a strided sample, when it has that many hits, else the smallest
        positive float."""
        np = self._np
        stride = len(scores) // (64 * top_k)
        if stride > 1:
            sample = scores[::stride]
            if np.count_nonzero(sample) >= top_k:
                return float(np.partition(sample, len(sample) - top_k)[len(sample) - top_k])
        return float(np.nextafter(0.0, 1.0))

    def _ranked(self, slots: Any, scores: Any, top_k: int) -> list[tuple[str, float]]:
        """The ``top_k`` best of ``slots``: by score, then document id."""
        np = self._np
        if len(scores) > top_k:
            best = scores >= self._floor(scores, top_k)
            slots, scores = slots[best], scores[best]
            kth = np.partition(scores, len(scores) - top_k)[len(scores) - top_k]
            best = scores >= kth
            slots, scores = slots[best], scores[best]
        ids = self._ids
        ranked = sorted(zip((-scores).tolist(), [str(ids[s]) for s in slots.tolist()], strict=True))
        return [(doc_id, -negated) for negated, doc_id in ranked[:top_k]]


class BlockView:
    """One query term's postings seen through numpy for one pruned search (views of the
    arrays, never kept past the search)."""

    def __init__(self, np: Any, posting: Postings, idf: float) -> None:
        self.np = np
        self.idf = idf
        self.slots = np.frombuffer(posting.slots, dtype=np.int32)
        self.tfs = np.frombuffer(posting.tfs, dtype=np.float64)
        self.posting = posting
        self.blocks: Any = None
        self.starts: Any = None
        self.ends: Any = None

    def add_bounds(self, bound: Any, lengths: Any, k1: float, c1: float, c2: float) -> None:
        """Add to ``bound`` (per block) the most a document of each block takes from the term."""
        np = self.np
        posting = self.posting
        if posting.blocks is None:  # a rare term: its few postings bound their blocks
            weights = term_weights(self.tfs, lengths[self.slots], self.idf, k1, c1, c2)
            np.add.at(bound, self.slots // BLOCK, weights)
            return
        self.blocks = np.frombuffer(posting.blocks, dtype=np.int32)
        self.starts = np.frombuffer(posting.block_starts, dtype=np.int32)
        self.ends = np.append(self.starts[1:], len(self.slots))
        most = np.frombuffer(posting.block_tf, dtype=np.float64)
        shortest = np.frombuffer(posting.block_len, dtype=np.float64)
        bound[self.blocks] += term_weights(most, shortest, self.idf, k1, c1, c2)

    def postings_in(self, chosen: Any, where: Any) -> tuple[Any, Any]:
        """Slots and frequencies of the term's postings in the blocks ``chosen`` (sorted;
        ``where`` maps a block to its position in ``chosen``, or -1)."""
        np = self.np
        if self.blocks is None:
            picked = np.flatnonzero(where[self.slots // BLOCK] >= 0)
            return self.slots[picked], self.tfs[picked]
        at = np.minimum(np.searchsorted(self.blocks, chosen), len(self.blocks) - 1)
        at = at[self.blocks[at] == chosen]
        begin, end = self.starts[at], self.ends[at]
        sizes = end - begin
        positions = np.repeat(begin - np.cumsum(sizes) + sizes, sizes) + np.arange(sizes.sum())
        return self.slots[positions], self.tfs[positions]
