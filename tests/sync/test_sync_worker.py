"""`python -m services.sync.worker` as a real subprocess against a real embedder (MiniLM) and a
real retriever (Milvus Lite): two shard workers at once store every record exactly once and use
the saved topic model; SIGTERM stops a worker at the next batch and its shard resumes; bad
arguments exit 2 and a dead peer exits 1, each with one line that says what to fix."""

from __future__ import annotations

import hashlib
import json
import signal
import time

import numpy as np
import pytest
from safetensors.numpy import save as save_tensors

from citeweave.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from services.common.clients import sync_channel
from services.common.corpus import embedding_text, row_from_arxiv, row_sha256
from services.common.launcher import free_port
from services.sync.topics import FORMAT_VERSION, TopicModel
from sync_support import Stack, big_source, running_retriever, start_worker


@pytest.fixture
def store(minilm_embedder, tmp_path):
    with running_retriever(tmp_path / "retriever", minilm_embedder.addr) as retriever:
        yield Stack(retriever=retriever, sync=None, tmp=tmp_path)  # type: ignore[arg-type]


def _settings(minilm_embedder, store: Stack, **more: str) -> dict[str, str]:
    return {
        "embedder_addrs": minilm_embedder.addr,
        "retriever_addr": store.retriever.addr,
        "state_dir": str(store.tmp / "state"),  # shared by the shards, as a volume could be
        "topic_model_dir": str(store.tmp / "no-topics"),
        "download_dir": str(store.tmp / "downloads"),
        "peer_wait_s": "60",
        # A progress line at least at the end, however fast the run (cached embeddings are).
        "progress_interval_s": "0.01",
        "log_interval_s": "0.01",
        **more,
    }


def _two_topic_model(embedder_addr: str, texts: list[str]) -> TopicModel:
    """A saved-format topic model whose two topics are the embeddings of two papers: enough to
    see that the worker loads it and assigns topics, without fitting BERTopic (minutes)."""
    with sync_channel(embedder_addr) as channel:
        stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        info = stub.GetModelInfo(embedder_pb2.GetModelInfoRequest(), timeout=60)
        reply = stub.Embed(embedder_pb2.EmbedRequest(texts=texts), timeout=60)
    vectors = np.asarray([v.values for v in reply.vectors], dtype=np.float32)
    files = {
        "topics.json": json.dumps({
            "_outliers": 0, "topic_sizes": {"0": 50, "1": 50},
            "topic_representations": {"0": [["first", 1.0]], "1": [["second", 1.0]]},
        }).encode(),
        "topic_embeddings.safetensors": save_tensors({"topic_embeddings": vectors}),
    }
    meta = {"format_version": FORMAT_VERSION, "embedding_model": info.model_name,
            "dimension": info.dimension, "papers": 100, "min_topic_size": 10,
            "files": {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}}
    return TopicModel(files, meta)


def test_two_shard_workers_at_once_store_every_record_exactly_once(
        minilm_embedder, store, slices, tmp_path):
    records = slices.b_records
    paper = [row_from_arxiv(records[i]) for i in ("2504.11101", slices.new_ids[0])]
    model = _two_topic_model(minilm_embedder.addr, [embedding_text(p.title, p.abstract) for p in paper])
    model.save(tmp_path / "topics")
    settings = _settings(minilm_embedder, store, topic_model_dir=str(tmp_path / "topics"))
    args = ["--source", str(slices.b), "--shard-count", "2", "--batch-size", "8"]
    workers = [
        start_worker([*args, "--shard-index", "0"], tmp_path / "w0.log", settings),
        # The index from the environment, as an Indexed Job gives it.
        start_worker(args, tmp_path / "w1.log", settings, env={"JOB_COMPLETION_INDEX": "1"}),
    ]
    for worker in workers:
        assert worker.wait() == 0, worker.output()

    summaries = [w.summary() for w in workers]
    assert [s["shard"] for s in summaries] == ["0/2", "1/2"]
    for key in ("read", "new", "embedded", "upserted"):
        assert sum(s["counts"][key] for s in summaries) == 90, key
    assert sum(e["texts"] for s in summaries for e in s["embedders"]) == 90
    assert all(s["counts"]["read"] > 30 for s in summaries), "both shards did their share"
    assert not any("no topic model" in w for s in summaries for w in s["warnings"])
    progress = [line for w in workers for line in w.lines() if line["message"] == "sync progress"]
    assert progress and all(line["phase"] == "reading" for line in progress)

    assert store.count() == 90, "every record exactly once"
    rows = store.rows(list(records))
    assert {i: r.paper.sha256 for i, r in rows.items()} == {
        i: row_sha256(row_from_arxiv(r)) for i, r in records.items()}
    ids = list(rows)
    vectors = np.asarray([rows[i].vector for i in ids], dtype=np.float32)
    expected = model.assign([""] * len(ids), vectors)
    assert [rows[i].paper.topic for i in ids] == expected and set(expected) == {0, 1}
    state = {p.name for p in (store.tmp / "state").iterdir()}
    assert state == {"line-cache-arxiv-kaggle-v1-shard-0-of-2.npz",
                     "line-cache-arxiv-kaggle-v1-shard-1-of-2.npz"}


