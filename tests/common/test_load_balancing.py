"""Channels from services/common/clients.py balance round robin over every address of their
target, and servers with max_connection_age send clients away now and then without failing a
call: together they let an autoscaled embedder behind a headless Service share its load.

Observed at the servers (which server answered, over which client connection), never at the
client."""

from __future__ import annotations

import asyncio
import collections

import grpc
import pytest

from citeweave.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from services.common.clients import aio_channel
from services.common.roundrobin import RoundRobin
from tests.common.embedder_app import EmbedderApp
from services.common.server import grpc_options, shutdown, start
from services.common.settings import ServiceSettings



class RecordingEmbedder(embedder_pb2_grpc.EmbedderServiceServicer):
    """Answers with its own name; records each call's client connection (peer address:port).
    A text "sleep:S" holds the call S seconds."""

    def __init__(self, name: str):
        self.name = name
        self.peers: list[str] = []

    async def Embed(self, request, context):  # noqa: N802
        self.peers.append(context.peer())
        for text in request.texts:
            if text.startswith("sleep:"):
                await asyncio.sleep(float(text.split(":")[1]))
        return embedder_pb2.EmbedResponse(model_name=self.name)



@pytest.fixture
async def serve():
    """serve(name, **settings) -> (port, RecordingEmbedder); every server stops after the test."""
    running = []

    async def make(name: str, **settings):
        settings = ServiceSettings(drain_s=0, grace_s=1, **settings)
        app = EmbedderApp(RecordingEmbedder(name), name)
        built = await start(settings, app)
        running.append((built, app, settings))
        return built.port, app.servicer

    yield make
    for built, app, settings in running:
        await shutdown(built, app, settings)


async def test_round_robin_channel_spreads_calls_over_two_servers(serve) -> None:
    (port_a, a), (port_b, b) = await serve("a"), await serve("b")
    # One target, two addresses: what a headless Service's DNS name resolves to.
    target = f"ipv4:127.0.0.1:{port_a},127.0.0.1:{port_b}"

    async def answers(channel) -> collections.Counter:
        stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        await channel.channel_ready()
        names = collections.Counter()
        for _ in range(40):
            reply = await stub.Embed(embedder_pb2.EmbedRequest(texts=["x"]), timeout=5)
            names[reply.model_name] += 1
        return names

    async with aio_channel(target) as channel:
        balanced = await answers(channel)
    assert balanced["a"] >= 15 and balanced["b"] >= 15, balanced
    assert (len(a.peers), len(b.peers)) == (balanced["a"], balanced["b"])

    # The control: gRPC's default (pick_first) pins every call to one server, which is what the
    # channels did before and what a ClusterIP Service does to an autoscaled embedder.
    async with grpc.aio.insecure_channel(target) as channel:
        pinned = await answers(channel)
    assert sorted(pinned.values()) == [40], pinned


def test_grpc_options_pass_the_connection_age_only_when_set() -> None:
    assert not any("connection_age" in key for key, _ in grpc_options(ServiceSettings()))
    options = dict(grpc_options(ServiceSettings(max_connection_age_s=0.25,
                                                max_connection_age_grace_s=30)))
    assert options["grpc.max_connection_age_ms"] == 250
    assert options["grpc.max_connection_age_grace_ms"] == 30_000
    with pytest.raises(ValueError, match="max_connection_age_s"):
        ServiceSettings(max_connection_age_s=-1)


async def test_max_connection_age_reconnects_without_failing_calls(serve) -> None:
    port, server = await serve("aged", max_connection_age_s=0.2, max_connection_age_grace_s=5)
    async with aio_channel(f"127.0.0.1:{port}") as channel:
        stub = embedder_pb2_grpc.EmbedderServiceStub(channel)

        async def caller(n: int) -> int:
            done = 0
            for _ in range(n):
                await stub.Embed(embedder_pb2.EmbedRequest(texts=["x"]), timeout=5)
                done += 1
                await asyncio.sleep(0.01)
            return done

        # A call much longer than the connection's age: it finishes within the grace.
        slow = stub.Embed(embedder_pb2.EmbedRequest(texts=["sleep:1.0"]), timeout=10)
        results = await asyncio.gather(slow, *(caller(60) for _ in range(4)))
    assert list(results[1:]) == [60, 60, 60, 60]
    assert results[0].model_name == "aged"
    # The server saw the client come back over new connections (a new source port each time):
    # without the age the 241 calls would share one.
    assert len(set(server.peers)) >= 4, collections.Counter(server.peers)


def test_round_robin_takes_consecutive_turns() -> None:
    turns = RoundRobin(["a", "b", "c"])
    assert [turns.next() for _ in range(4)] == ["a", "b", "c", "a"]
    assert turns.take(2) == ["b", "c"]
    assert turns.take(4) == ["a", "b", "c", "a"]
    assert turns.next() == "b"
    with pytest.raises(ValueError):
        RoundRobin([])


async def test_a_call_outliving_age_and_grace_is_cut(serve) -> None:
    """Why the grace must exceed the longest stream: past it the server drops the call."""
    port, _ = await serve("short grace", max_connection_age_s=0.2, max_connection_age_grace_s=0.1)
    async with aio_channel(f"127.0.0.1:{port}") as channel:
        stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as cut:
            await stub.Embed(embedder_pb2.EmbedRequest(texts=["sleep:2"]), timeout=10)
    assert cut.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "max connection age" in cut.value.details()
