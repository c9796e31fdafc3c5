"""Channels to peer services and readiness waits.

Every channel balances round robin over all the addresses its target resolves to. On Kubernetes
a peer behind a headless Service resolves to every pod, so each replica of an autoscaled
embedder gets its share of the calls; with pick_first (gRPC's default) one HTTP/2 connection
would carry every call to one pod however many there are. A target with one address behaves as
before. New pods are found when the channel re-resolves, which a server's max_connection_age
(services/common/settings.py) triggers by closing connections now and then.
"""

from __future__ import annotations

import asyncio
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
LB_POLICY = "round_robin"

CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.lb_policy_name", LB_POLICY),
]


def aio_channel(addr: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(addr, options=CHANNEL_OPTIONS)


def sync_channel(addr: str) -> grpc.Channel:
    return grpc.insecure_channel(addr, options=CHANNEL_OPTIONS)


def is_serving(addr: str, service: str = "", timeout_s: float = 1.0) -> bool:
    with sync_channel(addr) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
        except grpc.RpcError:
            return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def wait_serving(addr: str, timeout_s: float, service: str = "", poll_s: float = 0.25) -> None:
    """Blocks until the health service at addr reports SERVING; TimeoutError otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if is_serving(addr, service):
            return
        time.sleep(poll_s)
    raise TimeoutError(f"{addr} did not report SERVING within {timeout_s:.0f}s")


async def wait_serving_async(addr: str, timeout_s: float, service: str = "") -> None:
    await asyncio.to_thread(wait_serving, addr, timeout_s, service)
