"""Embedding caches keyed by (model, sha256 of the text): an in-memory LRU, and an optional
SQLite file that survives restarts.

Evaluation and incremental sync re-embed the same abstracts many times; a hit skips inference.
Keys are digests so the cache does not hold the (possibly long) texts themselves.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections import OrderedDict
from pathlib import Path

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


class DiskEmbeddingCache:
    """Embeddings kept across restarts in one SQLite file, keyed by (model and backend, sha256
    of the text). Re-running an evaluation or rebuilding a store then embeds nothing twice.

    One connection, used only from the embedder's disk thread (see app.py). Vectors are stored
    as float32 bytes. A file that is not a SQLite database stops start-up with a clear error
    rather than being overwritten."""

    def __init__(self, path: Path, namespace: str):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.namespace = namespace
        try:
            self._db = sqlite3.connect(path, check_same_thread=False)
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS embeddings (namespace TEXT NOT NULL, key BLOB NOT NULL,"
                " vector BLOB NOT NULL, PRIMARY KEY (namespace, key)) WITHOUT ROWID"
            )
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            raise RuntimeError(
                f"embedding disk cache {path} is not usable ({exc}); move it away or point "
                "CITEWEAVE_EMBEDDER_DISK_CACHE elsewhere"
            ) from None

    def get_many(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        for start in range(0, len(keys), 500):  # SQLite's bound-parameter limit
            chunk = keys[start:start + 500]
            rows = self._db.execute(
                f"SELECT key, vector FROM embeddings WHERE namespace = ? AND key IN "
                f"({','.join('?' * len(chunk))})",
                [self.namespace, *chunk],
            )
            found.update((key, np.frombuffer(blob, dtype=np.float32)) for key, blob in rows)
        return found

    def put_many(self, items: list[tuple[bytes, np.ndarray]]) -> None:
        self._db.executemany(
            "INSERT OR REPLACE INTO embeddings (namespace, key, vector) VALUES (?, ?, ?)",
            [(self.namespace, key, np.asarray(v, dtype=np.float32).tobytes()) for key, v in items],
        )
        self._db.commit()

    def __len__(self) -> int:
        return self._db.execute(
            "SELECT COUNT(*) FROM embeddings WHERE namespace = ?", [self.namespace]
        ).fetchone()[0]

    def close(self) -> None:
        self._db.close()
