"""On-disk cache of downloaded PDFs and arXiv records, safe to share between replicas.

Layout under the cache directory:

    index.sqlite3                 key -> sha256, size, stored_at, last_used (+ arXiv records)
    blobs/<2 hex>/<sha256>.pdf    the PDFs, content-addressed: keys with the same bytes share one

A blob is written to a temporary file in its final directory and moved into place with
os.replace, so a reader never sees half a file. The index runs in WAL mode with a busy timeout,
so several processes (replicas on a shared volume) read and write it at once; a write holds
SQLite's write lock while it also evicts, and eviction deletes a blob file only inside that
transaction, so a concurrent writer that references the same blob either keeps it alive or
re-creates it. Whatever goes wrong on disk (a blob deleted by hand, a torn file after a crash,
a checksum mismatch) reads as a miss, never as an error.

The total size of the distinct blobs is kept under max_bytes by evicting the least recently
used keys. Keys stored with expires=True (unversioned arXiv ids, whose latest version can
change) are misses after ttl_s.

Every method blocks (SQLite, file I/O): the service calls them on a worker thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

INDEX_NAME = "index.sqlite3"
BUSY_TIMEOUT_MS = 10_000
METADATA_MAX_ROWS = 200_000
_TRIM_EVERY = 1000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pdfs (
    key TEXT PRIMARY KEY,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    stored_at REAL NOT NULL,
    last_used REAL NOT NULL,
    expires INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS pdfs_last_used ON pdfs (last_used);
CREATE INDEX IF NOT EXISTS pdfs_sha256 ON pdfs (sha256);
CREATE TABLE IF NOT EXISTS records (
    key TEXT PRIMARY KEY,
    record TEXT NOT NULL,
    stored_at REAL NOT NULL,
    expires INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS records_stored_at ON records (stored_at);
"""


@dataclass(frozen=True)
class CachedPdf:
    data: bytes
    sha256: str


