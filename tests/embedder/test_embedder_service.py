"""The embedder as a real process over real gRPC (MiniLM, so the suite stays fast on 2 cores)."""

from __future__ import annotations

import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from citeweave.embedder.v1 import embedder_pb2
from services.common.clients import sync_channel
from services.common.launcher import ServiceProcess, free_port
from services.embedder.models import MINILM
from tests.conftest import running_service

from embedder_helpers import row_cosines, vectors_of


def test_dimension_and_model_info(minilm_embedder, embed, stub_for):
    vectors, response = embed(minilm_embedder, ["retrieval augmented generation"])
    assert vectors.shape == (1, 384)
    assert (response.model_name, response.dimension) == (MINILM, 384)
    info = stub_for(minilm_embedder).GetModelInfo(embedder_pb2.GetModelInfoRequest())
    assert (info.model_name, info.dimension, info.backend) == (MINILM, 384, "onnx-cpu")
    assert (info.max_inputs_per_request, info.max_chars_per_text, info.max_seq_length) == (
        256, 20000, 256
    )


def test_vectors_are_normalized_and_in_input_order(minilm_embedder, embed, mixed_texts):
    vectors, _ = embed(minilm_embedder, mixed_texts)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    reversed_vectors, _ = embed(minilm_embedder, mixed_texts[::-1])
    assert row_cosines(vectors, reversed_vectors[::-1]).min() > 0.99999
    # Different texts give clearly different vectors (not one vector repeated).
    assert (vectors @ vectors.T)[np.triu_indices(len(vectors), 1)].max() < 0.95


def test_agrees_with_sentence_transformers(minilm_embedder, embed, mixed_texts, reference):
    vectors, _ = embed(minilm_embedder, mixed_texts)
    assert row_cosines(vectors, reference(MINILM, mixed_texts)).min() >= 0.999


def test_cache_hit_is_reported_and_returns_the_same_vector(minilm_embedder, embed):
    a, b, c = (f"cache probe {uuid.uuid4()} {word}" for word in ("alpha", "beta", "gamma"))
    first, response = embed(minilm_embedder, [a, b])
    assert response.cached_count == 0
    second, response = embed(minilm_embedder, [b, c])
    assert response.cached_count == 1
    np.testing.assert_array_equal(second[0], first[1])


def _start_up_failure(tmp_path, settings: dict[str, str]) -> tuple[int, str]:
    """Starts an embedder that must exit during start-up; its exit code and log."""
    service = ServiceProcess("embedder", free_port(), settings, log_path=tmp_path / "e.log").start()
    try:
        code = service.process.wait(120)
    finally:
        service.stop()
    return code, (tmp_path / "e.log").read_text()


def test_disk_cache_survives_a_restart(tmp_path, embed):
    texts = [f"disk cache probe {uuid.uuid4()} {word}" for word in ("alpha", "beta", "gamma")]
    settings = {"model": MINILM, "disk_cache": str(tmp_path / "cache" / "embeddings.sqlite3")}
    with running_service("embedder", tmp_path, settings) as first:
        before, response = embed(first, texts[:2])
        assert response.cached_count == 0
    with running_service("embedder", tmp_path, settings) as second:
        after, response = embed(second, texts)
        assert response.cached_count == 2, "the first two come from the file, not the model"
        np.testing.assert_array_equal(after[:2], before)


def test_a_disk_cache_that_is_not_sqlite_stops_start_up(tmp_path):
    bad = tmp_path / "not-a-db.sqlite3"
    bad.write_bytes(b"this is not a database" * 100)
    code, log = _start_up_failure(tmp_path, {"model": MINILM, "disk_cache": str(bad)})
    assert code == 1, log
    assert "is not usable" in log and "CITEWEAVE_EMBEDDER_DISK_CACHE" in log
    assert bad.read_bytes() == b"this is not a database" * 100, "the file must be left alone"


@pytest.mark.parametrize(
    ("texts", "fragments"),
    [
        ([], ["texts is empty", "between 1 and 256"]),
        (["fine", ""], ["texts[1]", "empty"]),
        (["  \n\t"], ["texts[0]", "whitespace"]),
        (["x"] * 257, ["too many texts", "257", "max_inputs_per_request=256"]),
        (["fine", "y" * 20001], ["texts[1]", "20001 characters", "max_chars_per_text=20000"]),
    ],
    ids=["empty-list", "empty-string", "whitespace-only", "too-many-inputs", "oversized-text"],
)
def test_bad_input_is_invalid_argument_with_an_actionable_message(
    minilm_embedder, embed, texts, fragments
):
    with pytest.raises(grpc.RpcError) as caught:
        embed(minilm_embedder, texts)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    for fragment in fragments:
        assert fragment in caught.value.details()


def test_text_at_the_character_limit_is_accepted(minilm_embedder, embed):
    vectors, _ = embed(minilm_embedder, ["word " * 4000])  # exactly 20000 characters
    assert vectors.shape == (1, 384)


