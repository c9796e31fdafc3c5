"""The gateway stack shared by the gateway, HTTP, client and browser tests of one module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.gateway.gateway_stack import GatewayStack, running_gateway_stack


@pytest.fixture(scope="module")
def gateway_stack(minilm_embedder, tmp_path_factory) -> Iterator[GatewayStack]:
    """Every service running (keys off, the extractive writer) with the fixture corpus stored.
    Tests must leave it running: the outage tests start their own."""
    with running_gateway_stack(tmp_path_factory.mktemp("gateway"), embedder=minilm_embedder) as stack:
        yield stack
