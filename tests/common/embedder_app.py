"""A ServiceApp around any embedder servicer, for tests that need real gRPC servers speaking the
embedder's contract (load balancing, the gateway's embedder pool) without loading a model."""

from __future__ import annotations

from citeweave.embedder.v1 import embedder_pb2, embedder_pb2_grpc

SERVICE = embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"].full_name


class EmbedderApp:
    service_names = (SERVICE,)

    def __init__(self, servicer: embedder_pb2_grpc.EmbedderServiceServicer, name: str = "fake-embedder"):
        self.name = name
        self.servicer = servicer

    def register(self, server) -> None:
        embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(self.servicer, server)

    async def warm_up(self) -> None:
        pass

    async def close(self) -> None:
        pass
