"""In-process checks of the pieces the service is built from (no model, no process)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from services.common.errors import InvalidArgument, ResourceExhausted
from services.embedder.batching import MicroBatcher, plan_batches
from services.embedder.cache import EmbeddingCache, cache_key
from services.embedder.settings import EmbedderSettings


def test_plan_batches_sorts_by_length_and_keeps_the_token_budget():
    lengths = [300, 5, 120, 7, 290, 118, 6, 310]
    plan = plan_batches(lengths, max_tokens=640, max_size=3)
    assert sorted(i for batch in plan for i in batch) == list(range(len(lengths)))
    for batch in plan:
        assert len(batch) <= 3
        assert len(batch) * max(lengths[i] for i in batch) <= 640
    # Similar lengths share a batch: the short ones together, the long ones together.
    assert [sorted(lengths[i] for i in b) for b in plan] == [
        [5, 6, 7], [118, 120], [290, 300], [310]
    ]


def test_plan_batches_gives_an_over_budget_text_its_own_batch():
    assert plan_batches([10, 5000, 20], max_tokens=100, max_size=8) == [[0, 2], [1]]


def test_cache_is_lru_and_keyed_by_model_and_text():
    cache = EmbeddingCache(capacity=2)
    a, b, c = (cache_key("m", t) for t in ("a", "b", "c"))
    cache.put(a, np.ones(3))
    cache.put(b, np.zeros(3))
    assert cache.get(a) is not None  # a is now the most recent
    cache.put(c, np.ones(3))
    assert cache.get(b) is None and cache.get(a) is not None and len(cache) == 2
    assert cache_key("other-model", "a") != a
    disabled = EmbeddingCache(capacity=0)
    disabled.put(a, np.ones(3))
    assert disabled.get(a) is None


def _fake_embed(batches: list[int]):
    def embed(batch):
        batches.append(len(batch))
        # A vector that identifies the text: its length and first id.
        return np.array([[len(ids), ids[0]] for ids in batch], dtype=np.float32)

    return embed


async def test_batcher_merges_concurrent_requests_and_keeps_order():
    sizes: list[int] = []
    batcher = MicroBatcher(
        _fake_embed(sizes), 2, max_batch_tokens=1000, max_batch_size=64, max_wait_s=0.2,
        max_queued_texts=100,
    )
    batcher.start()
    try:
        requests = [[[i, 1, 1][: 1 + i % 3] for i in range(k, k + 3)] for k in range(0, 30, 3)]
        results = await asyncio.gather(*(batcher.submit(r) for r in requests))
    finally:
        await batcher.close()
    for request, result in zip(requests, results):
        assert result.tolist() == [[len(ids), ids[0]] for ids in request]
    assert sum(sizes) == 30 and len(sizes) < len(requests)  # requests shared batches


async def test_batcher_refuses_beyond_the_queue_bound():
    batcher = MicroBatcher(
        _fake_embed([]), 2, max_batch_tokens=1000, max_batch_size=64, max_wait_s=0.5,
        max_queued_texts=3,
    )
    batcher.start()
    try:
        first = asyncio.create_task(batcher.submit([[1], [2], [3]]))
        await asyncio.sleep(0.05)
        with pytest.raises(ResourceExhausted, match="queue is full"):
            await batcher.submit([[4]])
        assert (await first).shape == (3, 2)
        assert (await batcher.submit([[4]])).tolist() == [[1, 4]]  # room again once drained
    finally:
        await batcher.close()


def test_settings_reject_a_request_limit_the_queue_cannot_hold(monkeypatch):
    monkeypatch.setenv("CITEWEAVE_EMBEDDER_MAX_QUEUED_TEXTS", "10")
    with pytest.raises(ValueError, match="must not exceed max_queued_texts"):
        EmbedderSettings()
    monkeypatch.setenv("CITEWEAVE_EMBEDDER_MAX_INPUTS_PER_REQUEST", "10")
    assert EmbedderSettings().max_queued_texts == 10


def test_every_setting_is_described():
    assert all(f.description for f in EmbedderSettings.model_fields.values())
    assert EmbedderSettings.model_config["env_prefix"] == "CITEWEAVE_EMBEDDER_"


def test_invalid_argument_is_a_domain_error():
    # The interceptor maps by type; a plain ValueError would become INTERNAL.
    from services.embedder.app import validate_texts

    with pytest.raises(InvalidArgument, match=r"texts\[2\] is empty"):
        validate_texts(["a", "b", "\t"], max_inputs=4, max_chars=10)
