"""The services the pipeline calls, as async stubs, and the calls it makes more than once."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import grpc
import numpy as np

from citeweave.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from citeweave.fetcher.v1 import fetcher_pb2_grpc
from citeweave.retriever.v1 import retriever_pb2_grpc
from services.common.clients import aio_channel
from services.common.roundrobin import RoundRobin

# Below the embedder's max_inputs_per_request (256), and small enough that the pages of several
# papers interleave in the embedder's micro-batches.
EMBED_CHUNK = 64
# Chunks of one embed() in flight per embedder: one running, one waiting in its queue, so no
# replica idles between chunks; the bound keeps a 200-page PDF from flooding the queues.
CHUNKS_IN_FLIGHT_PER_EMBEDDER = 2
# A replica that is down or whose queue is full: the chunk goes on to the next replica.
FAILOVER_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED})


class EmbedderCallError(grpc.RpcError):
    """A failed Embed, with the address of the replica that failed it, or of every replica
    tried when all failed (an outage message must name what is down, not the whole list)."""

    def __init__(self, addr: str, error: grpc.RpcError):
        super().__init__(f"embedder {addr}: {error}")
        self.addr = addr
        self.error = error

    def code(self) -> grpc.StatusCode:
        return self.error.code()

    def details(self) -> str:
        return self.error.details()


@dataclass(frozen=True)
class Embedder:
    addr: str
    stub: embedder_pb2_grpc.EmbedderServiceStub


def _addr_list(addrs: str | Sequence[str]) -> list[str]:
    if isinstance(addrs, str):
        addrs = addrs.split(",")
    return [a.strip() for a in addrs if a.strip()]


@dataclass
class Peers:
    embedders: RoundRobin[Embedder]
    retriever: retriever_pb2_grpc.RetrieverServiceStub
    fetcher: fetcher_pb2_grpc.FetcherServiceStub
    channels: tuple[grpc.aio.Channel, ...] = ()

    @classmethod
    def connect(cls, embedder_addrs: str | Sequence[str], retriever_addr: str,
                fetcher_addr: str) -> "Peers":
        """embedder_addrs: one host:port, or several (a list or comma-separated): replicas
        serving the same model."""
        addrs = _addr_list(embedder_addrs)
        embedder_channels = [aio_channel(a) for a in addrs]
        retriever_channel, fetcher_channel = aio_channel(retriever_addr), aio_channel(fetcher_addr)
        return cls(
            RoundRobin([Embedder(a, embedder_pb2_grpc.EmbedderServiceStub(c))
                        for a, c in zip(addrs, embedder_channels)]),
            retriever_pb2_grpc.RetrieverServiceStub(retriever_channel),
            fetcher_pb2_grpc.FetcherServiceStub(fetcher_channel),
            (*embedder_channels, retriever_channel, fetcher_channel),
        )

    async def close(self) -> None:
        for channel in self.channels:
            await channel.close()

    async def embed(self, texts: list[str], timeout_s: float) -> np.ndarray:
        """Unit vectors, one row per text, in order. The texts are cut into chunks of at most
        EMBED_CHUNK, at least one per embedder replica when there are enough texts, each chunk
        going to the next replica, so the replicas share even one PDF's pages. A chunk whose
        replica is down or full moves on to the others; when none takes it, or on any other
        error, EmbedderCallError."""
        replicas = len(self.embedders)
        # Whole turns over the replicas, of equal chunks, so each replica gets an equal share.
        count = math.ceil(len(texts) / EMBED_CHUNK)
        count = min(len(texts), math.ceil(count / replicas) * replicas)
        size = math.ceil(len(texts) / count) if count else 1
        chunks = [texts[start:start + size] for start in range(0, len(texts), size)]
        targets = self.embedders.take(len(chunks))
        gate = asyncio.Semaphore(CHUNKS_IN_FLIGHT_PER_EMBEDDER * replicas)
        deadline = time.monotonic() + timeout_s

        async def one(chunk: list[str], target: Embedder) -> list:
            tried: list[str] = []
            async with gate:
                for embedder in (target, *(e for e in self.embedders.items if e is not target)):
                    try:
                        reply = await embedder.stub.Embed(
                            embedder_pb2.EmbedRequest(texts=chunk),
                            timeout=max(0.0, deadline - time.monotonic()))
                        return [v.values for v in reply.vectors]
                    except grpc.RpcError as error:
                        tried.append(embedder.addr)
                        if error.code() not in FAILOVER_CODES or len(tried) == replicas:
                            raise EmbedderCallError(", ".join(tried), error) from None
            raise AssertionError("unreachable")

        if len(chunks) == 1:
            parts = [await one(chunks[0], targets[0])]
        else:
            tasks = [asyncio.ensure_future(one(c, e)) for c, e in zip(chunks, targets)]
            try:
                parts = await asyncio.gather(*tasks)
            except BaseException:
                # One failed chunk fails the call: the others' work would be thrown away.
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise
        return np.asarray([row for part in parts for row in part], dtype=np.float32)
