"""Search and SelectPassages over gRPC against one pre-loaded retriever (HNSW on Milvus Lite)."""

from __future__ import annotations

import numpy as np
import pytest

from citeweave.retriever.v1 import retriever_pb2 as pb
from retriever_support import DIM, unit
from services.retriever.selection import Aggregation, select

RULES = [pb.SELECTION_RULE_MMR, pb.SELECTION_RULE_CITEGEIST_MIN]


def _brute_force(corpus, query, k):
    sims = corpus.vectors @ unit(query)
    order = np.argsort(-sims, kind="stable")[:k]
    return [corpus.ids[i] for i in order], sims[order]


def _mean_pairwise(vectors: np.ndarray) -> float:
    sims = unit(vectors) @ unit(vectors).T
    upper = np.triu_indices(len(vectors), k=1)
    return float(sims[upper].mean())


@pytest.mark.parametrize("rule", RULES)
def test_zero_diversity_longlist_is_the_exact_top_k(shared_retriever, corpus, rule):
    rng = np.random.default_rng(7)
    for query in unit(rng.normal(size=(5, DIM))):
        reply = shared_retriever.stub.Search(
            pb.SearchRequest(query_vector=query.tolist(), breadth=20, diversity=0.0, rule=rule)
        )
        expected_ids, expected_sims = _brute_force(corpus, query, 60)
        assert reply.candidates_considered == 120
        assert [p.paper.id for p in reply.papers] == expected_ids
        assert [p.similarity for p in reply.papers] == pytest.approx(expected_sims, abs=1e-5)
        assert [p.rank for p in reply.papers] == list(range(1, 61))
        assert [p.candidate_rank for p in reply.papers] == list(range(1, 61))


def test_breadth_defaults_to_ten(shared_retriever, corpus):
    reply = shared_retriever.stub.Search(pb.SearchRequest(query_vector=corpus.vectors[0].tolist()))
    assert (reply.breadth, reply.candidates_considered, len(reply.papers)) == (10, 60, 30)
    assert reply.rule == pb.SELECTION_RULE_MMR
    assert reply.papers[0].paper.id == corpus.ids[0]
    assert reply.search_ms > 0 and reply.selection_ms >= 0


def _cluster_search(stub, corpus, diversity, rule=pb.SELECTION_RULE_MMR, **extra):
    return stub.Search(
        pb.SearchRequest(
            query_vector=corpus.cluster_query.tolist(), breadth=5, diversity=diversity, rule=rule,
            filter=pb.SearchFilter(categories=["clus.X"]), **extra,
        )
    )


def test_mmr_picks_a_more_diverse_longlist_than_top_k(shared_retriever, corpus):
    """Six clusters of five near-duplicates: top-k fills the longlist of 15 with the three nearest
    clusters; MMR covers all six with its first six picks and has a lower mean similarity."""
    plain = _cluster_search(shared_retriever.stub, corpus, 0.0, include_vectors=True)
    mmr = _cluster_search(shared_retriever.stub, corpus, 0.5, include_vectors=True)
    assert plain.candidates_considered == mmr.candidates_considered == 30
    assert len(plain.papers) == len(mmr.papers) == 15
    plain_clusters = {corpus.cluster_of[p.paper.id] for p in plain.papers}
    assert plain_clusters == {0, 1, 2}
    first_six = [corpus.cluster_of[p.paper.id] for p in mmr.papers[:6]]
    assert sorted(first_six) == [0, 1, 2, 3, 4, 5]
    plain_div = _mean_pairwise(np.array([p.vector for p in plain.papers]))
    mmr_div = _mean_pairwise(np.array([p.vector for p in mmr.papers]))
    assert mmr_div < plain_div - 0.05


@pytest.mark.parametrize("rule,aggregation", zip(RULES, [Aggregation.MAX, Aggregation.MIN]))
def test_service_selection_matches_the_rule_on_all_candidates(shared_retriever, corpus, rule,
                                                              aggregation):
    # The 30 cluster papers are exactly the 6*breadth candidates, so the truth is computable here.
    reply = _cluster_search(shared_retriever.stub, corpus, 0.4, rule=rule)
    index = {paper_id: i for i, paper_id in enumerate(corpus.ids)}
    vectors = corpus.vectors[[index[c] for c in corpus.cluster_ids]]
    sims = vectors @ corpus.cluster_query
    picks = select(sims, vectors, 15, 0.4, aggregation)
    assert [p.paper.id for p in reply.papers] == [corpus.cluster_ids[p.index] for p in picks]
    assert [p.selection_score for p in reply.papers] == pytest.approx(
        [p.selection_score for p in picks], abs=1e-4
    )
    assert reply.rule == rule


