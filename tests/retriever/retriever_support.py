"""Helpers for the retriever tests: real processes, real gRPC, Milvus Lite in temporary dirs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import numpy as np
import pytest

from citeweave.retriever.v1 import retriever_pb2 as pb
from citeweave.retriever.v1 import retriever_pb2_grpc
from services.common.clients import sync_channel
from services.common.launcher import ServiceProcess, free_port

DIM = 16
# No drain: nothing balances load in tests, and the suite starts and stops several processes.
FAST_STOP = {"drain_s": "0", "grace_s": "2"}


@contextmanager
def retriever(store: Path, timeout_s: float = 120, **settings) -> Iterator["Retriever"]:
    """`python -m services.retriever` on `store`; stopped (and its Lite lock freed) on exit."""
    env = {"milvus_uri": str(store), "dimension": str(DIM), **FAST_STOP, **settings}
    process = ServiceProcess(
        name="retriever", port=free_port(), settings=env,
        log_path=store.parent / f"{store.name}.log",
    ).start()
    try:
        process.wait_serving(timeout_s)
        with sync_channel(process.addr) as channel:
            yield Retriever(process, retriever_pb2_grpc.RetrieverServiceStub(channel))
    finally:
        process.stop()


class Retriever:
    def __init__(self, process: ServiceProcess, stub: retriever_pb2_grpc.RetrieverServiceStub):
        self.process = process
        self.stub = stub


def unit(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


def record(paper_id: str, vector, **fields) -> pb.PaperRecord:
    return pb.PaperRecord(paper=pb.Paper(id=paper_id, **fields), vector=list(map(float, vector)))


def upsert(stub, records: list[pb.PaperRecord], batch: int = 500) -> None:
    for start in range(0, len(records), batch):
        stub.Upsert(pb.UpsertRequest(records=records[start:start + batch]), timeout=60)


def rpc_error(call, request) -> grpc.RpcError:
    """The RpcError a call raises (fails the test when it succeeds)."""
    with pytest.raises(grpc.RpcError) as caught:
        call(request, timeout=30)
    return caught.value
