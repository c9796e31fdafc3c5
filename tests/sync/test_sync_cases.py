"""The three cases of a sync against real services: new, changed, unchanged; missing ids; formats.

Slices of the real arXiv snapshots: A (up to 2025-12-31) and the full file B, between which 14
ids changed (changed-ids-A-to-B.txt) and many are new.
"""

from __future__ import annotations

import gzip

import numpy as np
import orjson

from citeweave.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from citeweave.retriever.v1 import retriever_pb2
from citeweave.sync.v1 import sync_pb2
from services.common.clients import sync_channel
from services.common.corpus import embedding_text, row_from_arxiv, row_sha256
from tests.conftest import running_service
from sync_support import CHANGED_IDS, TEXT_CHANGED_IDS, only, run_sync, sync_stack


def _embed(addr: str, texts: list[str]) -> np.ndarray:
    with sync_channel(addr) as channel:
        reply = embedder_pb2_grpc.EmbedderServiceStub(channel).Embed(
            embedder_pb2.EmbedRequest(texts=texts), timeout=120
        )
    return np.asarray([v.values for v in reply.vectors], dtype=np.float32)


def test_new_changed_unchanged_and_missing_with_exact_counts(slices, minilm_embedder, tmp_path):
    with sync_stack(tmp_path, minilm_embedder.addr) as stack:
        sync = stack.sync_stub

        first = run_sync(sync, slices.a, batch_size=16)
        assert only(first.counts, read=60, new=60, embedded=60, upserted=60) == {
            "read": 60, "new": 60, "embedded": 60, "upserted": 60,
        }
        assert first.summary.format == sync_pb2.SOURCE_FORMAT_ARXIV_KAGGLE
        size = slices.a.stat().st_size
        assert {p.bytes_total for p in first.progress} == {size}
        assert first.progress[-1].bytes_read == size
        assert first.progress[-1].counts == first.summary.counts
        assert stack.count() == 60
        assert (stack.tmp / "sync-state" / "line-cache-arxiv-kaggle-v1.npz").exists()

        # The line cache only says what a line gave last time; the store decides. A row deleted
        # and a row rewritten behind sync's back are both found on the next run.
        gone, rewritten = slices.unchanged_ids[0], slices.unchanged_ids[1]
        retriever = stack.retriever_stub
        retriever.Delete(retriever_pb2.DeleteRequest(ids=[gone]))
        tampered = stack.rows([rewritten])[rewritten]
        tampered.paper.sha256 = "0" * 64
        retriever.Upsert(retriever_pb2.UpsertRequest(records=[tampered]))
        repaired = run_sync(sync, slices.a)
        assert only(repaired.counts) == {
            "read": 60, "unchanged": 58, "new": 1, "changed": 1, "embedded": 1,
            "vector_reused": 1, "upserted": 2}
        before = stack.rows(CHANGED_IDS)

        second = run_sync(sync, slices.b, batch_size=16)
        assert only(second.counts) == {
            "read": 90, "unchanged": 46, "changed": 14, "new": 30,
            # 9 of the 14 keep their embedded text (categories, authors or line wrapping changed):
            # their stored vector is kept; 5 changed texts and 30 new ones are embedded.
            "vector_reused": 9, "embedded": 5 + 30, "upserted": 44,
        }
        assert stack.count() == 90, "a changed record replaces its row, never adds one"
        after = stack.rows(CHANGED_IDS + slices.new_ids)
        for paper_id in CHANGED_IDS + slices.new_ids:
            expected = row_from_arxiv(slices.b_records[paper_id])
            paper = after[paper_id].paper
            assert (paper.title, paper.abstract, list(paper.categories)) == (
                expected.title, expected.abstract, expected.categories)
            assert paper.sha256 == row_sha256(expected)
        # No stale embedding: a changed abstract got the embedding of its new text.
        text_changed = TEXT_CHANGED_IDS
        assert all(
            embedding_text(before[i].paper.title, before[i].paper.abstract)
            != embedding_text(after[i].paper.title, after[i].paper.abstract) for i in text_changed)
        fresh = _embed(minilm_embedder.addr, [
            embedding_text(after[i].paper.title, after[i].paper.abstract) for i in text_changed])
        stored = np.asarray([after[i].vector for i in text_changed])
        old = np.asarray([before[i].vector for i in text_changed])
        assert np.min(np.sum(fresh * stored, axis=1)) > 0.999
        assert np.max(np.sum(old * stored, axis=1)) < 0.99999, "old vectors must be replaced"
        for paper_id in set(CHANGED_IDS) - set(TEXT_CHANGED_IDS):
            # Kept, not re-embedded (the store re-normalizes it, hence the last-bit tolerance).
            assert np.allclose(after[paper_id].vector, before[paper_id].vector, atol=1e-6)
            assert after[paper_id].paper.sha256 != before[paper_id].paper.sha256

        noop = run_sync(sync, slices.b, batch_size=16)
        assert only(noop.counts, unchanged=90) == {"read": 90, "unchanged": 90}
        assert noop.embed_calls == 0

        dry = run_sync(sync, slices.a, delete_missing=True, dry_run=True)
        assert only(dry.counts) == {"read": 60, "unchanged": 46, "changed": 14, "missing": 30}
        assert stack.count() == 90
        assert stack.rows(CHANGED_IDS) == {i: after[i] for i in CHANGED_IDS}, "dry run wrote"

        kept = run_sync(sync, slices.a)
        assert kept.counts["missing"] == 30 and kept.counts["deleted"] == 0
        assert kept.counts["changed"] == 14
        assert any("30 stored papers are not in this source" in w for w in kept.summary.warnings)
        assert list(kept.summary.missing_ids_sample) == sorted(slices.new_ids)
        assert stack.count() == 90

        deleted = run_sync(sync, slices.a, delete_missing=True)
        assert only(deleted.counts) == {"read": 60, "unchanged": 60, "missing": 30, "deleted": 30}
        assert stack.count() == 60
        assert set(stack.rows(slices.new_ids)) == set()


