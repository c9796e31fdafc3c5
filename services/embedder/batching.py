"""Token-budget micro-batching across concurrent Embed calls.

Requests put their tokenized texts on one queue. A single worker task waits up to `max_wait`
for concurrent requests to arrive, takes everything queued (a window), sorts it by length and
cuts it into batches of at most `max_batch_size` texts and `max_batch_tokens` padded tokens, and
runs them one after another on a dedicated thread, so the event loop keeps accepting calls.
Windows are served in arrival order: a text waits for the window in progress and its own.
The queue is bounded by `max_queued_texts` (admitted, not yet embedded): a request that would
exceed it is refused at once with RESOURCE_EXHAUSTED instead of waiting unboundedly.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field

import numpy as np

from services.common.errors import ResourceExhausted, Unavailable
from services.embedder import metrics

log = logging.getLogger("citeweave.embedder.batching")

# A text's token ids without padding; its length is what the token budget counts.
TokenIds = Sequence[int]


def plan_batches(lengths: Sequence[int], max_tokens: int, max_size: int) -> list[list[int]]:
    """Groups indices into batches of similar length, each within the size and token budget.

    The budget counts padded tokens (longest x texts). A text longer than the budget still gets
    a batch of its own: refusing it would make it impossible to embed.
    """
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        # Ascending order: the text being added sets the padded width of the batch.
        full = len(current) >= max_size or (len(current) + 1) * lengths[index] > max_tokens
        if current and full:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


@dataclass(eq=False)
class _Job:
    """One Embed call: its result rows fill in as the batches holding its texts finish."""

    vectors: np.ndarray
    remaining: int
    future: asyncio.Future

    def fill(self, row: int, vector: np.ndarray) -> None:
        self.vectors[row] = vector
        self.remaining -= 1
        if self.remaining == 0 and not self.future.done():
            self.future.set_result(self.vectors)

    def fail(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)


@dataclass(eq=False)
class _Item:
    job: _Job
    row: int
    ids: TokenIds = field(repr=False)

    @property
    def dropped(self) -> bool:
        # The caller went away (deadline, cancel) or another of its batches failed.
        return self.job.future.done()


class MicroBatcher:
    def __init__(
        self,
        embed: Callable[[Sequence[TokenIds]], np.ndarray],
        dimension: int,
        *,
        max_batch_tokens: int,
        max_batch_size: int,
        max_wait_s: float,
        max_queued_texts: int,
    ):
        self._embed = embed
        self._dimension = dimension
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self.max_queued_texts = max_queued_texts
        self._pending: deque[_Item] = deque()
        self._pending_tokens = 0
        self._outstanding = 0
        self._jobs: set[_Job] = set()
        self._arrived = asyncio.Event()
        # One thread: a batch already uses every core (intra-op threads); two at once would
        # only contend for them.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
        self._worker: asyncio.Task | None = None

    def start(self) -> None:
        self._worker = asyncio.create_task(self._run(), name="embed-batcher")

    async def submit(self, token_ids: Sequence[TokenIds]) -> np.ndarray:
        """Queues the texts and waits for their vectors, (len(token_ids), dimension) float32."""
        count = len(token_ids)
        if self._outstanding + count > self.max_queued_texts:
            metrics.REJECTED.inc()
            raise ResourceExhausted(
                f"embedder queue is full ({self._outstanding} of {self.max_queued_texts} texts "
                f"pending, this request adds {count}); retry after a short backoff or send "
                "smaller requests"
            )
        job = _Job(
            vectors=np.empty((count, self._dimension), dtype=np.float32),
            remaining=count,
            future=asyncio.get_running_loop().create_future(),
        )
        self._jobs.add(job)
        job.future.add_done_callback(lambda _: self._jobs.discard(job))
        for row, ids in enumerate(token_ids):
            self._pending.append(_Item(job, row, ids))
            self._pending_tokens += len(ids)
        self._add_outstanding(count)
        self._arrived.set()
        return await job.future

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with suppress(asyncio.CancelledError):
                await self._worker
        for job in list(self._jobs):
            job.fail(Unavailable("embedder is shutting down; retry on another replica"))
        self._pending.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _add_outstanding(self, delta: int) -> None:
        self._outstanding += delta
        metrics.QUEUED_TEXTS.set(self._outstanding)

    async def _run(self) -> None:
        while True:
            await self._arrived.wait()
            await self._gather()
            window = list(self._pending)
            self._pending.clear()
            self._pending_tokens = 0
            self._arrived.clear()
            await self._serve(window)

    async def _gather(self) -> None:
        """Waits up to max_wait for more requests, unless a full batch is already queued."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_wait_s
        while (
            len(self._pending) < self.max_batch_size
            and self._pending_tokens < self.max_batch_tokens
        ):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except TimeoutError:
                return

    async def _serve(self, window: list[_Item]) -> None:
        loop = asyncio.get_running_loop()
        lengths = [len(item.ids) for item in window]
        for indices in plan_batches(lengths, self.max_batch_tokens, self.max_batch_size):
            batch = [window[i] for i in indices]
            live = [item for item in batch if not item.dropped]
            try:
                if live:
                    started = time.perf_counter()
                    vectors = await loop.run_in_executor(
                        self._executor, self._embed, [item.ids for item in live]
                    )
                    metrics.BATCH_SECONDS.observe(time.perf_counter() - started)
                    metrics.BATCH_TEXTS.observe(len(live))
                    metrics.BATCH_TOKENS.observe(len(live) * max(len(i.ids) for i in live))
                    for item, vector in zip(live, vectors):
                        item.job.fill(item.row, vector)
            except Exception as exc:  # noqa: BLE001 - handed to each caller; the worker goes on
                log.exception("inference batch failed", extra={"texts": len(live)})
                for item in live:
                    item.job.fail(exc)
            finally:
                self._add_outstanding(-len(batch))
