"""The retriever's lexical (BM25) index over title and abstract, with bm25s.

Why bm25s and not Milvus's own BM25: the PyPI Milvus server (2.3.5) has no full-text search, and
Milvus Lite 3.2.2 has it but took ~900 ms per query over 4,000 abstracts on this machine (its
search path is Python), while bm25s scores the same queries in about a millisecond. See
docs/retrieval.md.

bm25s cannot add or remove single documents, so the index is an immutable snapshot rebuilt from
the store once writes go quiet (see settle.py). Between a write and the rebuild, a deleted
paper may still score but is dropped when its row is looked up, and a new or changed paper is
found by dense search only; Stats reports the lag as lexical_stale.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass

import bm25s
import numpy as np
import Stemmer

# bm25s' tokenizer is not documented as thread-safe and the stemmer is a C object: one lock.
_TOKENIZER_LOCK = threading.Lock()
_STEMMER = Stemmer.Stemmer("english")
# bm25s logs every index build at DEBUG; our JSON logs stay about citeweave.
logging.getLogger("bm25s").setLevel(logging.WARNING)


def document_text(title: str, abstract: str) -> str:
    return f"{title}\n{abstract}"


def tokenize(texts: list[str]) -> list[list[str]]:
    """Lower-cased words without English stop words, Snowball-stemmed."""
    with _TOKENIZER_LOCK:
        return bm25s.tokenize(
            texts, stopwords="en", stemmer=_STEMMER, return_ids=False, show_progress=False
        )


@dataclass(frozen=True)
class LexicalSnapshot:
    """One built index: ids[i] is the paper of BM25 document i."""

    model: bm25s.BM25 | None
    ids: tuple[str, ...]
    positions: dict[str, int]

    @classmethod
    def build(cls, documents: Iterable[tuple[str, str]]) -> "LexicalSnapshot":
        """documents: (paper id, text)."""
        ids: list[str] = []
        texts: list[str] = []
        for paper_id, text in documents:
            ids.append(paper_id)
            texts.append(text)
        tokens = tokenize(texts)
        positions = {p: i for i, p in enumerate(ids)}
        if not any(tokens):
            # bm25s cannot index an empty vocabulary (all texts empty or stop words).
            return cls(model=None, ids=tuple(ids), positions=positions)
        model = bm25s.BM25()
        model.index(tokens, show_progress=False)
        return cls(model=model, ids=tuple(ids), positions=positions)

    @classmethod
    def empty(cls) -> "LexicalSnapshot":
        return cls(model=None, ids=(), positions={})

    def __len__(self) -> int:
        return len(self.ids)

    def scores(self, query_text: str) -> np.ndarray:
        """BM25 score of every document for the query (zeros when no query word is indexed)."""
        if self.model is None:
            return np.zeros(len(self.ids), dtype=np.float32)
        tokens = tokenize([query_text])[0]
        known = [t for t in tokens if t in self.model.vocab_dict]
        if not known:
            return np.zeros(len(self.ids), dtype=np.float32)
        return np.asarray(self.model.get_scores(known), dtype=np.float32)

    def top(self, scores: np.ndarray, limit: int) -> list[tuple[str, float]]:
        """The best `limit` (id, score) with a positive score, best first."""
        positive = np.flatnonzero(scores > 0)
        if positive.size > limit:
            part = np.argpartition(-scores[positive], limit - 1)[:limit]
            positive = positive[part]
        order = positive[np.argsort(-scores[positive], kind="stable")]
        return [(self.ids[i], float(scores[i])) for i in order]

    def score_of(self, scores: np.ndarray, paper_id: str) -> float:
        position = self.positions.get(paper_id)
        return 0.0 if position is None else float(scores[position])
