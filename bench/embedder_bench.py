"""Embedder benchmark: the service's CPU path against plain `SentenceTransformer.encode`.

`run()` starts a real `python -m services.embedder` (cache off, so every text is inferred) and
sends the first `n_texts` papers of the demo corpus (title + abstract, as sync embeds them)
over gRPC in requests of `request_size`, `concurrency` at a time, as a bulk caller would. In the
same run on the same machine the same texts are encoded by plain
`SentenceTransformer(model_path).encode(texts)` with its defaults on the CPU (the baseline).
The two take turns on `rounds` slices of the texts, so background load hits both alike. Model
loading and a warm-up call are excluded from both timings. `min_cosine` compares each service
vector with the normalized baseline vector of the same text.

The batch-size sweep (`sweep_batch_sizes`, under `batch_sweep` in the result) restarts the service
once per inference batch size (`max_batch_size`, with a token budget large enough that the size
is what binds) and embeds the same `SWEEP_TEXTS` texts, against `SentenceTransformer.encode` with
the same `batch_size`. It uses all-MiniLM-L6-v2 by default: mpnet runs ~2.5 abstracts/s here, so
seven sizes times two sides would take most of an hour; the result names the model.
`citeweave bench embedder --json` prints the dict `run()` returns as the last line of stdout.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from bench.output import emit
from citeweave.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from services.common.clients import sync_channel
from services.common.corpus import embedding_text, read_jsonl, row_from_arxiv
from services.common.launcher import REPO, ServiceProcess, free_port
from services.embedder.models import MINILM, MODEL_NAMES, MPNET, model_path
from services.embedder.settings import EmbedderSettings

DEMO_CORPUS = REPO / "data" / "demo" / "sample-10k.jsonl.gz"
WARMUP_TEXTS = 4
START_TIMEOUT_S = 1800  # the first start exports (and for int8 quantizes) mpnet
SWEEP_MODEL = MINILM
SWEEP_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
SWEEP_TEXTS = 128
# Padded tokens per text the sweep's token budget allows, above both models' max_seq_length
# (mpnet 384, MiniLM 256), so that max_batch_size alone decides the batch.
SWEEP_TOKENS_PER_TEXT = 512


def _log(message: str) -> None:
    print(f"[embedder-bench] {message}", file=sys.stderr, flush=True)


def load_texts(n: int) -> list[str]:
    records = itertools.islice(read_jsonl(DEMO_CORPUS), n)
    return [embedding_text(row.title, row.abstract) for row in map(row_from_arxiv, records)]


class _ServiceClient:
    """Sends texts to the running service in requests of request_size, concurrency at a time."""

    def __init__(self, service: ServiceProcess, request_size: int, concurrency: int):
        self._channel = sync_channel(service.addr)
        self._stub = embedder_pb2_grpc.EmbedderServiceStub(self._channel)
        self._request_size = request_size
        self._pool = ThreadPoolExecutor(concurrency)
        self.backend = self._stub.GetModelInfo(embedder_pb2.GetModelInfoRequest()).backend

    def _request(self, chunk: list[str]) -> np.ndarray:
        reply = self._stub.Embed(embedder_pb2.EmbedRequest(texts=chunk), timeout=3600)
        return np.array([v.values for v in reply.vectors], dtype=np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        size = self._request_size
        chunks = [texts[i : i + size] for i in range(0, len(texts), size)]
        return np.concatenate(list(self._pool.map(self._request, chunks)))

    def close(self) -> None:
        self._pool.shutdown()
        self._channel.close()


@contextmanager
def _serving(model: str, backend: str, settings: dict[str, str], request_size: int,
             concurrency: int) -> Iterator[_ServiceClient]:
    """A real embedder process (cache off, so every text is inferred) and a client to it."""
    with tempfile.TemporaryDirectory(prefix="embedder-bench-") as tmp:
        service = ServiceProcess(
            "embedder",
            free_port(),
            {"model": model, "backend": backend, "cache_entries": "0", **settings},
            log_path=Path(tmp) / "embedder.log",
        )
        service.start()
        client = None
        try:
            service.wait_serving(START_TIMEOUT_S)
            client = _ServiceClient(service, request_size, concurrency)
            yield client
        except Exception:
            _log(f"embedder log tail:\n{service.log_tail(30)}")
            raise
        finally:
            if client is not None:
                client.close()
            service.stop()


def _timed(function, texts: list[str]) -> tuple[np.ndarray, float]:
    started = time.perf_counter()
    vectors = np.asarray(function(texts), dtype=np.float32)
    return vectors, time.perf_counter() - started


def run(
    n_texts: int = 200,
    model: str = MPNET,
    backend: str = "onnx",
    request_size: int = 32,
    concurrency: int = 4,
    rounds: int = 2,
    batch_sizes: Sequence[int] = SWEEP_BATCH_SIZES,
    sweep_model: str = SWEEP_MODEL,
    sweep_texts: int = SWEEP_TEXTS,
) -> dict:
    """The service against SentenceTransformer.encode on `model`, then (unless batch_sizes is
    empty) the batch-size sweep on `sweep_model`."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    texts = load_texts(n_texts)
    # Other work on the machine skews the timings; the load average makes that visible.
    load_before = os.getloadavg()[0]
    baseline = SentenceTransformer(str(model_path(model)), device="cpu")
    served, reference = [], []
    service_s = baseline_s = 0.0
    _log(f"starting the embedder ({model}, {backend})")
    with _serving(model, backend, {}, request_size, concurrency) as client:
        # Warm-up on texts outside the measured set (first-call allocations on both sides).
        warm_up = load_texts(n_texts + WARMUP_TEXTS)[-WARMUP_TEXTS:]
        client.embed(warm_up)
        baseline.encode(warm_up)
        # The two sides take turns on slices of the texts, so load from other processes
        # that comes and goes during the run hits both alike. The idle side uses no CPU.
        for part in np.array_split(np.arange(len(texts)), rounds):
            chunk = [texts[i] for i in part]
            _log(f"{len(chunk)} texts: service, then SentenceTransformer.encode")
            vectors, seconds = _timed(client.embed, chunk)
            served.append(vectors)
            service_s += seconds
            vectors, seconds = _timed(baseline.encode, chunk)
            reference.append(vectors)
            baseline_s += seconds
    served_all, reference_all = np.concatenate(served), np.concatenate(reference)
    reference_all /= np.linalg.norm(reference_all, axis=1, keepdims=True)
    cosines = (served_all * reference_all).sum(axis=1)
    texts_per_s = len(texts) / service_s
    baseline_per_s = len(texts) / baseline_s
    result = {
        "model": model,
        "backend": client.backend,
        "n_texts": len(texts),
        "mean_chars": round(float(np.mean([len(t) for t in texts])), 1),
        "request_size": request_size,
        "concurrency": concurrency,
        "rounds": rounds,
        "texts_per_s": round(texts_per_s, 3),
        "baseline_texts_per_s": round(baseline_per_s, 3),
        "speedup": round(texts_per_s / baseline_per_s, 3),
        "min_cosine": round(float(cosines.min()), 6),
        "mean_cosine": round(float(cosines.mean()), 6),
        "service_s": round(service_s, 2),
        "baseline_s": round(baseline_s, 2),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_avg_1m_before": round(load_before, 2),
        "load_avg_1m_after": round(os.getloadavg()[0], 2),
    }
    if batch_sizes:
        result["batch_sweep"] = sweep_batch_sizes(
            sweep_model, batch_sizes, sweep_texts, backend, request_size, concurrency
        )
    return result


