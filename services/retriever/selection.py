"""Greedy selection of Citegeist's Equation 1, vectorized.

Given candidates with relevance s_i (cosine similarity to the query) and embeddings e_i, pick k of
them one at a time; each step takes

    i* = argmax_{i not in S} (1 - w) * s_i + w * (1 - agg_{j in S} sim(e_i, e_j))

with diversity w in [0, 1]. The first pick is the candidate most similar to the query. Two
aggregations are offered:

* ``max`` (SELECTION_RULE_MMR, the default) is standard Maximal Marginal Relevance: a candidate is
  novel only if it is far from *every* paper already picked, so near-duplicates of any pick are
  pushed down for the rest of the selection.
* ``min`` (SELECTION_RULE_CITEGEIST_MIN) is Equation 1 as the paper prints it. It saturates after
  two picks: the second pick is by construction the candidate least like the first, so from the
  third step on ``min_j sim(e_i, e_j)`` is, for almost every candidate, its similarity to that one
  outlier. The novelty term then no longer tells a near-duplicate of the first pick from a genuinely
  new paper (both are far from the outlier), and a running minimum can only fall as S grows, so the
  term only moves further towards a constant. The rule degrades to "relevance plus distance to the
  second pick", which is why MMR is the default; the paper's form is kept for comparison.

Cost: one matrix-vector product per pick against all candidates updates a running max (and min)
of similarity-to-selected, so k picks over n candidates of dimension d cost O(n*k*d) in numpy with
no Python loop over candidates. Ties go to the earlier candidate (np.argmax returns the first
maximum), so equal inputs always give equal picks.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np


class Aggregation(str, Enum):
    MAX = "max"  # standard MMR
    MIN = "min"  # Citegeist Equation 1 as printed


@dataclass(frozen=True)
class Pick:
    index: int  # into the candidates given
    similarity: float  # s_i, similarity to the query
    selection_score: float  # objective value when picked
    novelty: float  # 1 - agg_j sim(e_i, e_j); 1 for the first pick
    max_similarity_to_selected: float  # 0 for the first pick
    reason: str


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """Unit rows, so dot products are cosines. Zero rows stay zero (similarity 0 to everything)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def _reason(first: bool, relevance: float, novelty: float, diversity: float, name: str) -> str:
    if first:
        best = "most similar" if name == "similarity" else "most relevant"
        return f"{best} to the input ({name} {relevance:.2f})"
    return f"{name} {relevance:.2f}, novelty {novelty:.2f} at diversity {diversity:g}"


def select(
    similarities: np.ndarray,
    vectors: np.ndarray,
    k: int,
    diversity: float,
    aggregation: Aggregation = Aggregation.MAX,
    relevance_name: str = "similarity",
) -> list[Pick]:
    """Picks min(k, n) candidates in order.

    similarities: shape (n,), s_i (cosine, or another relevance in 0..1 named by
    relevance_name in the reasons). vectors: shape (n, d), need not be normalized.
    """
    sims = np.asarray(similarities, dtype=np.float64)
    n = sims.shape[0]
    k = min(k, n)
    if k <= 0:
        return []
    unit = normalize_rows(vectors)
    w = float(diversity)
    use_max = aggregation is Aggregation.MAX
    # Running aggregates of similarity to the picked set, one entry per candidate. The max is
    # always kept because every pick reports it; the min only drives the paper's variant.
    run_max = np.full(n, -np.inf)
    run_min = np.full(n, np.inf)
    available = np.ones(n, dtype=bool)
    relevance = (1.0 - w) * sims
    picks: list[Pick] = []
    for step in range(k):
        if step == 0:
            # Nothing picked yet: the novelty term is 1 for everyone, so this is argmax s_i.
            novelty = np.ones(n)
        else:
            novelty = 1.0 - (run_max if use_max else run_min)
        scores = np.where(available, relevance + w * novelty, -np.inf)
        best = int(np.argmax(scores))
        picks.append(
            Pick(
                index=best,
                similarity=float(sims[best]),
                selection_score=float(scores[best]),
                novelty=float(novelty[best]),
                max_similarity_to_selected=0.0 if step == 0 else float(run_max[best]),
                reason=_reason(step == 0, float(sims[best]), float(novelty[best]), w,
                               relevance_name),
            )
        )
        available[best] = False
        if step + 1 < k:
            to_best = unit @ unit[best]
            np.maximum(run_max, to_best, out=run_max)
            np.minimum(run_min, to_best, out=run_min)
    return picks
