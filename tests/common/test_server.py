"""The shared bootstrap: health before/after warm-up, error mapping, graceful shutdown."""

from __future__ import annotations

import asyncio
import logging

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from citeweave.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from services.common import errors
from services.common.server import listen, shutdown, start, warm
from services.common.settings import ServiceSettings

SERVICE = "citeweave.embedder.v1.EmbedderService"


class RaisingEmbedder(embedder_pb2_grpc.EmbedderServiceServicer):
    """Raises whatever the request's first text names, to exercise the interceptor."""

    async def Embed(self, request, context):
        kind = request.texts[0]
        if kind == "invalid":
            raise errors.InvalidArgument("texts[0] is empty; give a non-empty string")
        if kind == "busy":
            raise errors.ResourceExhausted("queue full; retry in 1s")
        if kind == "missing":
            raise errors.NotFound("paper 2401.00001 is not stored")
        if kind == "down":
            raise errors.Unavailable("retriever at 127.0.0.1:1 is unavailable")
        if kind == "bug":
            raise ZeroDivisionError("boom")
        return embedder_pb2.EmbedResponse(model_name="test", dimension=1)


class GatedApp:
    name = "test"
    service_names = (SERVICE,)

    def __init__(self) -> None:
        self.warm = asyncio.Event()
        self.closed = False

    def register(self, server) -> None:
        embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(RaisingEmbedder(), server)

    async def warm_up(self) -> None:
        await self.warm.wait()

    async def close(self) -> None:
        self.closed = True


async def _health(channel, service: str = "") -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
    return reply.status


async def test_health_follows_warm_up_and_shutdown() -> None:
    settings = ServiceSettings(drain_s=0.1, grace_s=1)
    app = GatedApp()
    built = await listen(settings, app)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{built.port}") as channel:
        assert await _health(channel) == health_pb2.HealthCheckResponse.NOT_SERVING
        assert await _health(channel, SERVICE) == health_pb2.HealthCheckResponse.NOT_SERVING
        warming = asyncio.create_task(warm(built, app))
        await asyncio.sleep(0.2)
        assert not warming.done()
        assert await _health(channel) == health_pb2.HealthCheckResponse.NOT_SERVING
        app.warm.set()
        await warming
        assert await _health(channel) == health_pb2.HealthCheckResponse.SERVING
        assert await _health(channel, SERVICE) == health_pb2.HealthCheckResponse.SERVING
        stopping = asyncio.create_task(shutdown(built, app, settings))
        await asyncio.sleep(0.05)
        # Draining: still reachable, but no longer advertised as serving.
        assert await _health(channel) == health_pb2.HealthCheckResponse.NOT_SERVING
        await stopping
    assert app.closed


@pytest.fixture
async def served():
    settings = ServiceSettings(drain_s=0, grace_s=1)
    app = GatedApp()
    app.warm.set()
    built = await start(settings, app)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{built.port}")
    yield embedder_pb2_grpc.EmbedderServiceStub(channel)
    await channel.close()
    await shutdown(built, app, settings)


@pytest.mark.parametrize(
    ("kind", "code", "fragment"),
    [
        ("invalid", grpc.StatusCode.INVALID_ARGUMENT, "non-empty string"),
        ("busy", grpc.StatusCode.RESOURCE_EXHAUSTED, "retry"),
        ("missing", grpc.StatusCode.NOT_FOUND, "2401.00001"),
        ("down", grpc.StatusCode.UNAVAILABLE, "127.0.0.1:1"),
        ("bug", grpc.StatusCode.INTERNAL, "ZeroDivisionError"),
    ],
)
async def test_domain_errors_map_to_status_codes(served, kind, code, fragment, caplog) -> None:
    with caplog.at_level(logging.INFO):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await served.Embed(embedder_pb2.EmbedRequest(texts=[kind]), timeout=5)
    assert raised.value.code() == code
    assert fragment in raised.value.details()
    if kind == "bug":
        assert any("unexpected error" in r.message and r.exc_info for r in caplog.records)


async def test_ok_call_passes_through(served) -> None:
    reply = await served.Embed(embedder_pb2.EmbedRequest(texts=["fine"]), timeout=5)
    assert reply.model_name == "test"


def test_settings_reject_unknown_and_badly_typed_values(monkeypatch) -> None:
    with pytest.raises(ValueError, match="port"):
        ServiceSettings(port="not-a-port")
    with pytest.raises(ValueError, match="drain_s"):
        ServiceSettings(drain_s=-1)
