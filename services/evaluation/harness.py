"""What every `citeweave eval` command shares: its own services on free ports over a temporary
Milvus Lite store, the embedder's SQLite cache and counters, batched embedding over gRPC."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from citeweave.embedder.v1 import embedder_pb2
from citeweave.retriever.v1 import retriever_pb2 as rpb
from services.cli.stack import SERVICE_ORDER, LocalStack
from services.common.launcher import free_port
from services.embedder.models import cache_dir

EMBED_BATCH = 64


def default_embedding_cache() -> Path:
    return cache_dir() / "embeddings.sqlite3"


def eval_stack(
    tmp: Path,
    *,
    model: str | None = None,
    embedding_cache: Path | None = None,
    log_dir: Path | None = None,
    settings: dict[str, dict[str, str]] | None = None,
) -> tuple[LocalStack, int]:
    """(stack, the embedder's metrics port): every service on a free port, the store and the sync
    state under `tmp`; `settings` adds to (or overrides) each service's settings."""
    metrics_port = free_port()
    embedder = {"metrics_port": str(metrics_port)}
    if model:
        embedder["model"] = model
    if embedding_cache:
        embedding_cache.parent.mkdir(parents=True, exist_ok=True)
        embedder["disk_cache"] = str(embedding_cache)
    wired: dict[str, dict[str, str]] = {
        "embedder": embedder,
        "retriever": {"milvus_uri": str(tmp / "store" / "eval.db"), "write_settle_delay_s": "0.2"},
        "sync": {"state_dir": str(tmp / "sync-state")},
    }
    for name, extra in (settings or {}).items():
        wired.setdefault(name, {}).update(extra)
    stack = LocalStack(
        log_dir=log_dir or tmp / "logs",
        ports={name: free_port() for name in SERVICE_ORDER},
        settings=wired,
    )
    return stack, metrics_port


def embedder_counters(metrics_port: int) -> tuple[int, int]:
    """(texts received, texts served from cache) from the embedder's Prometheus endpoint."""
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[sample.name] = sample.value
    return (int(values.get("citeweave_embedder_texts_total", 0)),
            int(values.get("citeweave_embedder_cache_hits_total", 0)))


def wait_lexical_index(stub, timeout_s: float = 600) -> None:
    """Until the retriever has flushed the synced papers and indexed them for BM25."""
    deadline = time.monotonic() + timeout_s
    while True:
        stats = stub.Stats(rpb.StatsRequest(), timeout=30)
        if not stats.lexical_enabled:
            return
        if not stats.lexical_stale and stats.lexical_documents == stats.paper_count:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"the retriever's lexical index has {stats.lexical_documents} of "
                f"{stats.paper_count} papers after {timeout_s:.0f} s"
            )
        time.sleep(0.2)


def embed_texts(stub, texts: list[str]) -> list[list[float]]:
    """Unit vectors from the embedder (a sync stub), in order, in requests of EMBED_BATCH."""
    vectors: list[list[float]] = []
    for start in range(0, len(texts), EMBED_BATCH):
        reply = stub.Embed(embedder_pb2.EmbedRequest(texts=texts[start:start + EMBED_BATCH]),
                           timeout=600)
        vectors.extend(list(v.values) for v in reply.vectors)
    return vectors
