"""Ranking metrics with graded relevance, as trec_eval (and so BEIR) computes them.

qrels: {doc id: relevance}; a document is relevant when its relevance is above 0. nDCG uses the
linear gain of trec_eval's ndcg_cut (gain = relevance, discount log2(rank + 1)), so figures compare
with published BEIR tables; the ideal ranking orders every judged relevant document.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def _relevant(qrels: Mapping[str, int]) -> set[str]:
    return {doc for doc, grade in qrels.items() if grade > 0}


def recall_at(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    relevant = _relevant(qrels)
    if not relevant:
        raise ValueError("recall is undefined for a query without relevant documents")
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def mrr_at(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    relevant = _relevant(qrels)
    for rank, doc in enumerate(ranked[:k], start=1):
        if doc in relevant:
            return 1.0 / rank
    return 0.0


def ndcg_at(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    def dcg(grades: Sequence[int]) -> float:
        return sum(g / math.log2(rank + 1) for rank, g in enumerate(grades, start=1) if g > 0)

    ideal = dcg(sorted((g for g in qrels.values() if g > 0), reverse=True)[:k])
    if ideal == 0:
        raise ValueError("nDCG is undefined for a query without relevant documents")
    return dcg([qrels.get(doc, 0) for doc in ranked[:k]]) / ideal


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        raise ValueError("median of no values")
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def summarize(
    rankings: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    latencies_ms: Sequence[float],
    k: int,
) -> dict[str, float]:
    """Mean metrics over the queries of `rankings` (each must have relevant documents)."""
    if not rankings:
        raise ValueError("no queries to evaluate")
    n = len(rankings)
    return {
        f"recall@{k}": sum(recall_at(r, qrels[q], k) for q, r in rankings.items()) / n,
        "ndcg@10": sum(ndcg_at(r, qrels[q], 10) for q, r in rankings.items()) / n,
        f"mrr@{k}": sum(mrr_at(r, qrels[q], k) for q, r in rankings.items()) / n,
        "median_latency_ms": median(latencies_ms),
    }
