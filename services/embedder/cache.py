"""In-memory LRU cache of embeddings keyed by (model, sha256 of the text).

Evaluation and incremental sync re-embed the same abstracts many times; a hit skips inference.
Keys are digests so the cache does not hold the (possibly long) texts themselves.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import numpy as np

Key = tuple[str, bytes]


def cache_key(model: str, text: str) -> Key:
    return model, hashlib.sha256(text.encode("utf-8")).digest()


class EmbeddingCache:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self._entries: OrderedDict[Key, np.ndarray] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Key) -> np.ndarray | None:
        vector = self._entries.get(key)
        if vector is not None:
            self._entries.move_to_end(key)
        return vector

    def put(self, key: Key, vector: np.ndarray) -> None:
        if self.capacity == 0:
            return
        # A copy: the caller's array is a row of a batch result we must not keep alive whole.
        self._entries[key] = np.array(vector, dtype=np.float32)
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