def test_bring_your_own_corpus_with_dois(minilm_embedder, tmp_path):
    records = [
        {"id": "10.1145/3397271.3401075", "title": "ColBERT: Efficient Passage Search",
         "abstract": "Late interaction over BERT for efficient and effective passage search.",
         "authors": ["Omar Khattab", "Matei Zaharia"], "year": 2020,
         "url": "https://doi.org/10.1145/3397271.3401075"},
        {"id": "doc-2", "title": "Dense Passage Retrieval",
         "abstract": "Dense representations for open-domain question answering.",
         "authors": "Vladimir Karpukhin and Barlas Oguz", "year": "2020"},
        {"id": 42, "title": "Numeric ids are read as text",
         "abstract": "A corpus whose ids are integers.", "date": "2021-03-04",
         "categories": ["ir", "nlp"]},
    ]
    source = tmp_path / "corpus.jsonl.gz"
    with gzip.open(source, "wb") as out:
        out.writelines(orjson.dumps(r) + b"\n" for r in records)
    with sync_stack(tmp_path, minilm_embedder.addr) as stack:
        result = run_sync(stack.sync_stub, source)
        assert result.summary.format == sync_pb2.SOURCE_FORMAT_JSONL
        assert only(result.counts) == {"read": 3, "new": 3, "embedded": 3, "upserted": 3}
        rows = stack.rows(["10.1145/3397271.3401075", "doc-2", "42"])
        colbert = rows["10.1145/3397271.3401075"].paper
        assert colbert.url == "https://doi.org/10.1145/3397271.3401075"
        assert list(colbert.authors) == ["Omar Khattab", "Matei Zaharia"] and colbert.year == 2020
        assert list(rows["doc-2"].paper.authors) == ["Vladimir Karpukhin", "Barlas Oguz"]
        assert (rows["42"].paper.year, rows["42"].paper.date) == (2021, "2021-03-04")
        assert only(run_sync(stack.sync_stub, source).counts) == {"read": 3, "unchanged": 3}


def test_batches_go_round_robin_to_every_embedder(slices, minilm_embedder, tmp_path):
    with running_service("embedder", tmp_path, {"model": "all-MiniLM-L6-v2"}) as second:
        addrs = f"{minilm_embedder.addr},{second.addr}"
        with sync_stack(tmp_path, addrs) as stack:
            result = run_sync(stack.sync_stub, slices.a, batch_size=6)
    used = {e.addr: (e.calls, e.texts) for e in result.summary.embedders}
    assert set(used) == {minilm_embedder.addr, second.addr}
    assert all(calls >= 4 for calls, _ in used.values()), used
    assert sum(texts for _, texts in used.values()) == 60


def test_snapshot_vectors_are_used_only_for_identical_records(slices, minilm_embedder, tmp_path):
    ids = slices.unchanged_ids[:10]
    rows = [row_from_arxiv(slices.a_records[i]) for i in ids]
    vectors = _embed(minilm_embedder.addr, [embedding_text(r.title, r.abstract) for r in rows])
    snapshot = tmp_path / "snapshot.npz"
    np.savez(snapshot, ids=np.array(ids), sha256=np.array([row_sha256(r) for r in rows]),
             vectors=vectors.astype(np.float16), model=np.array("all-MiniLM-L6-v2"))
    # The source has the 10 records plus 2 more; one of the 10 differs from its snapshot entry.
    edited = dict(slices.a_records[ids[0]], abstract="A rewritten abstract about graph learning.")
    lines = [orjson.dumps(edited)] + [orjson.dumps(slices.a_records[i]) for i in ids[1:]]
    lines += [orjson.dumps(slices.a_records[i]) for i in slices.unchanged_ids[10:12]]
    source = tmp_path / "source.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    with sync_stack(tmp_path, minilm_embedder.addr) as stack:
        result = run_sync(stack.sync_stub, source, snapshot_path=snapshot)
        assert only(result.counts) == {
            "read": 12, "new": 12, "from_snapshot": 9, "embedded": 3, "upserted": 12}
        stored = stack.rows(ids[1:])
        got = np.asarray([stored[i].vector for i in ids[1:]])
        assert np.min(np.sum(got * vectors[1:], axis=1)) > 0.999

    other = tmp_path / "other-model.npz"
    np.savez(other, ids=np.array(ids), sha256=np.array([row_sha256(r) for r in rows]),
             vectors=np.ones((10, 768), np.float16), model=np.array("all-mpnet-base-v2"))
    with sync_stack(tmp_path / "second", minilm_embedder.addr) as stack:
        result = run_sync(stack.sync_stub, source, snapshot_path=other)
        assert result.counts["from_snapshot"] == 0 and result.counts["embedded"] == 12
        assert any("embedded for real" in w for w in result.summary.warnings)
