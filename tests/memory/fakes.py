"""A stand-in vector store actor speaking the ``#VectorStore`` protocol (no model needed).

Its "embedding" is a bag of words after mapping synonyms to one concept, so tests can
check that meaning-level hits are fused in without downloading a model.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel

from toolcards.runtime import ToolActor, ToolActorContext

CONCEPTS = {
    "hire": "onboard",
    "hires": "onboard",
    "newcomer": "onboard",
    "newcomers": "onboard",
    "onboarding": "onboard",
    "money": "billing",
    "invoice": "billing",
    "invoices": "billing",
    "billing": "billing",
    "outage": "incident",
    "incident": "incident",
    "downtime": "incident",
}


def bag(text: str) -> dict[str, float]:
    words = [CONCEPTS.get(w, w) for w in re.findall(r"[a-z0-9]+", text.lower())]
    counts: dict[str, float] = {}
    for word in words:
        counts[word] = counts.get(word, 0.0) + 1.0
    norm = math.sqrt(sum(v * v for v in counts.values())) or 1.0
    return {k: v / norm for k, v in counts.items()}


class FakeVectorStore(ToolActor):
    """Answers upsert/remove/query/available; records every upserted id."""

    def __init__(self, ctx: ToolActorContext, config: BaseModel | None) -> None:
        super().__init__(ctx, config)
        self.docs: dict[str, dict[str, dict[str, float]]] = {}
        self.upserted: list[str] = []
        self.up = True

    def available(self) -> bool:
        return self.up

    def upsert(self, collection: str, items: list[tuple[str, str]]) -> None:
        docs = self.docs.setdefault(collection, {})
        for doc_id, text in items:
            docs[doc_id] = bag(text)
            self.upserted.append(doc_id)

    def remove(self, collection: str, ids: list[str]) -> None:
        for doc_id in ids:
            self.docs.get(collection, {}).pop(doc_id, None)

    def query(self, collection: str, text: str, top_k: int) -> list[tuple[str, float]]:
        q = bag(text)
        scored = [
            (doc_id, sum(q.get(k, 0.0) * v for k, v in vec.items()))
            for doc_id, vec in self.docs.get(collection, {}).items()
        ]
        scored = [s for s in scored if s[1] > 0]
        scored.sort(key=lambda s: -s[1])
        return scored[:top_k]

    def upserted_ids(self) -> list[str]:
        return list(self.upserted)

    def ids(self, collection: str) -> list[str]:
        return sorted(self.docs.get(collection, {}))


def start_fake_store(team: Any, name: str = "#VectorStore") -> Any:
    return team.tool_actor(name, FakeVectorStore)
