"""Topics through the services: FitTopics on stored papers, ListTopics, topic ids written to the
rows, search filtered by topic, and sync assigning topics to new papers with the saved model.

The store is filled from the demo snapshot (real mpnet vectors of real arXiv papers), so nothing
but three new papers is embedded."""

from __future__ import annotations

import gzip

import grpc
import numpy as np
import orjson
import pytest

from citeweave.retriever.v1 import retriever_pb2
from citeweave.sync.v1 import sync_pb2
from services.common.corpus import embedding_text
from services.sync.topics import TopicModel
from sync_support import REPO, run_sync, sync_stack
from tests.conftest import running_service

DEMO = REPO / "data" / "demo"
PAPERS = 1500


@pytest.mark.slow
def test_fit_list_filter_and_assign(tmp_path):
    snapshot = np.load(DEMO / "embeddings-all-mpnet-base-v2.npz")
    in_snapshot = set(snapshot["ids"].tolist())
    with gzip.open(DEMO / "sample-10k.jsonl.gz", "rb") as lines:
        chosen = [line for line in lines if orjson.loads(line)["id"] in in_snapshot][:PAPERS]
    source = tmp_path / "papers.jsonl"
    source.write_bytes(b"".join(chosen))

    with running_service("embedder", tmp_path) as embedder, \
            sync_stack(tmp_path, embedder.addr) as stack:
        seeded = run_sync(stack.sync_stub, source, snapshot_path=DEMO / "embeddings-all-mpnet-base-v2.npz")
        assert (seeded.counts["from_snapshot"], seeded.counts["embedded"]) == (PAPERS, 0)

        with pytest.raises(grpc.RpcError) as error:
            stack.sync_stub.ListTopics(sync_pb2.ListTopicsRequest())
        assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION

        events = list(stack.sync_stub.FitTopics(sync_pb2.FitTopicsRequest(), timeout=600))
        stages = [e.progress for e in events if e.WhichOneof("event") == "progress"]
        result = events[-1].result
        assert len(stages) >= 3 and [s.percent for s in stages] == sorted(s.percent for s in stages)
        assert result.papers_assigned == PAPERS
        topics = {t.id: t for t in result.topics}
        real = [t for t in result.topics if t.id != -1]
        assert len(real) >= 5
        assert sum(t.size for t in result.topics) == PAPERS
        listed = stack.sync_stub.ListTopics(sync_pb2.ListTopicsRequest()).topics
        assert [t.id for t in listed] == [t.id for t in result.topics]

        ids = [orjson.loads(line)["id"] for line in chosen]
        rows = stack.rows(ids)
        by_topic: dict[int, list[str]] = {}
        for paper_id, row in rows.items():
            by_topic.setdefault(row.paper.topic, []).append(paper_id)
        assert {k: len(v) for k, v in by_topic.items()} == {t.id: t.size for t in topics.values()}

        # Search restricted to one topic returns only that topic's papers.
        biggest = real[0]
        member = rows[by_topic[biggest.id][0]]
        reply = stack.retriever_stub.Search(retriever_pb2.SearchRequest(
            query_vector=member.vector, breadth=5,
            filter=retriever_pb2.SearchFilter(topics=[biggest.id])))
        assert len(reply.papers) == min(15, biggest.size)
        assert all(p.paper.topic == biggest.id for p in reply.papers)
        assert reply.papers[0].paper.id == member.paper.id

        # New papers (real demo records under new ids, so the snapshot has none) get their topic
        # from the saved model.
        new = [orjson.dumps(dict(orjson.loads(line), id=f"new-{k}"))
               for k, line in enumerate(chosen[:3])]
        extra = tmp_path / "new.jsonl"
        extra.write_bytes(b"\n".join(new) + b"\n")
        added = run_sync(stack.sync_stub, extra)
        assert (added.counts["new"], added.counts["embedded"]) == (3, 3)
        assert not any("topic" in w for w in added.summary.warnings)
        model = TopicModel.load(tmp_path / "topics")
        new_rows = stack.rows([orjson.loads(line)["id"] for line in new])
        for row in new_rows.values():
            expected = model.assign([embedding_text(row.paper.title, row.paper.abstract)],
                                    np.asarray([row.vector], dtype=np.float32))
            assert row.paper.topic == expected[0]

        # A restarted sync service loads the saved model.
        stack.sync.stop()
        stack.start_sync(embedder.addr)
        assert [t.id for t in stack.sync_stub.ListTopics(sync_pb2.ListTopicsRequest()).topics] == \
            [t.id for t in result.topics]
