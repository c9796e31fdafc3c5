"""Fixtures for the retriever tests. One shared, pre-loaded retriever serves every read-only test."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from retriever_support import DIM, Retriever, record, retriever, unit, upsert

RANDOM_N = 500
CLUSTER_SIZE = 5


@dataclass
class Corpus:
    """Everything the shared retriever stores, so tests can compute the truth with numpy."""

    ids: list[str]
    vectors: np.ndarray  # unit rows, in the order of ids
    cluster_query: np.ndarray
    cluster_ids: list[str]
    cluster_of: dict[str, int]
    filter_rows: list[dict]


def _clusters(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Six tight clusters of near-duplicates at falling similarity to the query."""
    basis, _ = np.linalg.qr(rng.normal(size=(DIM, DIM)))
    query = basis[:, 0]
    centers = [
        unit(query * cos + basis[:, 1 + c] * np.sqrt(1 - cos**2))
        for c, cos in enumerate((0.9, 0.85, 0.8, 0.75, 0.7, 0.65))
    ]
    vectors, labels = [], []
    for c, center in enumerate(centers):
        for _ in range(CLUSTER_SIZE):
            vectors.append(unit(center + rng.normal(scale=0.02, size=DIM)))
            labels.append(c)
    return unit(query), np.asarray(vectors), labels


FILTER_ROWS = [
    # id, categories, topic, date
    {"id": "f-a", "categories": ["filt.CL"], "topic": 1, "date": "2019-12-31"},
    {"id": "f-b", "categories": ["filt.CL", "filt.LG"], "topic": 2, "date": "2020-01-01"},
    {"id": "f-c", "categories": ["filt.LG"], "topic": 2, "date": "2020-06-15"},
    {"id": "f-d", "categories": ["filt.IR"], "topic": 3, "date": "2020-12-31"},
    {"id": "f-e", "categories": ["filt.IR", "filt.CL"], "topic": 1, "date": "2021-01-01"},
    {"id": "f-f", "categories": ["filt.XX"], "topic": 3, "date": ""},
]


@pytest.fixture(scope="session")
def corpus() -> Corpus:
    rng = np.random.default_rng(20240101)
    random_vectors = unit(rng.normal(size=(RANDOM_N, DIM)))
    query, cluster_vectors, labels = _clusters(rng)
    filter_vectors = unit(rng.normal(size=(len(FILTER_ROWS), DIM)))
    cluster_ids = [f"c{label}-{i}" for i, label in enumerate(labels)]
    return Corpus(
        ids=[f"r{i:03d}" for i in range(RANDOM_N)] + cluster_ids + [r["id"] for r in FILTER_ROWS],
        vectors=np.concatenate([random_vectors, cluster_vectors, filter_vectors]),
        cluster_query=query,
        cluster_ids=cluster_ids,
        cluster_of=dict(zip(cluster_ids, labels)),
        filter_rows=FILTER_ROWS,
    )


@pytest.fixture(scope="session")
def shared_retriever(tmp_path_factory, corpus) -> Iterator[Retriever]:
    """Loads the corpus, then restarts so every search goes through the persisted HNSW segment
    rather than Lite's in-memory (brute-force) buffer."""
    store = Path(tmp_path_factory.mktemp("shared")) / "store.db"
    filters = {row["id"]: row for row in corpus.filter_rows}
    records = []
    for paper_id, vector in zip(corpus.ids, corpus.vectors):
        fields = dict(filters.get(paper_id, {"categories": ["rand.X"], "topic": -1, "date": ""}))
        fields.pop("id", None)
        if paper_id in corpus.cluster_of:
            fields["categories"] = ["clus.X"]
        records.append(record(paper_id, vector, title=f"title {paper_id}", year=2020, **fields))
    with retriever(store) as service:
        upsert(service.stub, records)
    with retriever(store) as service:
        yield service
