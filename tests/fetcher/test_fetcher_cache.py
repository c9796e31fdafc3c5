"""The fetcher's on-disk PDF cache: size bound, LRU order, shared blobs, concurrent writers,
damaged or missing blobs, expiry of unversioned ids, arXiv records."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

from services.fetcher.cache import PdfCache

KIB = 1024


class Clock:
    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float = 1.0) -> None:
        self.now += seconds


def pdf(tag: str, size: int = 10 * KIB) -> bytes:
    head = f"%PDF-1.7 {tag}\n".encode()
    return head + bytes(size - len(head))


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make(tmp_path: Path, clock: Clock, max_bytes: int = 35 * KIB, ttl_s: float = 100.0) -> PdfCache:
    return PdfCache(tmp_path / "cache", max_bytes, ttl_s, clock=clock)


def blob_files(cache: PdfCache) -> list[Path]:
    return sorted(cache.blob_root.glob("*/*.pdf"))


def test_round_trip_and_layout(tmp_path, clock):
    cache = make(tmp_path, clock)
    data = pdf("a")
    assert cache.get("2401.00001v1") is None
    assert cache.put("2401.00001v1", data, expires=False)
    hit = cache.get("2401.00001v1")
    assert hit is not None and hit.data == data
    sha = hashlib.sha256(data).hexdigest()
    assert blob_files(cache) == [cache.root / "blobs" / sha[:2] / f"{sha}.pdf"]
    assert not list(cache.blob_root.rglob(".tmp-*")), "no temporary file is left behind"


def test_eviction_keeps_the_total_under_the_bound(tmp_path, clock):
    cache = make(tmp_path, clock, max_bytes=35 * KIB)
    for n in range(5):
        cache.put(f"k{n}", pdf(str(n)), expires=False)
        clock.tick()
        assert cache.total_bytes() <= 35 * KIB
    assert cache.keys() == ["k2", "k3", "k4"]
    assert len(blob_files(cache)) == 3
    assert cache.get("k0") is None and cache.get("k4") is not None


def test_eviction_follows_last_use_not_insertion(tmp_path, clock):
    cache = make(tmp_path, clock, max_bytes=35 * KIB)
    for n in range(3):
        cache.put(f"k{n}", pdf(str(n)), expires=False)
        clock.tick()
    assert cache.get("k0") is not None  # k0 becomes the most recently used
    clock.tick()
    cache.put("k3", pdf("3"), expires=False)
    assert cache.keys() == ["k2", "k0", "k3"], "k1 was the least recently used"


def test_a_pdf_larger_than_the_bound_is_not_stored(tmp_path, clock):
    cache = make(tmp_path, clock, max_bytes=35 * KIB)
    cache.put("small", pdf("s"), expires=False)
    assert not cache.put("huge", pdf("h", 40 * KIB), expires=False)
    assert cache.keys() == ["small"]
    assert not make(tmp_path / "off", clock, max_bytes=0).put("k", pdf("x"), expires=False)


def test_keys_with_the_same_bytes_share_one_blob(tmp_path, clock):
    cache = make(tmp_path, clock, max_bytes=25 * KIB)
    data = pdf("same")
    cache.put("2401.00001", data, expires=True)
    cache.put("2401.00001v2", data, expires=False)
    assert len(blob_files(cache)) == 1
    assert cache.total_bytes() == len(data), "a shared blob counts once"
    clock.tick()
    cache.put("other", pdf("other"), expires=False)
    clock.tick()
    assert cache.get("2401.00001v2") is not None  # used after "other"
    clock.tick()
    cache.put("third", pdf("third"), expires=False)
    # The oldest key goes first, but its blob stays for the key that still uses it; freeing
    # space then takes the next least recently used key.
    assert cache.keys() == ["2401.00001v2", "third"]
    assert cache.get("2401.00001v2").data == data
    assert len(blob_files(cache)) == 2


def test_missing_or_damaged_blob_is_a_miss(tmp_path, clock):
    cache = make(tmp_path, clock)
    cache.put("gone", pdf("gone"), expires=False)
    cache.put("torn", pdf("torn"), expires=False)
    cache.put("flipped", pdf("flipped"), expires=False)
    paths = {key: cache.blob_path(hashlib.sha256(pdf(key)).hexdigest()) for key in
             ("gone", "torn", "flipped")}
    paths["gone"].unlink()
    paths["torn"].write_bytes(pdf("torn")[:100])
    flipped = bytearray(pdf("flipped"))
    flipped[-1] ^= 0xFF
    paths["flipped"].write_bytes(bytes(flipped))
    for key in paths:
        assert cache.get(key) is None, key
        assert key not in cache.keys(), "the broken entry is forgotten"
    cache.put("gone", pdf("gone"), expires=False)
    assert cache.get("gone").data == pdf("gone"), "storing again repairs it"


def test_unversioned_keys_expire_versioned_do_not(tmp_path, clock):
    cache = make(tmp_path, clock, ttl_s=100.0)
    cache.put("2401.00001", pdf("latest"), expires=True)
    cache.put("2401.00001v1", pdf("v1"), expires=False)
    clock.tick(99)
    assert cache.get("2401.00001") is not None
    clock.tick(2)
    assert cache.get("2401.00001") is None
    assert cache.get("2401.00001v1") is not None
    assert len(blob_files(cache)) == 1, "the expired entry's blob is deleted"


def test_concurrent_writers_of_one_key(tmp_path, clock):
    cache = make(tmp_path, clock, max_bytes=10 * 1024 * KIB)
    data = pdf("contended", 512 * KIB)
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def writer() -> None:
        try:
            barrier.wait()
            for _ in range(10):
                cache.put("2401.00001v1", data, expires=False)
                hit = cache.get("2401.00001v1")
                assert hit is None or hit.data == data
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert cache.get("2401.00001v1").data == data
    assert cache.keys() == ["2401.00001v1"]
    assert len(blob_files(cache)) == 1
    assert not list(cache.blob_root.rglob(".tmp-*"))


def test_two_instances_share_one_directory(tmp_path, clock):
    """Replicas on a shared volume: what one stores, the other reads; both evict correctly."""
    first = make(tmp_path, clock, max_bytes=25 * KIB)
    second = make(tmp_path, clock, max_bytes=25 * KIB)
    first.put("a", pdf("a"), expires=False)
    clock.tick()
    assert second.get("a").data == pdf("a")
    clock.tick()
    second.put("b", pdf("b"), expires=False)
    clock.tick()
    first.put("c", pdf("c"), expires=False)
    assert second.keys() == ["a", "c"] or second.keys() == ["b", "c"]
    assert len(blob_files(first)) == 2


def test_records_round_trip_and_expire(tmp_path, clock):
    cache = make(tmp_path, clock, ttl_s=100.0)
    record = {"id": "2401.00001v2", "title": "T", "authors": ["A"]}
    cache.put_records([("2401.00001", record, True), ("2401.00001v2", record, False)])
    assert cache.get_record("2401.00001") == record
    clock.tick(101)
    assert cache.get_record("2401.00001") is None
    assert cache.get_record("2401.00001v2") == record
    assert cache.get_record("2401.99999") is None


def test_a_file_that_is_not_sqlite_stops_with_a_clear_error(tmp_path, clock):
    root = tmp_path / "cache"
    root.mkdir()
    (root / "index.sqlite3").write_bytes(b"this is not a database" * 100)
    with pytest.raises(RuntimeError, match="CITEWEAVE_FETCHER_CACHE_DIR"):
        PdfCache(root, 1024, 1.0, clock=clock)
