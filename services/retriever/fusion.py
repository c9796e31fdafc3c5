"""Candidates of a search from dense and lexical rankings, and their fusion into one relevance.

Both scores are known for every candidate: a dense-only candidate gets its BM25 score from the
full score vector, a lexical-only one its cosine from its stored vector. So the weighted sum never
has to guess a missing score, and RRF sees each list's true ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

RRF_K = 60  # the constant of Cormack et al. (2009), used unchanged by most systems


class Fusion(str, Enum):
    RRF = "rrf"
    WEIGHTED = "weighted"


@dataclass
class Candidate:
    row: dict
    cosine: float
    bm25: float = 0.0
    dense_rank: int = 0  # 1-based; 0 = not in the dense list
    lexical_rank: int = 0  # 1-based; 0 = not in the lexical list


def _min_max(values: np.ndarray) -> np.ndarray:
    low, high = float(values.min()), float(values.max())
    if high <= low:
        return np.ones_like(values) if high > 0 else np.zeros_like(values)
    return (values - low) / (high - low)


def fused_scores(candidates: list[Candidate], fusion: Fusion, lexical_weight: float) -> np.ndarray:
    if fusion is Fusion.RRF:
        return np.asarray([
            (1.0 / (RRF_K + c.dense_rank) if c.dense_rank else 0.0)
            + (1.0 / (RRF_K + c.lexical_rank) if c.lexical_rank else 0.0)
            for c in candidates
        ])
    cosine = _min_max(np.asarray([c.cosine for c in candidates], dtype=np.float64))
    bm25 = _min_max(np.asarray([c.bm25 for c in candidates], dtype=np.float64))
    return (1.0 - lexical_weight) * cosine + lexical_weight * bm25


def scaled_to_best(scores: np.ndarray) -> np.ndarray:
    """Scores divided by the best one, so the selection rule's relevance term lies in 0..1 like a
    cosine and the diversity weight means the same in every mode."""
    best = float(scores.max()) if scores.size else 0.0
    return scores / best if best > 0 else np.zeros_like(scores)
