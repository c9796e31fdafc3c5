"""Embedder test fixtures: real texts, a gRPC client, the sentence-transformers reference."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from citeweave.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from services.common.clients import sync_channel
from services.common.corpus import embedding_text, read_jsonl, row_from_arxiv
from services.common.launcher import ServiceProcess

from embedder_helpers import vectors_of

DEMO_CORPUS = Path(__file__).resolve().parents[2] / "data" / "demo" / "sample-10k.jsonl.gz"

Embed = Callable[..., tuple[np.ndarray, embedder_pb2.EmbedResponse]]


@pytest.fixture(scope="session")
def abstracts() -> list[str]:
    """Real paper texts (title + abstract), as the sync service embeds them."""
    records = itertools.islice(read_jsonl(DEMO_CORPUS), 24)
    return [embedding_text(row.title, row.abstract) for row in map(row_from_arxiv, records)]


@pytest.fixture(scope="session")
def mixed_texts(abstracts) -> list[str]:
    """Lengths from one token to past max_seq_length, so batches need padding and truncation."""
    return [
        "graph",
        "Attention is all you need.",
        "A survey of retrieval-augmented generation for scientific question answering.",
        *abstracts[:5],
        " ".join(abstracts[5:9]),  # longer than both models' max_seq_length
    ]


@pytest.fixture(scope="session")
def stub_for() -> Iterator[Callable[[ServiceProcess], embedder_pb2_grpc.EmbedderServiceStub]]:
    channels = {}

    def stub(service: ServiceProcess) -> embedder_pb2_grpc.EmbedderServiceStub:
        if service.addr not in channels:
            channels[service.addr] = sync_channel(service.addr)
        return embedder_pb2_grpc.EmbedderServiceStub(channels[service.addr])

    yield stub
    for channel in channels.values():
        channel.close()


@pytest.fixture(scope="session")
def embed(stub_for) -> Embed:
    def call(service: ServiceProcess, texts: list[str], timeout: float = 120):
        response = stub_for(service).Embed(embedder_pb2.EmbedRequest(texts=texts), timeout=timeout)
        return vectors_of(response), response

    return call


@pytest.fixture(scope="session")
def reference() -> Callable[[str, list[str]], np.ndarray]:
    """`SentenceTransformer.encode(normalize_embeddings=True)` in the test process, per model."""
    models = {}

    def encode(model: str, texts: list[str]) -> np.ndarray:
        from sentence_transformers import SentenceTransformer

        from services.embedder.models import model_path

        if model not in models:
            models[model] = SentenceTransformer(str(model_path(model)), device="cpu")
        return models[model].encode(texts, normalize_embeddings=True, convert_to_numpy=True)

    return encode

