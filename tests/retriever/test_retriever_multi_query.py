"""Several query vectors (a full-paper input, one vector per page) in Search and SelectPassages."""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from citeweave.retriever.v1 import retriever_pb2 as pb
from retriever_support import DIM, rpc_error, unit
from services.retriever.selection import select

INVALID = grpc.StatusCode.INVALID_ARGUMENT
SUM, MAX = pb.PAGE_AGGREGATION_SUM, pb.PAGE_AGGREGATION_MAX


def _vectors(rows: np.ndarray) -> list[pb.CandidateVector]:
    return [pb.CandidateVector(values=r.tolist()) for r in rows]


def _truth(corpus, queries: np.ndarray, candidates_per_query: int, how: int):
    """The pool the retriever sees (each query's exact top), ranked by the aggregate."""
    sims = corpus.vectors @ unit(queries).T
    pool = sorted({int(i) for q in range(len(queries))
                   for i in np.argsort(-sims[:, q], kind="stable")[:candidates_per_query]})
    agg = sims[pool].mean(axis=1) if how == SUM else sims[pool].max(axis=1)
    order = np.argsort(-agg, kind="stable")
    return [corpus.ids[pool[i]] for i in order], agg[order], sims[[pool[i] for i in order]]


@pytest.mark.parametrize("how", [SUM, MAX])
def test_pages_pooled_and_ranked_by_aggregate(shared_retriever, corpus, how):
    rng = np.random.default_rng(11)
    queries = unit(rng.normal(size=(4, DIM)))
    reply = shared_retriever.stub.Search(pb.SearchRequest(
        query_vectors=_vectors(queries), breadth=10, diversity=0.0, page_aggregation=how,
    ))
    ids, agg, per_query = _truth(corpus, queries, 60, how)
    assert (reply.query_count, reply.page_aggregation) == (4, how)
    assert reply.candidates_considered == 60  # the pool is cut to 6*breadth by the aggregate
    assert [p.paper.id for p in reply.papers] == ids[:30]
    assert [p.similarity for p in reply.papers] == pytest.approx(agg[:30], abs=1e-5)
    for paper, expected in zip(reply.papers, per_query):
        assert list(paper.query_similarities) == pytest.approx(expected, abs=1e-5)
    word = "mean" if how == SUM else "max"
    assert f"{word} similarity over 4 query vectors" in reply.papers[0].reason


def test_sum_is_the_default_and_one_vector_is_a_plain_search(shared_retriever, corpus):
    rng = np.random.default_rng(12)
    queries = unit(rng.normal(size=(3, DIM)))
    default = shared_retriever.stub.Search(pb.SearchRequest(query_vectors=_vectors(queries)))
    assert default.page_aggregation == SUM
    explicit = shared_retriever.stub.Search(
        pb.SearchRequest(query_vectors=_vectors(queries), page_aggregation=SUM)
    )
    assert [p.paper.id for p in default.papers] == [p.paper.id for p in explicit.papers]

    single = shared_retriever.stub.Search(pb.SearchRequest(query_vector=queries[0].tolist()))
    one = shared_retriever.stub.Search(pb.SearchRequest(query_vectors=_vectors(queries[:1])))
    assert [p.paper.id for p in one.papers] == [p.paper.id for p in single.papers]
    assert [p.similarity for p in one.papers] == pytest.approx([p.similarity for p in single.papers])
    assert one.query_count == 1 and not one.papers[0].query_similarities


def test_aggregation_changes_the_ranking(shared_retriever, corpus):
    """One page close to a paper, the others far: MAX ranks that paper first, SUM need not."""
    rng = np.random.default_rng(13)
    target = corpus.vectors[5]
    others = unit(rng.normal(size=(5, DIM)))
    queries = np.vstack([target, others])
    by_max = shared_retriever.stub.Search(
        pb.SearchRequest(query_vectors=_vectors(queries), page_aggregation=MAX)
    )
    by_sum = shared_retriever.stub.Search(
        pb.SearchRequest(query_vectors=_vectors(queries), page_aggregation=SUM)
    )
    assert by_max.papers[0].paper.id == corpus.ids[5]
    assert by_max.papers[0].similarity == pytest.approx(1.0, abs=1e-5)
    assert by_sum.papers[0].similarity < 0.9


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (pb.SearchRequest(query_vector=[1.0] * DIM, query_vectors=_vectors(np.ones((2, DIM)))),
         "not both"),
        (pb.SearchRequest(query_vectors=_vectors(np.ones((2, DIM))), mode=pb.SEARCH_MODE_HYBRID,
                          query_text="graphs"), "SEARCH_MODE_DENSE only"),
        (pb.SearchRequest(query_vectors=_vectors(np.ones((201, DIM)))), "at most 200"),
        (pb.SearchRequest(query_vectors=[pb.CandidateVector(values=[1.0] * DIM),
                                         pb.CandidateVector(values=[1.0] * 3)]),
         "query_vectors[1] has 3 values"),
        (pb.SearchRequest(query_vectors=[pb.CandidateVector(values=[0.0] * DIM)]), "all zeros"),
        (pb.SearchRequest(query_vectors=_vectors(np.ones((2, DIM))), page_aggregation=9),
         "PAGE_AGGREGATION_SUM"),
    ],
)
def test_bad_query_vectors_rejected(shared_retriever, request_, message):
    error = rpc_error(shared_retriever.stub.Search, request_)
    assert error.code() == INVALID
    assert message in error.details()


@pytest.mark.parametrize("how", [SUM, MAX])
def test_select_passages_with_several_queries(shared_retriever, how):
    rng = np.random.default_rng(14)
    queries = unit(rng.normal(size=(3, 8)))
    pages = unit(rng.normal(size=(12, 8)))
    reply = shared_retriever.stub.SelectPassages(pb.SelectPassagesRequest(
        query_vectors=_vectors(queries), candidates=_vectors(pages), k=3, diversity=0.4,
        aggregation=how,
    ))
    sims = pages @ queries.T
    relevance = sims.mean(axis=1) if how == SUM else sims.max(axis=1)
    expected = select(relevance, pages, 3, 0.4)
    assert [s.index for s in reply.selections] == [p.index for p in expected]
    assert [s.similarity for s in reply.selections] == pytest.approx(
        [p.similarity for p in expected], abs=1e-5
    )


def test_select_passages_rejects_mismatched_queries(shared_retriever):
    error = rpc_error(shared_retriever.stub.SelectPassages, pb.SelectPassagesRequest(
        query_vectors=[pb.CandidateVector(values=[1.0, 0.0]), pb.CandidateVector(values=[1.0])],
        candidates=[pb.CandidateVector(values=[1.0, 0.0])], k=1,
    ))
    assert error.code() == INVALID
    assert "query_vectors[1] has 1 values; the first has 2" in error.details()
