"""Lexical and hybrid search over gRPC: the BM25 index, its fusion with cosine, and its upkeep."""

from __future__ import annotations

import time

import grpc
import numpy as np
import pytest

from citeweave.retriever.v1 import retriever_pb2 as pb
from retriever_support import DIM, record, retriever, rpc_error, unit, upsert

WORDS = [f"word{chr(97 + i)}{chr(97 + j)}" for i in range(8) for j in range(8)]
N = 60


def _texts(rng: np.random.Generator) -> list[str]:
    return [" ".join(rng.choice(WORDS, size=12)) for _ in range(N)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = np.random.default_rng(11)
    vectors = unit(rng.normal(size=(N, DIM)))
    texts = _texts(rng)
    ids = [f"h-{i:02d}" for i in range(N)]
    # The planted lexical match: the only paper with these words, far from the query vector.
    texts[7] = "zebra quantum lattice " + texts[7]
    query = unit(rng.normal(size=DIM))
    vectors[7] = unit(-query + 0.1 * rng.normal(size=DIM))
    categories = [["hyb.A"] if i % 2 else ["hyb.B"] for i in range(N)]
    return {"ids": ids, "vectors": vectors, "texts": texts, "query": query,
            "categories": categories, "store": tmp_path_factory.mktemp("hybrid") / "h.db"}


@pytest.fixture(scope="module")
def hybrid_retriever(corpus):
    records = [
        record(pid, vec, title=f"title {pid}", abstract=text, categories=cats)
        for pid, vec, text, cats in zip(
            corpus["ids"], corpus["vectors"], corpus["texts"], corpus["categories"]
        )
    ]
    with retriever(corpus["store"], write_settle_delay_s="0.2") as service:
        upsert(service.stub, records)
        _wait_fresh(service.stub)
        yield service


def _wait_fresh(stub, timeout_s: float = 30) -> pb.StatsResponse:
    deadline = time.monotonic() + timeout_s
    while True:
        stats = stub.Stats(pb.StatsRequest(), timeout=10)
        if not stats.lexical_stale and stats.lexical_documents == stats.paper_count:
            return stats
        assert time.monotonic() < deadline, f"lexical index still stale: {stats}"
        time.sleep(0.1)


def _search(stub, corpus, **fields) -> pb.SearchResponse:
    fields.setdefault("query_vector", corpus["query"].tolist())
    return stub.Search(pb.SearchRequest(**fields), timeout=30)


def test_lexical_mode_finds_the_paper_with_the_query_words(hybrid_retriever, corpus):
    reply = _search(
        hybrid_retriever.stub, corpus, query_vector=[], mode=pb.SEARCH_MODE_LEXICAL,
        query_text="Zebras in a quantum lattice", top_k=5,
    )
    assert reply.mode == pb.SEARCH_MODE_LEXICAL
    # Only the planted paper shares a word with the query (stemmed: zebras -> zebra).
    assert [p.paper.id for p in reply.papers] == ["h-07"]
    best = reply.papers[0]
    assert best.lexical_score > 0 and best.relevance == pytest.approx(1.0)
    assert best.paper.abstract.startswith("zebra quantum lattice")
    assert best.reason == "most relevant to the input (BM25 relevance 1.00)"


def test_dense_top_k_is_the_exact_top_k(hybrid_retriever, corpus):
    reply = _search(hybrid_retriever.stub, corpus, top_k=7)
    sims = corpus["vectors"] @ corpus["query"]
    expected = [corpus["ids"][i] for i in np.argsort(-sims, kind="stable")[:7]]
    assert [p.paper.id for p in reply.papers] == expected
    assert (reply.breadth, reply.candidates_considered) == (0, 14)
    assert all(p.lexical_score == 0 for p in reply.papers)


def test_rrf_keeps_the_dense_best_and_adds_the_lexical_match(hybrid_retriever, corpus):
    sims = corpus["vectors"] @ corpus["query"]
    dense_best = corpus["ids"][int(np.argmax(sims))]
    reply = _search(
        hybrid_retriever.stub, corpus, mode=pb.SEARCH_MODE_HYBRID, fusion=pb.FUSION_RRF,
        query_text="zebra quantum lattice", top_k=10,
    )
    ids = [p.paper.id for p in reply.papers]
    assert reply.fusion == pb.FUSION_RRF
    # Each is first in one ranking and absent from the other: both score 1/61, the most here.
    assert set(ids[:2]) == {dense_best, "h-07"}
    planted = reply.papers[ids.index("h-07")]
    # Found only lexically, its cosine is still the true one.
    assert planted.similarity == pytest.approx(float(sims[7]), abs=1e-4)
    assert planted.similarity < 0


def test_weighted_fusion_follows_the_weight(hybrid_retriever, corpus):
    def ranking(weight: float) -> list[str]:
        reply = _search(
            hybrid_retriever.stub, corpus, mode=pb.SEARCH_MODE_HYBRID,
            fusion=pb.FUSION_WEIGHTED, lexical_weight=weight,
            query_text="zebra quantum lattice", top_k=10,
        )
        assert reply.lexical_weight == pytest.approx(weight)
        return [p.paper.id for p in reply.papers]

    assert ranking(1.0)[0] == "h-07"
    dense = [p.paper.id for p in _search(hybrid_retriever.stub, corpus, top_k=10).papers]
    # With a tiny BM25 weight the dense order is kept; the planted paper only shares a word
    # with the query, so it is nowhere near the top.
    almost_dense = ranking(0.001)
    assert almost_dense[:5] == dense[:5]
    assert "h-07" not in almost_dense[:5]


def test_a_filter_applies_to_lexical_hits(hybrid_retriever, corpus):
    # h-07 is in hyb.A (odd index); filtering on hyb.B must drop it although it is the BM25 best.
    reply = _search(
        hybrid_retriever.stub, corpus, mode=pb.SEARCH_MODE_HYBRID,
        query_text="zebra quantum lattice", top_k=10,
        filter=pb.SearchFilter(categories=["hyb.B"]),
    )
    assert reply.papers and all(p.paper.categories == ["hyb.B"] for p in reply.papers)
    assert "h-07" not in {p.paper.id for p in reply.papers}


@pytest.mark.parametrize(
    "fields,words",
    [
        ({"mode": pb.SEARCH_MODE_LEXICAL, "query_vector": []}, "query_text is empty"),
        ({"mode": pb.SEARCH_MODE_HYBRID, "query_text": "  "}, "query_text is empty"),
        ({"mode": 9}, "mode 9 is unknown"),
        ({"mode": pb.SEARCH_MODE_HYBRID, "query_text": "x", "fusion": 7}, "fusion 7 is unknown"),
        ({"mode": pb.SEARCH_MODE_HYBRID, "query_text": "x", "lexical_weight": 1.5},
         "lexical_weight must be between 0 and 1"),
        ({"top_k": 201}, "top_k must be between 1 and 200"),
        ({"mode": pb.SEARCH_MODE_LEXICAL, "query_text": "x" * 10001}, "at most 10,000"),
        ({"mode": pb.SEARCH_MODE_HYBRID, "query_text": "x", "query_vector": []},
         "query_vector has 0 values"),
    ],
)
def test_bad_lexical_requests_say_what_to_fix(hybrid_retriever, corpus, fields, words):
    fields = {"query_vector": corpus["query"].tolist(), **fields}
    error = rpc_error(hybrid_retriever.stub.Search, pb.SearchRequest(**fields))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert words in error.details()


def test_the_index_follows_writes_and_survives_a_restart(tmp_path):
    rng = np.random.default_rng(5)
    store = tmp_path / "follow.db"
    first = [record("old", unit(rng.normal(size=DIM)), title="t", abstract="aardvark burrow")]
    lexical = pb.SearchRequest(mode=pb.SEARCH_MODE_LEXICAL, query_text="aardvark", top_k=5)
    with retriever(store, write_settle_delay_s="0.2") as service:
        upsert(service.stub, first)
        stats = _wait_fresh(service.stub)
        assert (stats.lexical_documents, stats.lexical_enabled) == (1, True)
        assert [p.paper.id for p in service.stub.Search(lexical).papers] == ["old"]

        # A changed abstract and a new paper are found by their new words after the rebuild.
        upsert(service.stub, [
            record("old", unit(rng.normal(size=DIM)), title="t", abstract="pangolin scales"),
            record("new", unit(rng.normal(size=DIM)), title="t", abstract="aardvark again"),
        ])
        _wait_fresh(service.stub)
        assert [p.paper.id for p in service.stub.Search(lexical).papers] == ["new"]
        service.stub.Delete(pb.DeleteRequest(ids=["new"]))
        # Deleted papers never come back, even from an index not yet rebuilt.
        assert service.stub.Search(lexical).papers == []
        _wait_fresh(service.stub)
    with retriever(store) as service:
        stats = service.stub.Stats(pb.StatsRequest())
        assert (stats.lexical_documents, stats.lexical_stale) == (1, False)
        reply = service.stub.Search(
            pb.SearchRequest(mode=pb.SEARCH_MODE_LEXICAL, query_text="pangolins", top_k=5)
        )
        assert [p.paper.id for p in reply.papers] == ["old"]


def test_with_the_lexical_index_off_lexical_modes_fail_precondition(tmp_path):
    with retriever(tmp_path / "off.db", lexical_index="false") as service:
        assert service.stub.Stats(pb.StatsRequest()).lexical_enabled is False
        error = rpc_error(
            service.stub.Search,
            pb.SearchRequest(mode=pb.SEARCH_MODE_LEXICAL, query_text="anything"),
        )
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "CITEWEAVE_RETRIEVER_LEXICAL_INDEX" in error.details()