def _wait_for_upserts(worker, at_least: int, timeout_s: float = 180) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert worker.process.poll() is None, worker.output()
        upserted = [line["upserted"] for line in worker.lines()
                    if line["message"] == "sync progress"]
        if upserted and upserted[-1] >= at_least:
            return upserted[-1]
        time.sleep(0.1)
    raise AssertionError(f"no progress within {timeout_s} s:\n{worker.output()}")


def test_sigterm_stops_at_the_next_batch_and_the_shard_resumes(minilm_embedder, store, tmp_path):
    big = big_source(tmp_path / "big.jsonl", 20_000)
    settings = _settings(minilm_embedder, store)
    args = ["--source", str(big), "--shard-count", "2", "--batch-size", "8"]
    worker = start_worker([*args, "--shard-index", "0"], tmp_path / "w0.log", settings)
    upserted = _wait_for_upserts(worker, 16)
    worker.process.send_signal(signal.SIGTERM)
    assert worker.wait(60) == 128 + signal.SIGTERM, worker.output()
    last = worker.lines()[-1]
    assert last["level"] == "WARNING" and "stopped by a signal" in last["message"]
    kept = store.count()
    assert upserted <= kept < 10_000, "the batches written stay; the run did not finish"
    state = store.tmp / "state"
    assert {p.name for p in state.glob("unfinished-sync*")} == {"unfinished-sync-shard-0-of-2.json"}

    # The interrupted shard reports that it resumes; the other shard has nothing to resume.
    resumed = start_worker([*args, "--shard-index", "0", "--limit", "20"], tmp_path / "r0.log", settings)
    other = start_worker([*args, "--shard-index", "1", "--limit", "20"], tmp_path / "r1.log", settings)
    assert resumed.wait() == 0 and other.wait() == 0, resumed.output() + other.output()
    assert resumed.summary()["resumed"] is True and other.summary()["resumed"] is False
    counts = resumed.summary()["counts"]
    # Batches run two at a time, so the first records are mostly, not all, among those kept.
    assert counts["unchanged"] > 0 and counts["unchanged"] + counts["new"] == 20
    assert any("no topic model is fitted" in w for w in resumed.summary()["warnings"])
    assert not list(state.glob("unfinished-sync*"))
    assert store.count() == kept + counts["new"] + other.summary()["counts"]["new"]


def test_bad_arguments_and_settings_exit_2_with_one_line(tmp_path):
    source = str(tmp_path / "absent.jsonl")
    # A peer that is never there: anything checked only after the wait would exit 1, not 2.
    dead = {"retriever_addr": f"127.0.0.1:{free_port()}", "peer_wait_s": "1"}
    cases = [
        ([], {}, {}, "the following arguments are required: --source"),
        (["--source", source, "--shard-count", "2", "--shard-index", "2"], {}, {},
         "shard_index 2 is out of range for shard_count 2"),
        (["--source", source, "--shard-count", "2", "--delete-missing"], {}, {},
         "delete_missing cannot be combined with shard_count > 1"),
        (["--source", source, "--format", "xml"], {}, {}, "invalid choice: 'xml'"),
        (["--source", source, "--limit", "-1"], {}, {}, "'-1' is not a whole number"),
        (["--source", source], {}, {"JOB_COMPLETION_INDEX": "one"},
         "JOB_COMPLETION_INDEX='one' is not a shard index"),
        (["--source", "ftp://127.0.0.1/arxiv.json.gz"], {}, {}, "uses ftp://"),
        (["--source", source], {}, {}, f"source {source} does not exist"),
        (["--source", source], {"batch_size": "0"}, {}, "invalid setting: CITEWEAVE_SYNC_BATCH_SIZE"),
    ]
    workers = [start_worker(args, tmp_path / f"case-{n}.log", {**dead, **settings}, env)
               for n, (args, settings, env, _) in enumerate(cases)]
    for worker, (args, _, _, words) in zip(workers, cases, strict=True):
        assert worker.wait(120) == 2, (args, worker.output())
        (line,) = worker.lines()
        assert line["level"] == "ERROR" and words in line["message"], (args, line)


def test_a_dead_retriever_exits_1_naming_it(minilm_embedder, slices, tmp_path):
    dead = f"127.0.0.1:{free_port()}"
    worker = start_worker(["--source", str(slices.b)], tmp_path / "w.log", {
        "embedder_addrs": minilm_embedder.addr, "retriever_addr": dead, "peer_wait_s": "1",
        "state_dir": str(tmp_path / "state"), "topic_model_dir": str(tmp_path / "topics")})
    assert worker.wait(120) == 1, worker.output()
    error = worker.lines()[-1]
    assert error["level"] == "ERROR" and error["code"] == "UNAVAILABLE"
    assert f"retriever {dead} did not report SERVING within 1 s" in error["message"]
    assert "CITEWEAVE_SYNC_RETRIEVER_ADDR" in error["message"]
