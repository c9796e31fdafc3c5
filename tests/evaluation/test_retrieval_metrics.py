"""Ranking metrics against values computed by hand."""

from __future__ import annotations

import math

import pytest

from services.evaluation.retrieval_metrics import median, mrr_at, ndcg_at, recall_at, summarize

QRELS = {"d1": 2, "d2": 1, "d3": 0, "d4": 1}  # d3 judged not relevant


def test_recall_counts_relevant_documents_within_k():
    ranked = ["d3", "d2", "x", "d1", "d4"]
    assert recall_at(ranked, QRELS, 2) == pytest.approx(1 / 3)  # d2 of {d1, d2, d4}
    assert recall_at(ranked, QRELS, 4) == pytest.approx(2 / 3)
    assert recall_at(ranked, QRELS, 5) == 1.0


def test_mrr_is_the_reciprocal_rank_of_the_first_relevant_within_k():
    assert mrr_at(["d3", "x", "d4", "d1"], QRELS, 10) == pytest.approx(1 / 3)
    assert mrr_at(["d3", "x", "d4"], QRELS, 2) == 0.0  # d3 has relevance 0: not relevant


def test_ndcg_uses_graded_linear_gain():
    ranked = ["d2", "d3", "d1"]
    # DCG = 1/log2(2) + 0 + 2/log2(4) = 1 + 1 = 2
    # ideal: grades 2, 1, 1 -> 2/1 + 1/log2(3) + 1/log2(4) = 2 + 0.63093 + 0.5
    ideal = 2 + 1 / math.log2(3) + 0.5
    assert ndcg_at(ranked, QRELS, 10) == pytest.approx(2 / ideal)
    assert ndcg_at(["d1", "d2", "d4"], QRELS, 10) == pytest.approx(1.0)
    # At cut-off 1 only the first position counts, and the ideal is the grade-2 document.
    assert ndcg_at(ranked, QRELS, 1) == pytest.approx(1 / 2)


def test_metrics_refuse_queries_without_relevant_documents():
    with pytest.raises(ValueError, match="without relevant"):
        recall_at(["a"], {"a": 0}, 5)
    with pytest.raises(ValueError, match="without relevant"):
        ndcg_at(["a"], {}, 10)


def test_median_and_summary():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    summary = summarize(
        {"q1": ["d1", "x"], "q2": ["x", "y"]},
        {"q1": {"d1": 1}, "q2": {"y": 1, "z": 1}},
        [10.0, 30.0, 20.0],
        k=2,
    )
    assert summary == pytest.approx({
        "recall@2": (1.0 + 0.5) / 2,
        "ndcg@10": (1.0 + (1 / math.log2(3)) / (1 + 1 / math.log2(3))) / 2,
        "mrr@2": (1.0 + 0.5) / 2,
        "median_latency_ms": 20.0,
    })
