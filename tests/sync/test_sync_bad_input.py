"""Bad sources: every bad line is counted and reported with its line number, the rest proceeds,
nothing already stored is harmed; an unusable source is refused before anything is written."""

from __future__ import annotations

import gzip
import threading
from contextlib import contextmanager
from pathlib import Path

import grpc
import orjson
import pytest

from citeweave.sync.v1 import sync_pb2
from sync_support import big_source, only, run_sync, sync_stack


def _line(record: dict) -> bytes:
    return orjson.dumps(record) + b"\n"


@contextmanager
def _seeded_stack(slices, embedder_addr: str, tmp: Path):
    """A stack whose store holds the first 10 unchanged papers of slice A."""
    seed = tmp / "seed.jsonl"
    ids = slices.unchanged_ids[:10]
    seed.write_bytes(b"".join(_line(slices.a_records[i]) for i in ids))
    with sync_stack(tmp, embedder_addr) as stack:
        assert run_sync(stack.sync_stub, seed).counts["new"] == 10
        yield stack, ids, stack.rows(ids)


@pytest.fixture
def seeded(slices, minilm_embedder, tmp_path):
    """For tests that write: a store of their own."""
    with _seeded_stack(slices, minilm_embedder.addr, tmp_path) as stack:
        yield stack


@pytest.fixture(scope="module")
def seeded_shared(slices, minilm_embedder, tmp_path_factory):
    """For tests that must not write anything: one store for all of them."""
    with _seeded_stack(slices, minilm_embedder.addr, tmp_path_factory.mktemp("seeded")) as stack:
        yield stack


def test_bad_lines_are_reported_and_the_rest_is_synced(seeded, slices, tmp_path):
    stack, ids, stored = seeded
    good = [slices.a_records[i] for i in slices.unchanged_ids[10:12]]
    source = tmp_path / "bad.jsonl"
    source.write_bytes(b"".join([
        _line(good[0]),                                                      # 1
        b'{"id": "x-2", "title": "broken\n',                                 # 2
        _line({"title": "No id here", "abstract": "Some text."}),            # 3
        _line({"id": "x-4", "title": "No abstract"}),                        # 4
        b'{"id": "x-5", "title": "\xff\xfe", "abstract": "bad bytes"}\n',    # 5
        b"[1, 2, 3]\n",                                                      # 6
        b"\n",                                                               # 7 (blank: skipped)
        _line(good[1]),                                                      # 8
        _line(dict(slices.a_records[ids[0]], abstract="")),                  # 9 (stored id, broken)
        _line(dict(slices.a_records[ids[1]], id="x" * 200)),                 # 10
    ]))
    result = run_sync(stack.sync_stub, source, delete_missing=True)
    assert only(result.counts) == {
        "read": 9, "failed": 7, "new": 2, "embedded": 2, "upserted": 2}
    reported = {(f.line_number, f.record_id): f.reason for f in result.failures}
    assert set(reported) == {(2, ""), (3, ""), (4, "x-4"), (5, ""), (6, ""), (9, ids[0]), (10, "")}
    assert "not valid JSON" in reported[(2, "")]
    assert reported[(3, "")] == "no id"
    assert reported[(4, "x-4")] == "no abstract"
    assert reported[(5, "")].startswith("invalid UTF-8 (byte 0xff")
    assert "JSON object" in reported[(6, "")]
    assert reported[(9, ids[0])] == "no abstract"
    assert "longer than 128 bytes" in reported[(10, "")]
    # Lines without a readable id could be any stored paper: nothing is called missing or deleted.
    assert any("lines had no readable id" in w for w in result.summary.warnings)
    assert stack.count() == 12
    assert stack.rows(ids) == stored, "stored papers must be untouched"


