"""Each dependency of the gateway stopped in turn, on a stack of its own: the generator -> the
shortlist still comes back with an error for the text; the fetcher, the retriever, the embedder
-> UNAVAILABLE naming the service."""

from __future__ import annotations

import grpc
import pytest

from citeweave.gateway.v1 import gateway_pb2 as gw
from citeweave.gateway.v1 import gateway_pb2_grpc
from tests.gateway.gateway_stack import QUERY, running_gateway_stack

REQUEST = gw.GenerateRelatedWorkRequest(abstract=QUERY, options=gw.RetrievalOptions(breadth=5))


@pytest.fixture(scope="module")
def outage_stack(tmp_path_factory):
    # Its own embedder: this module stops it.
    with running_gateway_stack(tmp_path_factory.mktemp("outages")) as stack:
        yield stack


def _generate(stack) -> gw.GenerationResult:
    with grpc.insecure_channel(stack.grpc_addr) as channel:
        events = list(gateway_pb2_grpc.GatewayServiceStub(channel).GenerateRelatedWork(
            REQUEST, timeout=120))
    return events[-1].result


def _unavailable(stack) -> str:
    with pytest.raises(grpc.RpcError) as error:
        _generate(stack)
    assert error.value.code() == grpc.StatusCode.UNAVAILABLE
    return error.value.details()


def test_each_dependency_down_in_turn(outage_stack):
    healthy = _generate(outage_stack)
    assert healthy.text and not healthy.generation_error

    outage_stack.stop("generator")
    result = _generate(outage_stack)
    assert not result.text and not result.references
    assert [p.paper.id for p in result.shortlist] == [p.paper.id for p in healthy.shortlist]
    assert len(result.longlist) == 15
    assert result.generation_error.startswith(
        f"the generator ({outage_stack.addr('generator')}) is unavailable")
    assert "shortlist is returned without a written section" in result.generation_error

    for service in ("fetcher", "retriever", "embedder"):
        outage_stack.stop(service)
        details = _unavailable(outage_stack)
        assert details.startswith(f"the {service} ({outage_stack.addr(service)}) is unavailable")
