"""The A -> B sync against a real Milvus server (PyPI `milvus==2.3.5`): the same exact counts as
on Milvus Lite, with ListHashes served by the server's query iterator. Skipped where the `milvus`
package is absent (the session fixture `milvus_server_uri` skips); `make install` installs it."""

from __future__ import annotations

from sync_support import only, run_sync, sync_stack


def test_three_cases_on_a_milvus_server(slices, minilm_embedder, milvus_server_uri, tmp_path):
    settings = {"milvus_uri": milvus_server_uri, "collection": "sync_papers"}
    with sync_stack(tmp_path, minilm_embedder.addr, retriever_settings=settings) as stack:
        assert run_sync(stack.sync_stub, slices.a, batch_size=32).counts["new"] == 60
        second = run_sync(stack.sync_stub, slices.b, batch_size=32)
        assert only(second.counts) == {
            "read": 90, "unchanged": 46, "changed": 14, "new": 30,
            "vector_reused": 9, "embedded": 35, "upserted": 44,
        }
        assert stack.count() == 90
        noop = run_sync(stack.sync_stub, slices.b)
        assert only(noop.counts) == {"read": 90, "unchanged": 90} and noop.embed_calls == 0
        deleted = run_sync(stack.sync_stub, slices.a, delete_missing=True)
        assert (deleted.counts["missing"], deleted.counts["deleted"]) == (30, 30)
        assert stack.count() == 60