def test_scored_papers_explain_themselves(shared_retriever, corpus):
    reply = _cluster_search(shared_retriever.stub, corpus, 0.3, include_vectors=True)
    first, *rest = reply.papers
    assert first.reason.startswith("most similar to the input")
    assert first.max_similarity_to_selected == 0.0
    assert all("novelty" in p.reason and p.reason.endswith("at diversity 0.3") for p in rest)
    assert all(0 < p.max_similarity_to_selected <= 1.0001 for p in rest)
    assert all(len(p.vector) == DIM for p in reply.papers)
    assert np.linalg.norm(first.vector) == pytest.approx(1.0, abs=1e-5)
    assert first.paper.title == f"title {first.paper.id}"
    assert first.paper.categories == ["clus.X"]
    assert reply.diversity == pytest.approx(0.3)
    # Without include_vectors no vectors travel.
    assert not _cluster_search(shared_retriever.stub, corpus, 0.3).papers[0].vector


def _filtered_ids(stub, corpus, **filter_fields) -> set[str]:
    reply = stub.Search(
        pb.SearchRequest(
            query_vector=corpus.vectors[0].tolist(), breadth=20,
            filter=pb.SearchFilter(**filter_fields),
        )
    )
    return {p.paper.id for p in reply.papers}


@pytest.mark.parametrize(
    "filter_fields,expected",
    [
        ({"categories": ["filt.CL"]}, {"f-a", "f-b", "f-e"}),
        ({"categories": ["filt.LG", "filt.IR"]}, {"f-b", "f-c", "f-d", "f-e"}),
        ({"topics": [2]}, {"f-b", "f-c"}),
        ({"topics": [1, 3]}, {"f-a", "f-d", "f-e", "f-f"}),
        # Inclusive bounds on the ISO date string; unknown dates never match a range.
        ({"date_from": "2020-01-01", "date_to": "2020-12-31"}, {"f-b", "f-c", "f-d"}),
        ({"date_from": "2020-06-16"}, {"f-d", "f-e"}),
        ({"date_to": "2020-01-01"}, {"f-a", "f-b"}),
        ({"date_from": "2020-06-15", "date_to": "2020-06-15"}, {"f-c"}),
        ({"categories": ["filt.CL"], "topics": [1], "date_from": "2020-01-01"}, {"f-e"}),
        ({"categories": ["nope"]}, set()),
    ],
)
def test_filters(shared_retriever, corpus, filter_fields, expected):
    assert _filtered_ids(shared_retriever.stub, corpus, **filter_fields) == expected


def test_select_passages_hand_computed(shared_retriever):
    # The example of test_retriever_selection.py, through the service: the query (1, 0.75)/1.25
    # gives s = (0.8, 0.8, 0.6, 0.96), worked out below for w = 0.5.
    # Step 1: argmax s -> 3.  Step 2, S={3}: 0: 0.4+0.5*(1-0.6)=0.6, 1: 0.6 (tie, 0 earlier wins),
    # 2: 0.3+0.5*(1-0.8)=0.4 -> 0.  Step 3, S={3,0}: MMR 1: 0.4+0.5*(1-1)=0.4, 2: 0.3+0.5*(1-0.8)
    # =0.4 -> tie, 1 wins; paper's min 1: 0.4+0.5*(1-0.6)=0.6, 2: 0.3+0.5*(1-0)=0.8 -> 2.
    query = [0.8, 0.6]
    candidates = [[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.6, 0.8]]
    expected = {pb.SELECTION_RULE_MMR: [3, 0, 1], pb.SELECTION_RULE_CITEGEIST_MIN: [3, 0, 2]}
    for rule, indices in expected.items():
        reply = shared_retriever.stub.SelectPassages(
            pb.SelectPassagesRequest(
                query_vector=query, k=3, diversity=0.5, rule=rule,
                candidates=[pb.CandidateVector(values=c) for c in candidates],
            )
        )
        assert [s.index for s in reply.selections] == indices
        assert reply.selections[0].similarity == pytest.approx(0.96)
        assert reply.selections[0].reason.startswith("most similar to the input")


def test_select_passages_with_fewer_candidates_than_k_returns_all(shared_retriever):
    reply = shared_retriever.stub.SelectPassages(
        pb.SelectPassagesRequest(
            query_vector=[1.0, 0.0, 0.0], k=5, diversity=0.2,
            candidates=[pb.CandidateVector(values=[0.0, 1.0, 0.0]),
                        pb.CandidateVector(values=[1.0, 0.1, 0.0])],
        )
    )
    assert [s.index for s in reply.selections] == [1, 0]
    empty = shared_retriever.stub.SelectPassages(
        pb.SelectPassagesRequest(query_vector=[1.0, 0.0], k=2)
    )
    assert list(empty.selections) == []
