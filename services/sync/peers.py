"""The sync service's calls to its peers: embedders round robin, the retriever, with retries.

The sync job runs in worker threads, so these are blocking stubs (thread-safe). A peer that is
unavailable, overloaded or slow is retried with exponential backoff and jitter, moving to the
next embedder; after the last attempt the sync stops with UNAVAILABLE naming the peer. Writes
already made stay, so rerunning continues where it stopped.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import grpc
import numpy as np

from citeweave.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from citeweave.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from citeweave.sync.v1 import sync_pb2
from services.common.clients import sync_channel
from services.common.errors import FailedPrecondition, Unavailable
from services.common.roundrobin import RoundRobin

T = TypeVar("T")
RETRYABLE = frozenset({
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
})
BACKOFF_BASE_S, BACKOFF_MAX_S = 0.5, 15.0
GET_CHUNK = 1000


class Cancelled(Exception):
    """The caller went away; the job stops at the next check."""


class Rejected(Exception):
    """A peer refused the input (INVALID_ARGUMENT): retrying cannot help, isolating can."""

    def __init__(self, details: str):
        super().__init__(details)
        self.details = details


def backoff_s(attempt: int) -> float:
    return random.uniform(0, min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2**attempt))


def call_with_retries(
    call: Callable[[int], T], what: Callable[[int], str], attempts: int, cancelled: threading.Event
) -> T:
    """call(attempt) until it succeeds; what(attempt) names the peer for the final error."""
    for attempt in range(attempts):
        if cancelled.is_set():
            raise Cancelled()
        try:
            return call(attempt)
        except grpc.RpcError as exc:
            code = exc.code()
            if code == grpc.StatusCode.INVALID_ARGUMENT:
                raise Rejected(exc.details() or "") from None
            if code not in RETRYABLE:
                raise Unavailable(f"{what(attempt)} failed: {code.name}: {exc.details()}") from None
            if attempt + 1 == attempts:
                raise Unavailable(
                    f"{what(attempt)} is unreachable or overloaded after {attempts} attempts "
                    f"({code.name}: {exc.details()}). Batches finished before this are stored; "
                    "run the sync again to continue."
                ) from None
            cancelled.wait(backoff_s(attempt))
    raise AssertionError("unreachable")


@dataclass
class _Embedder:
    addr: str
    channel: grpc.Channel
    stub: embedder_pb2_grpc.EmbedderServiceStub
    calls: int = 0
    texts: int = 0


class EmbedderPool:
    """Every configured embedder, used round robin; they must all serve the same model."""

    def __init__(self, addrs: Sequence[str], timeout_s: float, attempts: int):
        self.timeout_s = timeout_s
        self.attempts = attempts
        self._embedders = []
        for addr in addrs:
            channel = sync_channel(addr)
            self._embedders.append(
                _Embedder(addr, channel, embedder_pb2_grpc.EmbedderServiceStub(channel))
            )
        self._turns = RoundRobin(self._embedders)
        self._lock = threading.Lock()
        self.model = ""
        self.dimension = 0
        self.max_inputs = 0
        self.max_chars = 0

    def check_models(self) -> None:
        infos = [(e.addr, self._model_info(e)) for e in self._embedders]
        models = {(info.model_name, info.dimension) for _, info in infos}
        if len(models) > 1:
            served = ", ".join(f"{addr}: {info.model_name}" for addr, info in infos)
            raise FailedPrecondition(
                f"the embedders serve different models ({served}); vectors of one store must "
                "come from one model"
            )
        first = infos[0][1]
        self.model, self.dimension = first.model_name, first.dimension
        self.max_inputs = min(info.max_inputs_per_request for _, info in infos)
        self.max_chars = min(info.max_chars_per_text for _, info in infos)

    @staticmethod
    def _model_info(embedder: _Embedder) -> embedder_pb2.GetModelInfoResponse:
        try:
            return embedder.stub.GetModelInfo(embedder_pb2.GetModelInfoRequest(), timeout=30)
        except grpc.RpcError as exc:
            raise Unavailable(
                f"embedder {embedder.addr} (GetModelInfo) failed: {exc.code().name}: {exc.details()}"
            ) from None

    def embed(self, texts: list[str], cancelled: threading.Event) -> np.ndarray:
        """(len(texts), dimension) float32; texts longer than the embedder accepts are cut (the
        model reads only its first max_seq_length tokens, far fewer characters)."""
        cut = [t[: self.max_chars] for t in texts]
        parts = []
        for start in range(0, len(cut), self.max_inputs):
            chunk = cut[start:start + self.max_inputs]
            picked: list[_Embedder] = []

            def attempt(_: int, chunk=chunk, picked=picked) -> embedder_pb2.EmbedResponse:
                embedder = self._turns.next()
                picked.append(embedder)
                reply = embedder.stub.Embed(
                    embedder_pb2.EmbedRequest(texts=chunk), timeout=self.timeout_s
                )
                with self._lock:
                    embedder.calls += 1
                    embedder.texts += len(chunk)
                return reply

            reply = call_with_retries(
                attempt, lambda _: f"embedder {picked[-1].addr}", self.attempts, cancelled
            )
            parts.append(np.asarray([v.values for v in reply.vectors], dtype=np.float32))
        return np.concatenate(parts) if parts else np.zeros((0, self.dimension), np.float32)

    def usage(self) -> list[sync_pb2.EmbedderUse]:
        with self._lock:
            return [sync_pb2.EmbedderUse(addr=e.addr, calls=e.calls, texts=e.texts)
                    for e in self._embedders]

    def close(self) -> None:
        for embedder in self._embedders:
            embedder.channel.close()


class RetrieverClient:
    def __init__(self, addr: str, timeout_s: float, attempts: int):
        self.addr = addr
        self.timeout_s = timeout_s
        self.attempts = attempts
        self._channel = sync_channel(addr)
        self.stub = retriever_pb2_grpc.RetrieverServiceStub(self._channel)

    def _call(self, method: str, request, cancelled: threading.Event):
        rpc = getattr(self.stub, method)
        return call_with_retries(
            lambda _: rpc(request, timeout=self.timeout_s),
            lambda _: f"retriever {self.addr} ({method})",
            self.attempts,
            cancelled,
        )

    def stored_hashes(self, cancelled: threading.Event) -> dict[str, str]:
        """Every stored id with its sha256, read through ListHashes (never the store itself)."""

        def read(_: int) -> dict[str, str]:
            hashes: dict[str, str] = {}
            for page in self.stub.ListHashes(
                retriever_pb2.ListHashesRequest(page_size=10000), timeout=self.timeout_s
            ):
                hashes.update((entry.id, entry.sha256) for entry in page.entries)
            return hashes

        return call_with_retries(
            read, lambda _: f"retriever {self.addr} (ListHashes)", self.attempts, cancelled
        )

    def get(self, ids: Sequence[str], cancelled: threading.Event) -> Iterator[retriever_pb2.PaperRecord]:
        for start in range(0, len(ids), GET_CHUNK):
            reply = self._call(
                "Get",
                retriever_pb2.GetRequest(ids=ids[start:start + GET_CHUNK], include_vectors=True),
                cancelled,
            )
            yield from reply.records

    def upsert(self, records: list[retriever_pb2.PaperRecord], cancelled: threading.Event) -> int:
        reply = self._call("Upsert", retriever_pb2.UpsertRequest(records=records), cancelled)
        return reply.upserted_count

    def delete(self, ids: Sequence[str], cancelled: threading.Event) -> int:
        reply = self._call("Delete", retriever_pb2.DeleteRequest(ids=ids), cancelled)
        return reply.deleted_count

    def close(self) -> None:
        self._channel.close()
