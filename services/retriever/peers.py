"""The embedder as the source of truth for the vector dimension."""

from __future__ import annotations

import asyncio
import logging

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from citeweave.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from services.common.clients import aio_channel

log = logging.getLogger("citeweave.retriever.peers")


async def embedder_dimension(addr: str, wait_s: float, poll_s: float = 0.5) -> int:
    """Waits (cancellably) until the embedder reports SERVING, then asks for its dimension.

    The embedder may still be loading its model when the retriever starts; polling with asyncio
    keeps a SIGTERM during warm-up effective instead of blocking in a thread.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    last_error = "not SERVING yet"
    async with aio_channel(addr) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        embedder = embedder_pb2_grpc.EmbedderServiceStub(channel)
        while True:
            try:
                reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=2.0)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    info = await embedder.GetModelInfo(
                        embedder_pb2.GetModelInfoRequest(), timeout=10.0
                    )
                    if info.dimension <= 0:
                        raise RuntimeError(f"embedder at {addr} reports dimension {info.dimension}")
                    log.info(
                        "embedder ready",
                        extra={"addr": addr, "model": info.model_name, "dimension": info.dimension},
                    )
                    return int(info.dimension)
            except grpc.aio.AioRpcError as exc:
                last_error = f"{exc.code().name}: {exc.details()}"
            if loop.time() >= deadline:
                raise RuntimeError(
                    f"embedder at {addr} did not report SERVING within {wait_s:.0f}s "
                    f"({last_error}); the retriever needs it to know the vector dimension"
                )
            await asyncio.sleep(poll_s)
