"""Plain helpers of the embedder tests (pytest's prepend mode puts this dir on sys.path)."""

from __future__ import annotations

import numpy as np

from citeweave.embedder.v1 import embedder_pb2


def vectors_of(response: embedder_pb2.EmbedResponse) -> np.ndarray:
    return np.array([v.values for v in response.vectors], dtype=np.float32)


def row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of each row of a with the same row of b (normalizes, so it checks direction only)."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)