def _batch_count(metrics_port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    for family in text_string_to_metric_families(text):
        if family.name == "citeweave_embedder_batch_texts":
            return next(s.value for s in family.samples if s.name.endswith("_count"))
    raise AssertionError("batch metric missing")


def test_concurrent_callers_get_the_vectors_of_one_by_one_calls(
    tmp_path, embed, stub_for, abstracts, mixed_texts
):
    texts = mixed_texts + abstracts[9:17]
    metrics_port = free_port()
    settings = {"model": MINILM, "cache_entries": "0", "max_wait_ms": "150",
                "max_batch_size": "8", "metrics_port": str(metrics_port)}
    with running_service("embedder", tmp_path, settings) as service:
        one_by_one = np.concatenate([embed(service, [text])[0] for text in texts])
        batches_before = _batch_count(metrics_port)
        # Pairs sent at once from many threads: the batcher must merge and re-split them.
        pairs = [texts[i : i + 2] for i in range(0, len(texts), 2)]
        with ThreadPoolExecutor(len(pairs)) as pool:
            results = list(pool.map(lambda pair: embed(service, pair)[0], pairs))
        concurrent = np.concatenate(results)
        batches = _batch_count(metrics_port) - batches_before
    assert row_cosines(concurrent, one_by_one).min() > 1 - 1e-5
    assert batches < len(pairs), "requests were not batched together"


def test_full_queue_is_resource_exhausted_and_recovers(tmp_path, stub_for):
    # The first request fills the queue and, being less than a batch, sits there 1.5 s.
    settings = {"model": MINILM, "cache_entries": "0", "max_queued_texts": "4",
                "max_inputs_per_request": "4", "max_batch_size": "8", "max_wait_ms": "1500"}
    with running_service("embedder", tmp_path, settings) as service:
        stub = stub_for(service)
        stub.GetModelInfo(embedder_pb2.GetModelInfoRequest())  # connect before timing matters
        first = stub.Embed.future(embedder_pb2.EmbedRequest(texts=["a", "b", "c", "d"]), timeout=60)
        time.sleep(0.3)
        with pytest.raises(grpc.RpcError) as caught:
            stub.Embed(embedder_pb2.EmbedRequest(texts=["e"]), timeout=60)
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "queue is full" in caught.value.details() and "retry" in caught.value.details()
        assert len(first.result().vectors) == 4
        assert len(stub.Embed(embedder_pb2.EmbedRequest(texts=["e"]), timeout=60).vectors) == 1


@pytest.mark.parametrize(
    ("settings", "fragments"),
    [
        ({"max_inputs_per_request": "abc"},
         ["CITEWEAVE_EMBEDDER_MAX_INPUTS_PER_REQUEST='abc'", "valid integer"]),
        ({"model": "bert-base-uncased"},
         ["CITEWEAVE_EMBEDDER_MODEL='bert-base-uncased'", "all-mpnet-base-v2", MINILM]),
        ({"backend": "tpu"}, ["CITEWEAVE_EMBEDDER_BACKEND='tpu'", "onnx-int8"]),
        ({"max_inputs_per_request": "64", "max_queued_texts": "8"},
         ["max_inputs_per_request (64) must not exceed max_queued_texts (8)"]),
    ],
    ids=["not-an-integer", "unknown-model", "unknown-backend", "request-over-queue"],
)
def test_wrong_setting_stops_start_up_with_a_message(tmp_path, settings, fragments):
    code, log = _start_up_failure(tmp_path, settings)
    assert code == 2, log
    assert "invalid setting" in log
    for fragment in fragments:
        assert fragment in log


def _health(addr: str) -> int | None:
    """The overall health status, or None while nothing listens."""
    with sync_channel(addr) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=1
            )
        except grpc.RpcError:
            return None
    return reply.status


def _eventually(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_export_warm_up_health_and_sigterm_drain(tmp_path, stub_for):
    # A fresh cache dir: the first start must export, so NOT_SERVING lasts long enough to see.
    cache = tmp_path / "cache"
    settings = {"model": MINILM, "cache_dir": str(cache), "max_wait_ms": "800", "drain_s": "2"}
    service = ServiceProcess("embedder", free_port(), settings, log_path=tmp_path / "e.log").start()
    try:
        seen = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and health_pb2.HealthCheckResponse.SERVING not in seen:
            assert service.process.poll() is None, service.log_tail()
            status = _health(service.addr)
            if status is not None and (not seen or seen[-1] != status):
                seen.append(status)
                if status == health_pb2.HealthCheckResponse.NOT_SERVING:
                    with pytest.raises(grpc.RpcError) as caught:
                        stub_for(service).Embed(embedder_pb2.EmbedRequest(texts=["early"]))
                    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
                    assert "warming up" in caught.value.details()
            time.sleep(0.05)
        assert seen == [
            health_pb2.HealthCheckResponse.NOT_SERVING, health_pb2.HealthCheckResponse.SERVING
        ], service.log_tail()
        exported = next(cache.glob("onnx/all-MiniLM-L6-v2-*/model.onnx"))
        assert not list(exported.parent.glob(".*")), "temporary export file left behind"

        # A call in flight when SIGTERM arrives (it waits 0.8 s in the queue) still completes.
        in_flight = stub_for(service).Embed.future(
            embedder_pb2.EmbedRequest(texts=["drain me"]), timeout=60
        )
        time.sleep(0.2)
        service.process.terminate()
        assert _eventually(
            lambda: _health(service.addr) == health_pb2.HealthCheckResponse.NOT_SERVING, 1.5
        ), "health did not turn NOT_SERVING while draining"
        assert vectors_of(in_flight.result()).shape == (1, 384)
        assert service.process.wait(30) == 0
    finally:
        service.stop()

    # A second start reuses the export instead of writing it again.
    mtime = exported.stat().st_mtime_ns
    with running_service("embedder", tmp_path, settings) as again:
        assert len(stub_for(again).Embed(embedder_pb2.EmbedRequest(texts=["x"])).vectors) == 1
    assert exported.stat().st_mtime_ns == mtime
    assert "reusing cached onnx model" in (tmp_path / "embedder.log").read_text()
