"""The services the pipeline calls, as async stubs, and the calls it makes more than once."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
import numpy as np

from citeweave.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from citeweave.fetcher.v1 import fetcher_pb2_grpc
from citeweave.retriever.v1 import retriever_pb2_grpc
from services.common.clients import aio_channel

# Below the embedder's max_inputs_per_request (256), and small enough that the pages of several
# papers interleave in the embedder's micro-batches.
EMBED_CHUNK = 64


@dataclass
class Peers:
    embedder: embedder_pb2_grpc.EmbedderServiceStub
    retriever: retriever_pb2_grpc.RetrieverServiceStub
    fetcher: fetcher_pb2_grpc.FetcherServiceStub
    channels: tuple[grpc.aio.Channel, ...] = ()

    @classmethod
    def connect(cls, embedder_addr: str, retriever_addr: str, fetcher_addr: str) -> "Peers":
        channels = tuple(aio_channel(a) for a in (embedder_addr, retriever_addr, fetcher_addr))
        return cls(
            embedder_pb2_grpc.EmbedderServiceStub(channels[0]),
            retriever_pb2_grpc.RetrieverServiceStub(channels[1]),
            fetcher_pb2_grpc.FetcherServiceStub(channels[2]),
            channels,
        )

    async def close(self) -> None:
        for channel in self.channels:
            await channel.close()

    async def embed(self, texts: list[str], timeout_s: float) -> np.ndarray:
        """Unit vectors, one row per text, in order."""
        rows = []
        for start in range(0, len(texts), EMBED_CHUNK):
            reply = await self.embedder.Embed(
                embedder_pb2.EmbedRequest(texts=texts[start:start + EMBED_CHUNK]), timeout=timeout_s
            )
            rows.extend(v.values for v in reply.vectors)
        return np.asarray(rows, dtype=np.float32)