def sweep_batch_sizes(
    model: str = SWEEP_MODEL,
    batch_sizes: Sequence[int] = SWEEP_BATCH_SIZES,
    n_texts: int = SWEEP_TEXTS,
    backend: str = "onnx",
    request_size: int = 32,
    concurrency: int = 4,
) -> dict:
    """Throughput (texts/s) per inference batch size, the service against
    SentenceTransformer.encode(batch_size=same), on the same texts."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    texts = load_texts(n_texts)
    warm_up = load_texts(n_texts + WARMUP_TEXTS)[-WARMUP_TEXTS:]
    baseline = SentenceTransformer(str(model_path(model)), device="cpu")
    points, backend_name = [], backend
    for size in batch_sizes:
        if size < 1:
            raise ValueError(f"batch size {size} must be at least 1")
        settings = {
            "max_batch_size": str(size),
            "max_batch_tokens": str(size * SWEEP_TOKENS_PER_TEXT),
        }
        load_before = os.getloadavg()[0]
        with _serving(model, backend, settings, request_size, concurrency) as client:
            backend_name = client.backend
            client.embed(warm_up)
            _, service_s = _timed(client.embed, texts)
        baseline.encode(warm_up, batch_size=size)
        _, baseline_s = _timed(lambda chunk: baseline.encode(chunk, batch_size=size), texts)
        point = {
            "batch_size": size,
            "texts_per_s": round(len(texts) / service_s, 3),
            "baseline_texts_per_s": round(len(texts) / baseline_s, 3),
            "speedup": round(baseline_s / service_s, 3),
            "load_avg_1m_before": round(load_before, 2),
            "load_avg_1m_after": round(os.getloadavg()[0], 2),
        }
        _log(f"batch size {size}: service {point['texts_per_s']} texts/s, "
             f"SentenceTransformer.encode {point['baseline_texts_per_s']} texts/s")
        points.append(point)
    return {
        "model": model,
        "backend": backend_name,
        "baseline": "SentenceTransformer.encode, torch CPU",
        "n_texts": len(texts),
        "mean_chars": round(float(np.mean([len(t) for t in texts])), 1),
        "request_size": request_size,
        "concurrency": concurrency,
        "service_default_batch_size": EmbedderSettings.model_fields["max_batch_size"].default,
        "points": points,
    }


def parse_batch_sizes(text: str) -> list[int]:
    """'1,4,16' -> [1, 4, 16]; '' or 'none' -> [] (no sweep)."""
    if text.strip().lower() in ("", "none"):
        return []
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"batch sizes {text!r}: give whole numbers like 1,4,16")
    if any(size < 1 for size in sizes):
        raise ValueError(f"batch sizes {text!r}: each must be at least 1")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-texts", type=int, default=200)
    parser.add_argument("--model", default=MPNET, choices=MODEL_NAMES)
    parser.add_argument("--backend", default="onnx", choices=["onnx", "onnx-int8", "torch"])
    parser.add_argument("--request-size", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch-sizes", default=",".join(map(str, SWEEP_BATCH_SIZES)),
                        help="inference batch sizes of the sweep; 'none' skips it")
    parser.add_argument("--sweep-model", default=SWEEP_MODEL, choices=MODEL_NAMES)
    parser.add_argument("--sweep-texts", type=int, default=SWEEP_TEXTS)
    args = parser.parse_args(argv)
    emit(run(
        args.n_texts, args.model, args.backend, args.request_size, args.concurrency, args.rounds,
        parse_batch_sizes(args.batch_sizes), args.sweep_model, args.sweep_texts,
    ))
    return 0


if __name__ == "__main__":
    sys.exit(main())
