"""Shards through the real services: each record belongs to the shard its id's CRC-32 names. Two
shards run one after the other store every record exactly once, their counts add up to the
unsharded run's, a shard leaves the other shards' records alone, and what a shard cannot do
(delete missing papers) is refused before anything is written."""

from __future__ import annotations

import grpc
import orjson
import pytest

from services.common.corpus import row_from_arxiv, row_sha256
from services.sync.job import shard_of
from sync_support import CHANGED_IDS, run_sync, sync_stack

SUMMED = ("read", "unchanged", "changed", "new", "failed")


def test_the_shard_of_an_id_is_fixed_and_the_fixture_splits_evenly(slices):
    # The same in every process, machine and Python version (hash() is salted per process).
    assert [(shard_of(i, 2), shard_of(i, 5)) for i in (
        "0704.0001", "2509.22151", "doi:10.1/x", "hep-th/9901001")] == [(0, 4), (1, 3), (0, 2), (0, 0)]
    ids = list(slices.b_records)
    assert sorted(sum(shard_of(i, 2) == s for i in ids) for s in range(2)) == [41, 49]
    assert {shard_of(i, 2) for i in CHANGED_IDS} == {0, 1}


@pytest.fixture(scope="module")
def stack(minilm_embedder, tmp_path_factory):
    with sync_stack(tmp_path_factory.mktemp("shards"), minilm_embedder.addr) as stack:
        yield stack


def _hashes(records: dict[str, dict]) -> dict[str, str]:
    return {i: row_sha256(row_from_arxiv(r)) for i, r in records.items()}


def test_two_shards_store_every_record_once_and_add_up_to_the_unsharded_run(stack, slices):
    run_sync(stack.sync_stub, slices.a, batch_size=16)
    a_rows = stack.rows(list(slices.a_records))
    unsharded = run_sync(stack.sync_stub, slices.b, dry_run=True).counts
    assert {k: unsharded[k] for k in SUMMED} == {
        "read": 90, "unchanged": 46, "changed": 14, "new": 30, "failed": 0}
    b_hashes = _hashes(slices.b_records)
    mine = {s: {i for i in slices.b_records if shard_of(i, 2) == s} for s in range(2)}

    first = run_sync(stack.sync_stub, slices.b, shard_index=0, shard_count=2, batch_size=8)
    assert first.counts["read"] == len(mine[0])
    stored = stack.rows(list(slices.b_records))
    assert set(stored) == set(slices.a_records) | mine[0]
    for paper_id, row in stored.items():
        if paper_id in mine[0]:
            assert row.paper.sha256 == b_hashes[paper_id]
        else:  # shard 1's records are as slice A left them
            assert row == a_rows[paper_id], paper_id

    second = run_sync(stack.sync_stub, slices.b, shard_index=1, shard_count=2, batch_size=8)
    assert stack.count() == 90, "every record exactly once"
    stored = stack.rows(list(slices.b_records))
    assert {i: r.paper.sha256 for i, r in stored.items()} == b_hashes
    shards = (first.counts, second.counts)
    assert {k: sum(c[k] for c in shards) for k in SUMMED} == {k: unsharded[k] for k in SUMMED}
    assert sum(c["upserted"] for c in shards) == 44
    assert sum(c["embedded"] + c["vector_reused"] for c in shards) == 44
    for result in (first, second):
        assert result.counts["missing"] == 0 and not result.summary.missing_ids_sample
        assert any("not computed for a sharded run" in w for w in result.summary.warnings)

    # Each shard keeps its own line cache and marker: a rerun of shard 0 parses nothing new.
    state = stack.tmp / "sync-state"
    assert {p.name for p in state.glob("line-cache-*")} >= {
        "line-cache-arxiv-kaggle-v1-shard-0-of-2.npz", "line-cache-arxiv-kaggle-v1-shard-1-of-2.npz"}
    assert not list(state.glob("unfinished-sync*"))
    rerun = run_sync(stack.sync_stub, slices.b, shard_index=0, shard_count=2)
    assert (rerun.counts["read"], rerun.counts["unchanged"], rerun.embed_calls) == (
        len(mine[0]), len(mine[0]), 0)


def test_a_line_without_a_readable_id_is_reported_by_exactly_one_shard(stack, slices, tmp_path):
    good = [orjson.dumps(r) for r in list(slices.b_records.values())[:20]]
    broken = [b'{"id": "x-1", "title": "broken', b"[1, 2]", b'{"title": "no id", "abstract": "a"}',
              orjson.dumps({"id": "x-4", "title": "no abstract"})]
    source = tmp_path / "mixed.jsonl"
    source.write_bytes(b"\n".join(good[:10] + broken + good[10:]) + b"\n")
    results = [run_sync(stack.sync_stub, source, dry_run=True, shard_index=s, shard_count=3)
               for s in range(3)]
    reported = sorted((f.line_number, f.record_id) for r in results for f in r.failures)
    assert reported == [(11, ""), (12, ""), (13, ""), (14, "x-4")]
    assert sum(r.counts["read"] for r in results) == 24
    assert sum(r.counts["failed"] for r in results) == 4


@pytest.mark.parametrize(("options", "words"), [
    ({"shard_index": 2, "shard_count": 2}, "shard_index 2 is out of range for shard_count 2"),
    ({"shard_index": 1}, "shard_index 1 is out of range for shard_count 0"),
    ({"shard_index": 0, "shard_count": 2, "delete_missing": True},
     "delete_missing cannot be combined with shard_count > 1: a shard sees only its own records"),
])
def test_what_a_shard_cannot_do_is_refused_before_any_write(stack, slices, options, words):
    before = stack.count()
    with pytest.raises(grpc.RpcError) as error:
        run_sync(stack.sync_stub, slices.b, **options)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert words in error.value.details()
    assert stack.count() == before
    assert not list((stack.tmp / "sync-state").glob("unfinished-sync*"))


def test_one_shard_is_no_sharding(stack, slices):
    result = run_sync(stack.sync_stub, slices.b, shard_count=1, delete_missing=True, dry_run=True)
    assert result.counts["read"] == 90
    assert not any("sharded" in w for w in result.summary.warnings)
