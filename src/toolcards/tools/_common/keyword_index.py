"""An in-process BM25F keyword index over short multi-field documents, with exact top-k
pruning.

Scores follow the classic BM25 formula (``k1``, ``b``, the same idf as SQLite FTS5's
``bm25()``), with per-column weights folded into term frequencies and document lengths. It is
an inverted index rather than an FTS5 table because FTS5 ranks every matching row through
its auxiliary function (~10 µs a row): a query sharing a common word with thousands of
entities would take tens of milliseconds.

Top-k without scoring every match: a term with many postings keeps apart, in slot order, the
postings of its highest term frequencies (its top: at most a sixteenth of them, the threshold
chosen once from its first postings), and for the others (its rest) the largest frequency and
the shortest document length. A BM25 weight grows with the frequency and shrinks with the
length, so these two bound what any document takes from the term outside its top. The
candidates of a query are the postings of its rarer terms and the tops of its common ones;
each gets an upper bound (its weights where known, the rest bound where not). The best by that
bound are scored exactly, which gives a k-th best score; the rests whose bounds, together,
stay below it are left out (any other document scores less than the k-th), the others are read
whole (MaxScore), and the candidates whose upper bound reaches the k-th score are scored
exactly. Their ranking is the exhaustive one (same documents, order and scores). Every posting
is scored instead when no rest can be left out or over a quarter of the postings would still
be read (every word of the query is common and no document stands out), and in a small index.
The bounds are computed with the query's own statistics (idf, average length), so they stay
valid as documents come and go: a removed document's postings are zeroed in place (its bounds
only loosen), and the slots are renumbered once more than half of them are free.

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


_GROWTH = 4
"""How much longer than its text a value's folded form is read (Hangul syllables decompose to
three letters). One compatibility character may decompose to 18 (U+FDFA): the caps on a
graph's or board's text count characters before folding, so folding is cut here."""


def tokens(text: str) -> list[str]:
    """Index terms of ``text``: lowercase words without accents or stopwords, stemmed; at most
    as many as plain text of its length holds (one a two characters)."""
    folded = text.casefold()  # at most 3 characters a character
    if not folded.isascii():
        folded = unicodedata.normalize("NFKD", folded)[: len(text) * _GROWTH]
        folded = "".join(c for c in folded if not unicodedata.combining(c))
    words = _TOKEN.findall(folded)
    del words[len(text) // 2 + 1 :]
    return [stem(t) for t in words if t not in _STOPWORDS]


def query_terms(text: str) -> list[str]:
    """The distinct search terms of ``text`` (at most 32)."""
    return list(dict.fromkeys(tokens(text[:4000])))[:_MAX_TERMS]


_UNRESOLVED: Any = object()

TOP_FROM = 8192
"""A term with this many postings keeps its top postings apart; a rarer one is a candidate
wherever it appears."""
TOP_SHARE = 16
"""At most this share (one in ``TOP_SHARE``) of a term's first postings make its top."""
PRUNE_FROM = 32_768
"""An index of fewer slots is scored exhaustively: arrays of its size cost less than the
candidates' bookkeeping (measured: at 10,000 entities 0.18 ms a query against 0.25 ms)."""
READ_SHARE = 4
"""Every posting is scored when the terms that cannot be left out hold more than this share
(one in ``READ_SHARE``) of the query's postings: merging them costs more than scoring all
(measured: queries of words that are each in 30% of 100,000 entities)."""
FIRST_SCORED = 2
"""Candidates of best upper bound scored exactly first, per result asked for."""
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
    loop's formula, operation for operation, so both paths compute the same floats (in place,
    for fewer temporary arrays)."""
    below = tfs + c1
    below += c2 * lengths
    above = tfs * (k1 + 1.0)
    above /= below
    above *= idf
    return above


def _pushed(values: array[Any], value: Any) -> array[Any]:
    """``values`` with ``value`` appended: the same array, or a copy when a numpy view of an
    interrupted search (kept alive by its traceback) still holds the buffer."""
    try:
        values.append(value)
    except BufferError:
        values = array(values.typecode, values)
        values.append(value)
    return values


def top_threshold(tfs: Iterable[float], share: int) -> float:
    """The smallest frequency at which at most ``1 / share`` of ``tfs`` are at or above it
    (infinity when even the largest is more common)."""
    counts: dict[float, int] = {}
    total = 0
    for tf in tfs:
        counts[tf] = counts.get(tf, 0) + 1
        total += 1
    threshold, above = math.inf, 0
    for tf in sorted(counts, reverse=True):
        above += counts[tf]
        if above * share > total:
            break
        threshold = tf
    return threshold


class Postings:
    """One term's postings in slot order: slots and weighted term frequencies (0 once the
    document is removed); from :data:`TOP_FROM` postings on, its top postings apart (slot
    order) and a bound on the others: their largest frequency and shortest length."""

    __slots__ = ("live", "rest_len", "rest_tf", "slots", "tfs", "top", "top_slots", "top_tfs")

    def __init__(self) -> None:
        self.slots: array[int] = array("i")
        self.tfs: array[float] = array("d")
        self.live = 0
        """Postings of present documents (the term's document frequency)."""
        self.top: float | None = None
        """The frequency from which a posting is on top, once the term has enough postings."""
        self.top_slots: array[int] = array("i")
        self.top_tfs: array[float] = array("d")
        self.rest_tf = 0.0
        self.rest_len = math.inf

    def add(self, slot: int, tf: float, lengths: array[float]) -> None:
        """Append a posting; ``slot`` is larger than every slot already here."""
        self.slots = _pushed(self.slots, slot)
        self.tfs = _pushed(self.tfs, tf)
        self.live += 1
        if self.top is not None:
            self._place(slot, tf, lengths[slot])
        elif len(self.slots) >= TOP_FROM:
            self.top = top_threshold(self.tfs, TOP_SHARE)
            for old, old_tf in zip(self.slots, self.tfs, strict=True):
                self._place(old, old_tf, lengths[old])

    def _place(self, slot: int, tf: float, length: float) -> None:
        assert self.top is not None
        if tf >= self.top:
            self.top_slots = _pushed(self.top_slots, slot)
            self.top_tfs = _pushed(self.top_tfs, tf)
        else:
            self.rest_tf = max(self.rest_tf, tf)
            self.rest_len = min(self.rest_len, length)

    def drop(self, slot: int) -> None:
        """Zero the posting of ``slot`` (the rest bound stays: a looser bound)."""
        at = bisect.bisect_left(self.slots, slot)
        if self.top is not None and self.tfs[at] >= self.top:
            self.top_tfs[bisect.bisect_left(self.top_slots, slot)] = 0.0
        self.tfs[at] = 0.0
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
        if exhaustive or len(self._ids) < PRUNE_FROM:
            return self._search_all(weighted, c1, c2, top_k, keep)
        return self._search_top(weighted, c1, c2, top_k, keep)

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

    def _search_top(
        self,
        weighted: list[tuple[Postings, float]],
        c1: float,
        c2: float,
        top_k: int,
        keep: Any,
    ) -> list[tuple[str, float]]:
        """Score exactly the candidates that can reach the k-th best score; every posting when
        no term's rest can be left out."""
        np = self._np
        lengths = np.frombuffer(self._lengths, dtype=np.float64)
        # Float sums of up to 32 weights, each at most idf * (k1 + 1): far within this margin.
        margin = 1e-9 * (self.k1 + 1.0) * sum(idf for _, idf in weighted)
        tiered = [n for n, (posting, _) in enumerate(weighted) if posting.top is not None]
        if not tiered:  # every posting is a candidate, with its score (give or take the margin)
            candidates, scores = self._candidates(weighted, {}, set(), lengths, c1, c2, keep)
            if len(scores) > top_k:
                kth = float(np.partition(scores, len(scores) - top_k)[len(scores) - top_k])
                candidates = candidates[scores >= kth - 2.0 * margin]
            scores = self._scored(candidates, weighted, lengths, c1, c2)
            hits = scores > 0.0
            return self._ranked(candidates[hits], scores[hits], top_k)
        most = {}  # what a document outside the term's top takes from it, at most
        for n in tiered:
            posting, idf = weighted[n]
            most[n] = term_weights(posting.rest_tf, posting.rest_len, idf, self.k1, c1, c2)
        every = set(tiered)
        candidates, bounds = self._candidates(weighted, most, every, lengths, c1, c2, keep)
        first = min(len(candidates), FIRST_SCORED * top_k)
        if first < top_k:
            return self._search_all(weighted, c1, c2, top_k, keep)
        best, scores, kth = self._best_scored(
            candidates, bounds, first, top_k, weighted, lengths, c1, c2
        )
        # Leave out the rests of least bound while together they stay below the k-th score.
        skipped: set[int] = set()
        below = 0.0
        for n in sorted(tiered, key=most.__getitem__):
            if below + most[n] + margin >= kth:
                break
            below += most[n]
            skipped.add(n)
        kept = sum(len(weighted[n][0].slots) for n in every - skipped)
        if not skipped or READ_SHARE * kept > sum(len(posting.slots) for posting, _ in weighted):
            return self._search_all(weighted, c1, c2, top_k, keep)  # little left to skip
        if skipped != every:
            candidates, bounds = self._candidates(weighted, most, skipped, lengths, c1, c2, keep)
            best, scores, again = self._best_scored(
                candidates, bounds, first, top_k, weighted, lengths, c1, c2
            )
            kth = max(kth, again)
        chosen = bounds >= kth - margin
        if np.count_nonzero(chosen) > first:  # more than the best scored already
            best = candidates[chosen]
            scores = self._scored(best, weighted, lengths, c1, c2)
        hits = scores > 0.0
        return self._ranked(best[hits], scores[hits], top_k)

    def _candidates(
        self,
        weighted: list[tuple[Postings, float]],
        most: dict[int, float],
        skipped: set[int],
        lengths: Any,
        c1: float,
        c2: float,
        keep: Any,
    ) -> tuple[Any, Any]:
        """Every document of the query's postings but the rests of the terms ``skipped`` (sorted
        slots), each with an upper bound of its score: its weights where known, the term's rest
        bound where not; a document not among them scores at most the skipped rests' sum."""
        np = self._np
        rest = 0.0
        parts, bounds = [], []
        for n, (posting, idf) in enumerate(weighted):
            if n in skipped:
                slots = np.frombuffer(posting.top_slots, dtype=np.int32)
                tfs = np.frombuffer(posting.top_tfs, dtype=np.float64)
                rest += most[n]
            else:
                slots = np.frombuffer(posting.slots, dtype=np.int32)
                tfs = np.frombuffer(posting.tfs, dtype=np.float64)
            weights = term_weights(tfs, lengths[slots], idf, self.k1, c1, c2)
            parts.append(slots)
            bounds.append(weights - most[n] if n in skipped else weights)
        every = np.concatenate(parts)
        order = np.argsort(every, kind="stable")  # runs of sorted slots: a merge
        every = every[order]
        starts = np.ones(len(every), dtype=bool)
        starts[1:] = every[1:] != every[:-1]
        starts = np.flatnonzero(starts)
        candidates = every[starts]
        if not len(starts):
            return candidates, np.zeros(0, dtype=np.float64)
        upper = np.add.reduceat(np.concatenate(bounds)[order], starts) + rest
        if keep is None:
            return candidates, upper
        kept = keep[candidates]
        return candidates[kept], upper[kept]

    def _best_scored(
        self,
        candidates: Any,
        bounds: Any,
        first: int,
        top_k: int,
        weighted: list[tuple[Postings, float]],
        lengths: Any,
        c1: float,
        c2: float,
    ) -> tuple[Any, Any, float]:
        """The ``first`` candidates of best upper bound (sorted slots), their exact scores, and
        the ``top_k``-th best of those scores (a lower bound of the answer's k-th)."""
        np = self._np
        best = np.sort(candidates[np.argpartition(-bounds, first - 1)[:first]])
        scores = self._scored(best, weighted, lengths, c1, c2)
        return best, scores, float(np.partition(scores, first - top_k)[first - top_k])

    def _scored(
        self, slots: Any, weighted: list[tuple[Postings, float]], lengths: Any, c1: float, c2: float
    ) -> Any:
        """Exact scores of ``slots`` (sorted): the same floats as scoring every posting."""
        np = self._np
        scores = np.zeros(len(slots), dtype=np.float64)
        lengths = lengths[slots]
        for posting, idf in weighted:
            own = np.frombuffer(posting.slots, dtype=np.int32)
            at = own[:-1].searchsorted(slots)  # the last position when past every other
            tfs = np.frombuffer(posting.tfs, dtype=np.float64)[at] * (own[at] == slots)
            scores += term_weights(tfs, lengths, idf, self.k1, c1, c2)  # 0 where tf is 0
        return scores

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
