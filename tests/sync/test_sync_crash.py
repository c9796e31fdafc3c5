"""Crash safety: SIGKILL the sync service in the middle of a batch, run the sync again, and the
store is the one an uninterrupted run gives; finished work is not redone."""

from __future__ import annotations

import os
import signal

import numpy as np

from citeweave.sync.v1 import sync_pb2
from sync_support import run_sync, sync_stack
from tests.conftest import running_service

BATCH = 4


def _snapshot_of_store(stack, ids):
    rows = stack.rows(ids)
    assert set(rows) == set(ids)
    return rows


def _kill_mid_sync(stack, source) -> int:
    """Streams a sync and SIGKILLs the service once some batches are stored but not all.
    Returns the `upserted` count of the last progress event seen before the kill."""
    request = sync_pb2.SyncRequest(
        source_path=str(source), options=sync_pb2.SyncOptions(batch_size=BATCH))
    stream = stack.sync_stub.Sync(request, timeout=600)
    for event in stream:
        progress = event.progress if event.WhichOneof("event") == "progress" else None
        if progress is not None and progress.counts.upserted >= 2 * BATCH:
            os.killpg(stack.sync.process.pid, signal.SIGKILL)
            stack.sync.process.wait()
            stream.cancel()
            return progress.counts.upserted
    raise AssertionError("the sync finished before it could be killed")


def test_sigkill_mid_batch_then_rerun_equals_an_uninterrupted_run(slices, minilm_embedder, tmp_path):
    all_ids = list(slices.b_records)
    with sync_stack(tmp_path / "reference", minilm_embedder.addr) as reference:
        run_sync(reference.sync_stub, slices.a, batch_size=16)
        run_sync(reference.sync_stub, slices.b, batch_size=16)
        expected = _snapshot_of_store(reference, all_ids)

    # An embedder without a cache: the reference run just embedded every text, and served from a
    # cache the whole sync could finish before the SIGKILL lands.
    with running_service("embedder", tmp_path, {"model": "all-MiniLM-L6-v2", "cache_entries": "0"}) as uncached, \
            sync_stack(tmp_path / "crash", uncached.addr) as stack:
        run_sync(stack.sync_stub, slices.a, batch_size=16)
        upserted_before_kill = _kill_mid_sync(stack, slices.b)
        # Rows already carrying B's hash were finished before the kill.
        at_kill = stack.rows(all_ids)
        finished = sum(
            1 for i, r in at_kill.items() if i in expected and r.paper.sha256 == expected[i].paper.sha256
        ) - 46  # the 46 unchanged ones carry it from the start
        assert stack.count() == 60 + sum(1 for i in slices.new_ids if i in at_kill)
        assert upserted_before_kill <= finished < 44, "the kill must land before the end"

        stack.start_sync(uncached.addr)
        rerun = run_sync(stack.sync_stub, slices.b, batch_size=BATCH)
        assert rerun.summary.resumed
        # Exactly the unfinished work is done again; nothing finished is redone.
        assert rerun.counts["unchanged"] == 46 + finished
        assert rerun.counts["changed"] + rerun.counts["new"] == 44 - finished
        assert rerun.counts["upserted"] == 44 - finished
        assert rerun.counts["embedded"] <= 35

        final = _snapshot_of_store(stack, all_ids)
        assert stack.count() == 90, "no duplicate rows"
        for paper_id, want in expected.items():
            got = final[paper_id]
            assert got.paper == want.paper, paper_id
            cosine = float(np.dot(got.vector, want.vector))
            assert cosine > 0.99999, (paper_id, cosine)

        again = run_sync(stack.sync_stub, slices.b)
        assert not again.summary.resumed
        assert again.counts["unchanged"] == 90 and again.embed_calls == 0
