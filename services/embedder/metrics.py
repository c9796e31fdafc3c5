"""Prometheus metrics of the embedder, served on `metrics_port` by the common bootstrap."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)

QUEUED_TEXTS = Gauge(
    "citeweave_embedder_queued_texts", "Texts admitted and not yet embedded (waiting or running)."
)
BATCH_TEXTS = Histogram(
    "citeweave_embedder_batch_texts", "Texts per inference batch.", buckets=_SIZES
)
BATCH_TOKENS = Histogram(
    "citeweave_embedder_batch_tokens",
    "Padded tokens (width x texts) per inference batch.",
    buckets=tuple(256 * 2**i for i in range(10)),
)
BATCH_SECONDS = Histogram("citeweave_embedder_batch_seconds", "Inference time per batch.")
REQUEST_SECONDS = Histogram(
    "citeweave_embedder_request_seconds", "Embed call duration, validation to response."
)
TEXTS = Counter("citeweave_embedder_texts", "Texts received by Embed.")
CACHE_HITS = Counter("citeweave_embedder_cache_hits", "Texts served from the embedding cache.")
REJECTED = Counter("citeweave_embedder_rejected", "Embed calls refused because the queue was full.")
