"""A BM25 keyword index over short documents, backed by an in-memory SQLite FTS5 table.

Queries are free text from a model: they are reduced to plain word tokens, each quoted as an
FTS5 string, and OR-ed, so FTS5 syntax (``"``, ``NEAR(``, ``*``, ``AND``, column filters) is
searched for literally and never parsed.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence

_TOKEN = re.compile(r"\w+", re.UNICODE)
_MAX_TERMS = 32
_STOPWORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "how",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
    }
)


def query_terms(text: str) -> list[str]:
    """The distinct search terms of ``text`` (lowercase words, stopwords dropped, capped)."""
    seen: dict[str, None] = {}
    for token in _TOKEN.findall(text.lower()):
        if token not in _STOPWORDS:
            seen.setdefault(token, None)
    terms = list(seen)
    if not terms:  # a query made only of stopwords still searches for them
        terms = list(dict.fromkeys(_TOKEN.findall(text.lower())))
    return terms[:_MAX_TERMS]


class KeywordIndex:
    """Documents with named text columns, ranked by FTS5 ``bm25`` (higher score is better).

    Not thread-safe by design: an owner (a tool actor) calls it from one thread at a time.
    """

    def __init__(
        self,
        columns: Sequence[str] = ("text",),
        weights: Sequence[float] | None = None,
    ) -> None:
        if not columns or any(not c.isidentifier() for c in columns):
            raise ValueError("columns must be non-empty identifiers")
        if weights is not None and len(weights) != len(columns):
            raise ValueError("one weight per column")
        self.columns = tuple(columns)
        self._weights = tuple(float(w) for w in (weights or [1.0] * len(columns)))
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        cols = ", ".join(self.columns)
        self._db.execute(
            f"CREATE VIRTUAL TABLE docs USING fts5(doc_id UNINDEXED, {cols}, "
            "tokenize='porter unicode61 remove_diacritics 2')"
        )
        self._rowids: dict[str, int] = {}
        self._next_rowid = 1

    def __len__(self) -> int:
        return len(self._rowids)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._rowids

    def upsert(self, doc_id: str, *values: str) -> None:
        """Insert or replace a document; one value per column."""
        if len(values) != len(self.columns):
            raise ValueError(f"expected {len(self.columns)} values, got {len(values)}")
        self.remove(doc_id)
        rowid = self._next_rowid
        self._next_rowid += 1
        marks = ", ".join("?" for _ in range(len(values) + 2))
        self._db.execute(
            f"INSERT INTO docs(rowid, doc_id, {', '.join(self.columns)}) VALUES ({marks})",
            (rowid, doc_id, *values),
        )
        self._rowids[doc_id] = rowid

    def upsert_many(self, docs: Iterable[tuple[str, Sequence[str]]]) -> None:
        """Insert or replace many documents in one transaction."""
        with self._db:
            for doc_id, values in docs:
                self.upsert(doc_id, *values)

    def remove(self, doc_id: str) -> None:
        """Drop a document (no error when it is absent)."""
        rowid = self._rowids.pop(doc_id, None)
        if rowid is not None:
            self._db.execute("DELETE FROM docs WHERE rowid = ?", (rowid,))

    def clear(self) -> None:
        """Drop every document."""
        self._db.execute("DELETE FROM docs")
        self._rowids.clear()

    def search(
        self, query: str, top_k: int = 10, allowed: set[str] | None = None
    ) -> list[tuple[str, float]]:
        """Documents matching any term of ``query``, best first, as ``(doc_id, score)``.

        ``allowed`` restricts hits to those ids (filters applied before the cut to ``top_k``).
        """
        terms = query_terms(query)
        if not terms or top_k <= 0 or not self._rowids:
            return []
        match = " OR ".join(f'"{term}"' for term in terms)
        weights = ", ".join(repr(w) for w in self._weights)
        limit = top_k if allowed is None else max(top_k * 4, 200)
        sql = (
            f"SELECT doc_id, bm25(docs, 0.0, {weights}) AS rank FROM docs "
            "WHERE docs MATCH ? ORDER BY rank LIMIT ?"
        )
        try:
            rows = self._db.execute(sql, (match, limit)).fetchall()
        except sqlite3.OperationalError:  # defensive: a term FTS5 still refuses
            return []
        hits = [(str(doc_id), -float(rank)) for doc_id, rank in rows]
        if allowed is not None:
            hits = [hit for hit in hits if hit[0] in allowed]
        return hits[:top_k]
