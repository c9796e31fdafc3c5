"""Turns over a fixed set of peers (embedder replicas), shared by callers that run at once."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Generic, TypeVar

T = TypeVar("T")


class RoundRobin(Generic[T]):
    """Hands out the items in turn. Thread-safe: the sync's worker threads share one, and an
    event loop's tasks may too."""

    def __init__(self, items: Sequence[T]):
        if not items:
            raise ValueError("round robin over nothing")
        self.items: tuple[T, ...] = tuple(items)
        self._turn = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.items)

    def next(self) -> T:
        return self.take(1)[0]

    def take(self, count: int) -> list[T]:
        """The next `count` turns at once, so the parts of one job land on different items
        (as far as there are items) even while other jobs take turns concurrently."""
        with self._lock:
            start = self._turn
            self._turn = (start + count) % len(self.items)
        return [self.items[(start + i) % len(self.items)] for i in range(count)]
