"""The retriever against a real Milvus server (standalone, from PyPI `milvus==2.3.5`).

Skipped when the `milvus` package is not installed; the server is the session fixture
`milvus_server_uri` of tests/conftest.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from citeweave.retriever.v1 import retriever_pb2 as pb
from retriever_support import DIM, record, retriever, unit, upsert

pytest.importorskip("milvus", reason="needs the Milvus server package: pip install milvus==2.3.5")


def test_upsert_search_and_restart_on_a_milvus_server(milvus_server_uri, tmp_path):
    rng = np.random.default_rng(11)
    vectors = unit(rng.normal(size=(80, DIM)))
    ids = [f"s{i:02d}" for i in range(80)]
    settings = {"milvus_uri": milvus_server_uri, "collection": "server_papers"}
    with retriever(tmp_path / "unused.db", **settings) as first:
        stub = first.stub
        upsert(stub, [record(i, v, title=f"t {i}", categories=["cs.CL"], date="2024-01-01")
                      for i, v in zip(ids, vectors)])
        stats = stub.Stats(pb.StatsRequest())
        assert (stats.paper_count, stats.store_kind, stats.dimension) == (80, "milvus-server", DIM)
        # Replace one paper: same count, new vector found first.
        upsert(stub, [record("s00", vectors[5] + vectors[6], title="replaced")])
        assert stub.Stats(pb.StatsRequest()).paper_count == 80
        reply = stub.Search(pb.SearchRequest(query_vector=vectors[1].tolist(), breadth=5))
        assert reply.papers[0].paper.id == "s01"
        expected = [ids[i] for i in np.argsort(-(vectors @ vectors[1]))[:15] if ids[i] != "s00"]
        assert [p.paper.id for p in reply.papers][:10] == expected[:10]
        filtered = stub.Search(pb.SearchRequest(
            query_vector=vectors[1].tolist(), filter=pb.SearchFilter(date_from="2024-01-02")))
        assert list(filtered.papers) == []
        assert stub.Delete(pb.DeleteRequest(ids=["s79", "none"])).deleted_count == 1
        hashes = sum(len(p.entries) for p in stub.ListHashes(pb.ListHashesRequest(page_size=30)))
        assert hashes == 79
        before = stub.Get(pb.GetRequest(ids=ids, include_vectors=True))
    with retriever(tmp_path / "unused.db", **settings) as second:
        assert second.stub.Stats(pb.StatsRequest()).paper_count == 79
        after = second.stub.Get(pb.GetRequest(ids=ids, include_vectors=True))
        assert after == before
        assert after.records[0].paper.title == "replaced"
