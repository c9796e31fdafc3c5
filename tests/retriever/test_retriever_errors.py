"""Every bad input gets INVALID_ARGUMENT with a message a person can act on."""

from __future__ import annotations

import math

import grpc
import pytest

from citeweave.retriever.v1 import retriever_pb2 as pb
from retriever_support import DIM, record, rpc_error

GOOD = [1.0] + [0.0] * (DIM - 1)
INVALID = grpc.StatusCode.INVALID_ARGUMENT


def _search(**fields) -> pb.SearchRequest:
    return pb.SearchRequest(**{"query_vector": GOOD, **fields})


@pytest.mark.parametrize(
    "request_,message",
    [
        (_search(query_vector=[1.0] * (DIM + 1)),
         f"query_vector has {DIM + 1} values; the store's dimension is {DIM}"),
        (_search(query_vector=[]), f"query_vector has 0 values; the store's dimension is {DIM}"),
        (_search(query_vector=[math.nan] + GOOD[1:]), "query_vector contains NaN or infinite"),
        (_search(query_vector=[math.inf] + GOOD[1:]), "query_vector contains NaN or infinite"),
        (_search(query_vector=[0.0] * DIM), "query_vector is all zeros"),
        (_search(breadth=4), "breadth must be between 5 and 20, got 4"),
        (_search(breadth=21), "breadth must be between 5 and 20, got 21"),
        (_search(diversity=-0.1), "diversity must be between 0 and 1, got -0.1"),
        (_search(diversity=1.5), "diversity must be between 0 and 1, got 1.5"),
        (_search(diversity=math.nan), "diversity must be between 0 and 1, got nan"),
        (_search(rule=7), "rule 7 is unknown; use SELECTION_RULE_MMR"),
        (_search(filter=pb.SearchFilter(date_from="2020-13-01")),
         "filter.date_from must be an ISO date YYYY-MM-DD, got '2020-13-01'"),
        (_search(filter=pb.SearchFilter(date_to="2020")),
         "filter.date_to must be an ISO date YYYY-MM-DD, got '2020'"),
        (_search(filter=pb.SearchFilter(date_from="2021-01-01", date_to="2020-01-01")),
         "filter.date_from 2021-01-01 is after filter.date_to 2020-01-01"),
    ],
)
def test_search_rejects(shared_retriever, request_, message):
    error = rpc_error(shared_retriever.stub.Search, request_)
    assert error.code() == INVALID
    assert message in error.details()


def _passages(**fields) -> pb.SelectPassagesRequest:
    base = {
        "query_vector": [1.0, 0.0],
        "candidates": [pb.CandidateVector(values=[1.0, 0.0]), pb.CandidateVector(values=[0.0, 1.0])],
        "k": 2,
    }
    return pb.SelectPassagesRequest(**{**base, **fields})


@pytest.mark.parametrize(
    "request_,message",
    [
        (_passages(k=0), "k (depth) must be between 1 and 5, got 0"),
        (_passages(k=6), "k (depth) must be between 1 and 5, got 6"),
        (_passages(diversity=1.5), "diversity must be between 0 and 1, got 1.5"),
        (_passages(query_vector=[]), "query_vector is empty"),
        (_passages(candidates=[pb.CandidateVector(values=[1.0, 0.0]),
                               pb.CandidateVector(values=[1.0, 0.0, 0.0])]),
         "candidates[1] has 3 values; query_vector has 2"),
        (_passages(candidates=[pb.CandidateVector(values=[math.nan, 0.0])]),
         "candidates[0] contains NaN or infinite values"),
    ],
)
def test_select_passages_rejects(shared_retriever, request_, message):
    error = rpc_error(shared_retriever.stub.SelectPassages, request_)
    assert error.code() == INVALID
    assert message in error.details()


@pytest.mark.parametrize(
    "records,message",
    [
        ([record("", GOOD)], "every record needs a non-empty paper.id"),
        ([record("   ", GOOD)], "every record needs a non-empty paper.id"),
        ([record("bad-dim", [1.0] * (DIM - 1))],
         f"record 'bad-dim': vector has {DIM - 1} values; the store's dimension is {DIM}"),
        ([record("bad-nan", [math.nan] * DIM)], "record 'bad-nan': vector contains NaN"),
        ([record("bad-zero", [0.0] * DIM)], "record 'bad-zero': vector is all zeros"),
        ([record("bad-sha", GOOD, sha256="xyz")], "record 'bad-sha': sha256 must be 64 hex"),
        ([record("bad-date", GOOD, date="15.06.2020")],
         "record 'bad-date': date must be an ISO date YYYY-MM-DD"),
        ([record("x" * 200, GOOD)], "id is longer than 128 bytes"),
        ([record("bad\nid", GOOD)], "id contains control characters"),
        ([record("twice", GOOD), record("twice", GOOD)],
         "record 'twice' appears more than once in the request"),
        # A bad record anywhere rejects the whole batch, naming the offender.
        ([record("fine-1", GOOD), record("bad-late", [1.0])], "record 'bad-late': vector has 1"),
    ],
)
def test_upsert_rejects_and_stores_nothing(shared_retriever, records, message):
    before = shared_retriever.stub.Stats(pb.StatsRequest()).paper_count
    error = rpc_error(shared_retriever.stub.Upsert, pb.UpsertRequest(records=records))
    assert error.code() == INVALID
    assert message in error.details()
    assert shared_retriever.stub.Stats(pb.StatsRequest()).paper_count == before


def test_empty_ids_and_page_size(shared_retriever):
    stub = shared_retriever.stub
    for call, request in [
        (stub.Get, pb.GetRequest(ids=["r001", ""])),
        (stub.Delete, pb.DeleteRequest(ids=[""])),
    ]:
        error = rpc_error(call, request)
        assert error.code() == INVALID
        assert "ids must be non-empty strings" in error.details()
    error = rpc_error(lambda r, timeout: list(stub.ListHashes(r, timeout=timeout)),
                      pb.ListHashesRequest(page_size=20000))
    assert error.code() == INVALID
    assert "page_size must be between 1 and 10000, got 20000" in error.details()
