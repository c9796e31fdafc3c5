"""Equation 1 of Citegeist, both aggregations, against numbers worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from services.retriever.selection import Aggregation, select

# Four 2-d unit vectors: e1 duplicates e0, e2 is orthogonal to both, e3 lies in between.
#   sim(e0,e1)=1  sim(e0,e2)=0  sim(e0,e3)=0.6  sim(e1,e2)=0  sim(e1,e3)=0.6  sim(e2,e3)=0.8
VECTORS = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
SIMS = np.array([0.9, 0.85, 0.5, 0.7])
W = 0.5

# Step 1, either rule: argmax s -> 0; score (1-w)*0.9 + w*1 = 0.95 (nothing picked: novelty 1).
# Step 2, S={0}, max and min agree:  1: 0.425 + 0.5*0   = 0.425
#                                    2: 0.25  + 0.5*1   = 0.75   <- pick 2
#                                    3: 0.35  + 0.5*0.4 = 0.55
# Step 3, S={0,2}:
#   MMR, 1 - max:  1: 0.425 + 0.5*(1 - max(1, 0))     = 0.425
#                  3: 0.35  + 0.5*(1 - max(0.6, 0.8)) = 0.45   <- pick 3
#   paper, 1 - min: 1: 0.425 + 0.5*(1 - min(1, 0))    = 0.925  <- pick 1, the duplicate of 0
#                   3: 0.35  + 0.5*(1 - min(0.6, 0.8)) = 0.55
HAND = {
    Aggregation.MAX: ([0, 2, 3], [0.95, 0.75, 0.45], [0.0, 0.0, 0.8]),
    Aggregation.MIN: ([0, 2, 1], [0.95, 0.75, 0.925], [0.0, 0.0, 1.0]),
}


@pytest.mark.parametrize("aggregation", [Aggregation.MAX, Aggregation.MIN])
def test_hand_computed_example(aggregation):
    picks = select(SIMS, VECTORS, k=3, diversity=W, aggregation=aggregation)
    indices, scores, max_sims = HAND[aggregation]
    assert [p.index for p in picks] == indices
    assert [p.selection_score for p in picks] == pytest.approx(scores, abs=1e-6)
    assert [p.max_similarity_to_selected for p in picks] == pytest.approx(max_sims, abs=1e-6)
    assert [p.similarity for p in picks] == pytest.approx(SIMS[indices].tolist())


def test_reasons_name_similarity_novelty_and_diversity():
    first, second, third = select(SIMS, VECTORS, k=3, diversity=0.3)
    assert first.reason == "most similar to the input (similarity 0.90)"
    assert second.reason.startswith("similarity ")
    assert "novelty" in second.reason and second.reason.endswith("at diversity 0.3")
    assert f"similarity {third.similarity:.2f}, novelty {third.novelty:.2f}" in third.reason


@pytest.mark.parametrize("aggregation", [Aggregation.MAX, Aggregation.MIN])
def test_zero_diversity_is_plain_top_k(aggregation):
    rng = np.random.default_rng(0)
    sims = rng.uniform(size=200)
    picks = select(sims, rng.normal(size=(200, 32)), k=50, diversity=0.0, aggregation=aggregation)
    assert [p.index for p in picks] == list(np.argsort(-sims, kind="stable")[:50])


def test_ties_go_to_the_earlier_candidate():
    sims = np.array([0.5, 0.7, 0.7, 0.7])
    vectors = np.eye(4)
    assert [p.index for p in select(sims, vectors, k=4, diversity=0.0)] == [1, 2, 3, 0]
    assert [p.index for p in select(sims, vectors, k=4, diversity=0.5)] == [1, 2, 3, 0]


def test_k_larger_than_candidates_returns_all_and_empty_returns_none():
    assert sorted(p.index for p in select(SIMS, VECTORS, k=10, diversity=0.2)) == [0, 1, 2, 3]
    assert select(np.zeros(0), np.zeros((0, 2)), k=3, diversity=0.2) == []


def test_full_diversity_ignores_relevance_after_the_first_pick():
    # w=1: the first pick is still the most relevant; then the farthest from what is picked.
    picks = select(SIMS, VECTORS, k=2, diversity=1.0)
    assert [p.index for p in picks] == [0, 2]


def _reference(sims, vectors, k, w, aggregate):
    """Equation 1 written out literally, as the oracle for random inputs."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    chosen: list[int] = []
    while len(chosen) < min(k, len(sims)):
        best, best_score = None, -np.inf
        for i in range(len(sims)):
            if i in chosen:
                continue
            novelty = 1.0 if not chosen else 1.0 - aggregate(float(unit[i] @ unit[j]) for j in chosen)
            score = (1 - w) * sims[i] + w * novelty
            if score > best_score + 1e-12:
                best, best_score = i, score
        chosen.append(best)
    return chosen


@pytest.mark.parametrize("aggregation,aggregate", [(Aggregation.MAX, max), (Aggregation.MIN, min)])
@pytest.mark.parametrize("w", [0.1, 0.3, 0.7])
def test_agrees_with_the_literal_formula(aggregation, aggregate, w):
    rng = np.random.default_rng(int(w * 10))
    vectors = rng.normal(size=(120, 24))
    sims = rng.uniform(0.2, 0.9, size=120)
    picks = select(sims, vectors, k=30, diversity=w, aggregation=aggregation)
    assert [p.index for p in picks] == _reference(sims, vectors, 30, w, aggregate)


def test_min_rule_saturates_and_readmits_near_duplicates():
    """After the outlier second pick, the paper's rule picks a near-duplicate of the first."""
    rng = np.random.default_rng(3)
    base = np.array([1.0, 0.0, 0.0])
    dups = [base + rng.normal(scale=0.01, size=3) for _ in range(5)]
    distinct = [np.array([0.8, 0.6, 0.0]), np.array([0.0, 0.0, 1.0])]
    vectors = np.array([base, *dups, *distinct])
    sims = np.array([0.9, 0.89, 0.89, 0.88, 0.88, 0.87, 0.7, 0.3])
    mmr = [p.index for p in select(sims, vectors, k=4, diversity=0.5, aggregation=Aggregation.MAX)]
    paper = [p.index for p in select(sims, vectors, k=4, diversity=0.5, aggregation=Aggregation.MIN)]
    near_dups = set(range(1, 6))
    assert not near_dups & set(mmr[:3])
    assert near_dups & set(paper[2:])