def test_a_truncated_gzip_keeps_what_was_read_and_deletes_nothing(seeded, slices, tmp_path):
    stack, ids, stored = seeded
    lines = [_line(slices.a_records[i]) for i in ids[:5] + slices.unchanged_ids[10:20]]
    whole = gzip.compress(b"".join(lines))
    source = tmp_path / "cut.jsonl.gz"
    source.write_bytes(whole[: len(whole) * 2 // 3])
    result = run_sync(stack.sync_stub, source, delete_missing=True)
    counts = result.counts
    assert counts["failed"] == 1 and counts["deleted"] == 0 and counts["missing"] == 0
    assert counts["unchanged"] == 5 and 0 < counts["new"] < 10
    (failure,) = result.failures
    assert failure.line_number == counts["read"] and failure.record_id == ""
    assert "ends early or is corrupt" in failure.reason
    assert any("could not be read to its end" in w for w in result.summary.warnings)
    assert stack.count() == 10 + counts["new"]
    assert stack.rows(ids) == stored


@pytest.mark.parametrize(
    ("make", "code", "words"),
    [
        (lambda d: d / "absent.jsonl", grpc.StatusCode.NOT_FOUND, "does not exist"),
        (lambda d: d, grpc.StatusCode.INVALID_ARGUMENT, "not a regular file"),
        (lambda d: "relative/path.jsonl", grpc.StatusCode.INVALID_ARGUMENT, "is relative"),
        (lambda d: _write(d / "paper.pdf", b"%PDF-1.7\n%binary\x00\x01\n"),
         grpc.StatusCode.INVALID_ARGUMENT, "no JSON object in its first"),
        (lambda d: _write(d / "fake.jsonl.gz", b"\x1f\x8b\x08\x00garbage" * 10),
         grpc.StatusCode.INVALID_ARGUMENT, "cannot be read as gzip"),
    ],
)
def test_an_unusable_source_is_refused_before_any_write(seeded_shared, tmp_path, make, code, words):
    stack, ids, stored = seeded_shared
    with pytest.raises(grpc.RpcError) as error:
        run_sync(stack.sync_stub, make(tmp_path), delete_missing=True)
    assert error.value.code() == code
    assert words in error.value.details()
    assert stack.count() == 10 and stack.rows(ids) == stored
    assert not (stack.tmp / "sync-state" / "unfinished-sync.json").exists()


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_bad_snapshot_and_format_are_refused(seeded_shared, slices, tmp_path):
    stack, _, _ = seeded_shared
    cases = [
        ({"snapshot_path": tmp_path / "none.npz"}, grpc.StatusCode.NOT_FOUND, "does not exist"),
        ({"snapshot_path": _write(tmp_path / "x.npz", b"not a zip")},
         grpc.StatusCode.INVALID_ARGUMENT, "not a readable .npz"),
        ({"format": 7}, grpc.StatusCode.INVALID_ARGUMENT, "format 7 is unknown"),
    ]
    for options, code, words in cases:
        with pytest.raises(grpc.RpcError) as error:
            run_sync(stack.sync_stub, slices.a, **options)
        assert error.value.code() == code and words in error.value.details(), options
    assert stack.count() == 10


def test_a_second_sync_while_one_runs_is_aborted(seeded_shared, tmp_path):
    stack, _, _ = seeded_shared
    big = big_source(tmp_path / "big.jsonl", 50_000)
    started = threading.Event()
    outcome: dict = {}

    def long_dry_run():
        request = sync_pb2.SyncRequest(
            source_path=str(big), options=sync_pb2.SyncOptions(dry_run=True))
        for event in stack.sync_stub.Sync(request, timeout=600):
            started.set()
            if event.WhichOneof("event") == "summary":
                outcome["summary"] = event.summary

    runner = threading.Thread(target=long_dry_run)
    runner.start()
    assert started.wait(120)
    with pytest.raises(grpc.RpcError) as error:
        run_sync(stack.sync_stub, big, dry_run=True)
    runner.join()
    assert error.value.code() == grpc.StatusCode.ABORTED
    assert "one sync or topic fit runs at a time" in error.value.details()
    counts = outcome["summary"].counts
    assert (counts.read, counts.new, counts.upserted) == (50_000, 50_000, 0)
    assert counts.missing == 10 and counts.deleted == 0 and stack.count() == 10


def test_a_retriever_that_goes_down_stops_the_sync_with_unavailable(slices, minilm_embedder, tmp_path):
    with sync_stack(tmp_path, minilm_embedder.addr, rpc_attempts="2") as stack:
        stack.retriever.stop()
        with pytest.raises(grpc.RpcError) as error:
            run_sync(stack.sync_stub, slices.a)
        assert error.value.code() == grpc.StatusCode.UNAVAILABLE
        details = error.value.details()
        assert f"retriever {stack.retriever.addr}" in details and "after 2 attempts" in details
        assert "run the sync again to continue" in details
