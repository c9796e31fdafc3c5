"""Work done once writes go quiet: flush Milvus Lite's memtable, rebuild the lexical index.

A sync upserts in batches for minutes; doing this after every batch would redo it hundreds of
times, so it runs only after `write_settle_delay_s` without writes. Both steps matter for search:
Milvus Lite searches unflushed rows by rebuilding a snapshot of its memtable on every query
(~1 s per search over 4,000 fresh 768-d rows here, ~30 ms once flushed), and bm25s cannot add
documents, so the lexical index is rebuilt whole. Searches meanwhile use the previous snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

log = logging.getLogger("citeweave.retriever.settle")

Step = Callable[[], Awaitable[None]]


class WriteSettler:
    def __init__(self, steps: Sequence[Step], delay_s: float, interval_s: float):
        self._steps = list(steps)
        self._delay_s = delay_s
        self._interval_s = interval_s  # 0: only after this process's own writes
        self._writes = 0
        self._settled_writes = 0
        self._last_write = 0.0
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    @property
    def stale(self) -> bool:
        """Writes have landed that the steps have not yet followed."""
        return self._writes != self._settled_writes

    def note_write(self) -> None:
        self._writes += 1
        self._last_write = time.monotonic()
        self._wake.set()

    async def settle(self) -> None:
        writes = self._writes
        for step in self._steps:
            await step()
        self._settled_writes = writes

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="write-settler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._interval_s or None)
            self._wake.clear()
            while (quiet := time.monotonic() - self._last_write) < self._delay_s:
                await asyncio.sleep(self._delay_s - quiet)
            try:
                await self.settle()
            except Exception:
                # The store may be briefly unreachable (a server restart); searches keep the old
                # snapshot and the next attempt comes after one more delay.
                log.exception("settling after writes failed; retrying")
                await asyncio.sleep(max(self._delay_s, 1.0))
                self._wake.set()
