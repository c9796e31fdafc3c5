"""The gateway's Embed calls over several embedder replicas (CITEWEAVE_GATEWAY_EMBEDDER_ADDRS):
chunks go round robin and run at once, rows come back in order, a replica that is down leaves
its chunks to the others, and an outage names what is down. In-process fake embedders that
record what each one received."""

from __future__ import annotations

import asyncio

import grpc
import numpy as np
import pytest

from citeweave.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from tests.common.embedder_app import EmbedderApp
from services.common.server import shutdown, start
from services.common.settings import ServiceSettings
from services.gateway.core import Gateway
from services.gateway.peers import EMBED_CHUNK, EmbedderCallError, Peers
from services.gateway.settings import GatewaySettings



class Fake(embedder_pb2_grpc.EmbedderServiceServicer):
    """Embeds the text "7" as [7, 0]; holds each call 0.2 s and counts calls in flight over
    every fake (`shared`), so concurrency across replicas shows."""

    def __init__(self, shared: dict):
        self.shared = shared
        self.received: list[list[str]] = []

    async def Embed(self, request, context):  # noqa: N802
        self.received.append(list(request.texts))
        self.shared["now"] += 1
        self.shared["most"] = max(self.shared["most"], self.shared["now"])
        try:
            await asyncio.sleep(0.2)
        finally:
            self.shared["now"] -= 1
        return embedder_pb2.EmbedResponse(
            vectors=[embedder_pb2.Vector(values=[float(t), 0.0]) for t in request.texts])



@pytest.fixture
async def fakes():
    """Two fake embedders: ([addr, addr], [Fake, Fake], stop(i)), stopped after the test."""
    shared = {"now": 0, "most": 0}
    settings = ServiceSettings(drain_s=0, grace_s=0)
    servers = []
    for _ in range(2):
        app = EmbedderApp(Fake(shared))
        servers.append((await start(settings, app), app))

    async def stop(i: int) -> None:
        built, app = servers[i]
        await shutdown(built, app, settings)

    yield ([f"127.0.0.1:{built.port}" for built, _ in servers],
           [app.servicer for _, app in servers], shared, stop)
    for i in range(2):
        await stop(i)


async def test_one_requests_pages_are_split_over_both_replicas_at_once(fakes) -> None:
    addrs, (a, b), shared, _ = fakes
    peers = Peers.connect(",".join(addrs), addrs[0], addrs[0])
    try:
        texts = [str(i) for i in range(30)]
        vectors = await peers.embed(texts, timeout_s=10)
        assert vectors.shape == (30, 2) and vectors.dtype == np.float32
        assert vectors[:, 0].tolist() == list(range(30)), "rows come back in the texts' order"
        # 30 pages, two replicas: one chunk of 15 each, both in flight together.
        assert sorted(len(c) for c in a.received + b.received) == [15, 15]
        assert len(a.received) == len(b.received) == 1
        assert shared["most"] == 2

        # Single texts (abstracts) alternate.
        for i in range(4):
            await peers.embed([str(i)], timeout_s=10)
        assert len(a.received) == len(b.received) == 3

        # Many pages: chunks stay within EMBED_CHUNK and both replicas get half the texts.
        many = [str(i) for i in range(4 * EMBED_CHUNK + 8)]
        vectors = await peers.embed(many, timeout_s=10)
        assert vectors[:, 0].tolist() == list(range(len(many)))
        sizes = [len(c) for c in a.received[3:] + b.received[3:]]
        assert max(sizes) <= EMBED_CHUNK and sum(sizes) == len(many)
        assert sum(len(c) for c in a.received[3:]) == sum(len(c) for c in b.received[3:])
        assert shared["most"] <= 4, "at most two chunks in flight per replica"
        assert (await peers.embed([], timeout_s=10)).size == 0
    finally:
        await peers.close()


async def test_a_replica_down_leaves_its_chunks_to_the_other_and_an_outage_names_it(fakes):
    addrs, (a, b), _, stop = fakes
    await stop(1)
    peers = Peers.connect(addrs, addrs[0], addrs[0])
    try:
        vectors = await peers.embed([str(i) for i in range(10)], timeout_s=5)
        assert vectors[:, 0].tolist() == list(range(10))
        assert [len(c) for c in a.received] == [5, 5], "both chunks went to the live replica"
        assert not b.received

        await stop(0)
        with pytest.raises(EmbedderCallError) as failed:
            await peers.embed(["1"], timeout_s=5)
    finally:
        await peers.close()
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
    # Two chunks took two turns, so the first replica's turn came again: tried first, then
    # the second.
    assert failed.value.addr == f"{addrs[0]}, {addrs[1]}"

    # The gateway's message, as a client reads it, names the replicas tried; with one
    # embedder that is its address, as before.
    gateway = Gateway(GatewaySettings(embedder_addrs=",".join(addrs), http_port=0))
    try:
        error = gateway._downstream_error("embedder", failed.value)
        one = gateway._downstream_error("embedder", EmbedderCallError(addrs[0], failed.value))
    finally:
        await gateway.close()
    assert str(error).startswith(f"the embedder ({addrs[0]}, {addrs[1]}) is unavailable")
    assert str(one).startswith(f"the embedder ({addrs[0]}) is unavailable")


def test_embedder_addrs_setting() -> None:
    settings = GatewaySettings(embedder_addrs=" 127.0.0.1:1, embedder-2:50051 ,")
    assert settings.embedder_addr_list == ["127.0.0.1:1", "embedder-2:50051"]
    for bad in ("", "127.0.0.1", "a:1,b", "http://a:1"):
        with pytest.raises(ValueError, match="embedder_addrs"):
            GatewaySettings(embedder_addrs=bad)


def test_the_old_variable_name_is_refused(monkeypatch) -> None:
    monkeypatch.setenv("CITEWEAVE_GATEWAY_EMBEDDER_ADDR", "embedder:50051")
    with pytest.raises(ValueError, match="CITEWEAVE_GATEWAY_EMBEDDER_ADDRS"):
        GatewaySettings()

