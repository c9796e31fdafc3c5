"""Upsert/Get/Delete/ListHashes/Stats, restarts and start-up checks, on their own stores."""

from __future__ import annotations

import hashlib
from concurrent import futures

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from citeweave.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from citeweave.retriever.v1 import retriever_pb2 as pb
from retriever_support import DIM, record, retriever, unit, upsert


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(scope="module")
def writable(tmp_path_factory):
    with retriever(tmp_path_factory.mktemp("writable") / "store.db") as service:
        yield service


def _count(stub) -> int:
    return stub.Stats(pb.StatsRequest()).paper_count


def test_upsert_of_an_existing_id_replaces_it(writable):
    stub = writable.stub
    rng = np.random.default_rng(1)
    old, new = unit(rng.normal(size=(2, DIM)))
    base = [record(f"u{i}", v) for i, v in enumerate(unit(rng.normal(size=(20, DIM))))]
    upsert(stub, base + [record("2401.00001", old, title="Old title", sha256=_sha("old"))])
    before = _count(stub)

    reply = stub.Upsert(pb.UpsertRequest(records=[
        record("2401.00001", new * 3.0, title="New title", sha256=_sha("new"),
               authors=["Ada Lovelace", "Alan Turing"], year=2024, date="2024-01-02",
               categories=["cs.IR"], topic=4, url="")
    ]))
    assert reply.upserted_count == 1
    assert _count(stub) == before

    got = stub.Get(pb.GetRequest(ids=["2401.00001"], include_vectors=True))
    paper = got.records[0].paper
    assert (paper.title, paper.sha256, paper.year, paper.date, paper.topic) == (
        "New title", _sha("new"), 2024, "2024-01-02", 4
    )
    assert list(paper.authors) == ["Ada Lovelace", "Alan Turing"]
    assert list(paper.categories) == ["cs.IR"]
    # Stored unit length, whatever length was sent.
    assert np.asarray(got.records[0].vector) == pytest.approx(new, abs=1e-6)

    hits = stub.Search(pb.SearchRequest(query_vector=new.tolist(), breadth=5)).papers
    assert hits[0].paper.id == "2401.00001" and hits[0].similarity == pytest.approx(1.0, abs=1e-5)
    assert [p.paper.id for p in hits].count("2401.00001") == 1


def test_get_lists_missing_ids_in_request_order(writable):
    stub = writable.stub
    upsert(stub, [record("g1", unit(np.ones(DIM)), title="one"), record("g2", unit(np.ones(DIM)))])
    reply = stub.Get(pb.GetRequest(ids=["nope-1", "g2", "g1", "nope-2", "g1"]))
    assert [r.paper.id for r in reply.records] == ["g2", "g1"]
    assert list(reply.missing_ids) == ["nope-1", "nope-2"]
    assert not reply.records[0].vector  # only with include_vectors
    assert stub.Get(pb.GetRequest()).records == []


def test_delete_counts_only_stored_ids(writable):
    stub = writable.stub
    upsert(stub, [record(f"d{i}", unit(np.arange(1, DIM + 1) + i)) for i in range(3)])
    before = _count(stub)
    assert stub.Delete(pb.DeleteRequest(ids=["d0", "d1", "never-stored"])).deleted_count == 2
    assert _count(stub) == before - 2
    assert list(stub.Get(pb.GetRequest(ids=["d0", "d2"])).missing_ids) == ["d0"]
    assert stub.Delete(pb.DeleteRequest(ids=["d0"])).deleted_count == 0


def test_long_text_is_cut_on_a_character_boundary(writable):
    stub = writable.stub
    abstract = "é" * 40_000  # 80,000 UTF-8 bytes, over the 65,535-byte column
    upsert(stub, [record("long", unit(np.ones(DIM)), abstract=abstract, title="ü" * 3000)])
    paper = stub.Get(pb.GetRequest(ids=["long"])).records[0].paper
    assert len(paper.abstract.encode()) <= 65535 and set(paper.abstract) == {"é"}
    assert len(paper.title.encode()) <= 4096 and set(paper.title) == {"ü"}


def test_list_hashes_pages_through_every_row(writable):
    stub = writable.stub
    rng = np.random.default_rng(5)
    rows = {f"h{i:04d}": _sha(str(i)) for i in range(2500)}
    upsert(stub, [record(i, v, sha256=h) for (i, h), v in zip(rows.items(),
                                                              unit(rng.normal(size=(2500, DIM))))])
    pages = list(stub.ListHashes(pb.ListHashesRequest(page_size=1000)))
    assert all(0 < len(p.entries) <= 1000 for p in pages)
    listed = {e.id: e.sha256 for p in pages for e in p.entries}
    assert sum(len(p.entries) for p in pages) == len(listed) == _count(stub)
    assert {i: listed[i] for i in rows} == rows


def test_stats_describe_the_store(writable):
    stats = writable.stub.Stats(pb.StatsRequest())
    assert (stats.dimension, stats.collection, stats.store_kind) == (DIM, "papers", "milvus-lite")
    assert (stats.index_type, stats.metric_type) == ("HNSW", "COSINE")


def test_restart_keeps_the_data(tmp_path):
    store = tmp_path / "restart.db"
    rng = np.random.default_rng(9)
    vectors = unit(rng.normal(size=(300, DIM)))
    ids = [f"k{i}" for i in range(300)]
    with retriever(store) as first:
        upsert(first.stub, [record(i, v, title=f"t {i}", sha256=_sha(i)) for i, v in
                            zip(ids, vectors)])
        first.stub.Delete(pb.DeleteRequest(ids=["k0"]))
        before = first.stub.Get(pb.GetRequest(ids=ids, include_vectors=True))
        search_before = first.stub.Search(pb.SearchRequest(query_vector=vectors[1].tolist()))
    with retriever(store) as second:
        assert second.stub.Stats(pb.StatsRequest()).paper_count == 299
        after = second.stub.Get(pb.GetRequest(ids=ids, include_vectors=True))
        assert list(after.missing_ids) == ["k0"]
        assert after == before
        search_after = second.stub.Search(pb.SearchRequest(query_vector=vectors[1].tolist()))
        assert [p.paper.id for p in search_after.papers] == [p.paper.id for p in
                                                             search_before.papers]


def test_a_collection_of_another_dimension_fails_start_up_untouched(tmp_path):
    store = tmp_path / "dim.db"
    with retriever(store) as service:
        upsert(service.stub, [record("a", unit(np.ones(DIM)))])
    with pytest.raises(RuntimeError) as failed:
        with retriever(store, dimension="8"):
            pass
    message = str(failed.value)
    assert "exited with code 1" in message
    assert f"stores {DIM}-dimensional vectors but the embedding model produces 8-dimensional" \
        in message
    assert "Nothing was changed" in message
    with retriever(store) as again:
        assert again.stub.Stats(pb.StatsRequest()).paper_count == 1


class _FakeEmbedder(embedder_pb2_grpc.EmbedderServiceServicer):
    def GetModelInfo(self, request, context):
        return embedder_pb2.GetModelInfoResponse(model_name="fake", dimension=DIM)


def test_dimension_follows_the_embedder(tmp_path):
    """With embedder_addr, the embedder's dimension wins over the dimension setting; warm-up
    waits until the embedder reports SERVING."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(_FakeEmbedder(), server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with retriever(tmp_path / "emb.db", dimension="768",
                       embedder_addr=f"127.0.0.1:{port}") as service:
            assert service.stub.Stats(pb.StatsRequest()).dimension == DIM
    finally:
        server.stop(None)