class PdfCache:
    def __init__(
        self,
        root: Path,
        max_bytes: int,
        ttl_s: float,
        clock: Callable[[], float] = time.time,
    ):
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()  # one connection, shared by the service's worker threads
        self._record_puts = 0
        self.blob_root = self.root / "blobs"
        self.blob_root.mkdir(parents=True, exist_ok=True)
        path = self.root / INDEX_NAME
        try:
            # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE) where they matter.
            self._db = sqlite3.connect(
                path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                check_same_thread=False,
            )
            self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise RuntimeError(
                f"PDF cache index {path} is not usable ({exc}); move it away or point "
                "CITEWEAVE_FETCHER_CACHE_DIR elsewhere"
            ) from None

    # -- PDFs -------------------------------------------------------------------------------

    def blob_path(self, sha256: str) -> Path:
        return self.blob_root / sha256[:2] / f"{sha256}.pdf"

    def get(self, key: str) -> CachedPdf | None:
        """The PDF stored under key, or None (never stored, expired, evicted, or its blob is
        missing or damaged)."""
        with self._lock:
            row = self._db.execute(
                "SELECT sha256, size, stored_at, expires FROM pdfs WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        sha256, size, stored_at, expires = row
        if expires and self._clock() - stored_at > self.ttl_s:
            self._forget(key, sha256)
            return None
        try:
            data = self.blob_path(sha256).read_bytes()
        except OSError:
            data = None
        if data is None or len(data) != size or hashlib.sha256(data).hexdigest() != sha256:
            self._forget(key, sha256)
            return None
        with self._lock:
            self._db.execute(
                "UPDATE pdfs SET last_used = ? WHERE key = ?", (self._clock(), key)
            )
        return CachedPdf(data, sha256)

    def put(self, key: str, data: bytes, expires: bool) -> bool:
        """Stores data under key (replacing what was there); False when it cannot fit."""
        if len(data) > self.max_bytes:
            return False
        sha256 = hashlib.sha256(data).hexdigest()
        self._write_blob(sha256, data)
        now = self._clock()
        with self._write():
            self._db.execute(
                "INSERT OR REPLACE INTO pdfs (key, sha256, size, stored_at, last_used, expires)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (key, sha256, len(data), now, now, int(expires)),
            )
            self._evict_locked(keep=key)
        # Another process may have evicted the blob between the write above and our commit (it
        # was unreferenced then); now that the index references it, nobody deletes it again.
        self._write_blob(sha256, data)
        return True

    @contextlib.contextmanager
    def _write(self) -> Iterator[None]:
        """One write transaction, taken at once (BEGIN IMMEDIATE), so another process sharing
        the index waits on busy_timeout instead of failing half way."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def total_bytes(self) -> int:
        with self._lock:
            return self._total_locked()

    def keys(self) -> list[str]:
        """Keys from least to most recently used (for tests and diagnostics)."""
        with self._lock:
            rows = self._db.execute("SELECT key FROM pdfs ORDER BY last_used, rowid").fetchall()
        return [key for (key,) in rows]

    def _total_locked(self) -> int:
        row = self._db.execute(
            "SELECT COALESCE(SUM(size), 0) FROM (SELECT DISTINCT sha256, size FROM pdfs)"
        ).fetchone()
        return int(row[0])

    def _evict_locked(self, keep: str) -> None:
        """Inside a write transaction: drops least recently used keys (never `keep`) until the
        distinct blobs fit max_bytes, deleting blobs nothing references any more."""
        total = self._total_locked()
        if total <= self.max_bytes:
            return
        victims = self._db.execute(
            "SELECT key, sha256, size FROM pdfs WHERE key != ? ORDER BY last_used, rowid", (keep,)
        ).fetchall()
        for key, sha256, size in victims:
            if total <= self.max_bytes:
                break
            self._db.execute("DELETE FROM pdfs WHERE key = ?", (key,))
            if self._unreferenced_locked(sha256):
                self._delete_blob(sha256)
                total -= size

    def _unreferenced_locked(self, sha256: str) -> bool:
        return self._db.execute(
            "SELECT 1 FROM pdfs WHERE sha256 = ? LIMIT 1", (sha256,)
        ).fetchone() is None

    def _forget(self, key: str, sha256: str) -> None:
        with self._write():
            self._db.execute("DELETE FROM pdfs WHERE key = ? AND sha256 = ?", (key, sha256))
            if self._unreferenced_locked(sha256):
                self._delete_blob(sha256)

    def _write_blob(self, sha256: str, data: bytes) -> None:
        path = self.blob_path(sha256)
        try:
            if path.stat().st_size == len(data):
                return
        except FileNotFoundError:
            pass
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".pdf")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _delete_blob(self, sha256: str) -> None:
        self.blob_path(sha256).unlink(missing_ok=True)

    # -- arXiv records ----------------------------------------------------------------------

    def get_record(self, key: str) -> dict | None:
        with self._lock:
            row = self._db.execute(
                "SELECT record, stored_at, expires FROM records WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        record, stored_at, expires = row
        if expires and self._clock() - stored_at > self.ttl_s:
            return None
        try:
            return json.loads(record)
        except ValueError:
            return None

    def put_records(self, items: list[tuple[str, dict, bool]]) -> None:
        """(key, record, expires) triples; records are JSON-serializable dicts."""
        if not items:
            return
        now = self._clock()
        with self._write():
            self._db.executemany(
                "INSERT OR REPLACE INTO records (key, record, stored_at, expires) "
                "VALUES (?, ?, ?, ?)",
                [(key, json.dumps(record), now, int(expires))
                 for key, record, expires in items],
            )
            self._record_puts += len(items)
            if self._record_puts >= _TRIM_EVERY:
                self._record_puts = 0
                self._db.execute(
                    "DELETE FROM records WHERE key IN (SELECT key FROM records "
                    "ORDER BY stored_at DESC LIMIT -1 OFFSET ?)",
                    (METADATA_MAX_ROWS,),
                )

    def close(self) -> None:
        with self._lock:
            self._db.close()
