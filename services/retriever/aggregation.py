"""Several query vectors, one relevance: how a full-paper input (one vector per page) scores a
candidate.

SUM is the default. A related-work section serves the paper as a whole, so a candidate close to
many of its pages is the one to cite; summing pools that evidence. MAX lets a single page decide,
and the maximum of many noisy cosines rises with the number of pages whatever the candidate, so
on a long paper any candidate that happens to match one page (a generic evaluation-metrics page,
a boiler-plate introduction) outranks one related to the whole paper. MAX is offered for inputs
where one section carries the topic. The sum is reported divided by the number of vectors: the
ranking is the sum's, and the value stays on the cosine scale the selection rule's diversity
weight is tuned for.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from citeweave.retriever.v1 import retriever_pb2
from services.common.errors import InvalidArgument
from services.retriever import records
from services.retriever.selection import normalize_rows

MAX_QUERY_VECTORS = 200

_NAMES = {
    retriever_pb2.PAGE_AGGREGATION_SUM: "mean similarity",
    retriever_pb2.PAGE_AGGREGATION_MAX: "max similarity",
}


def aggregation(value: int) -> int:
    if value == retriever_pb2.PAGE_AGGREGATION_UNSPECIFIED:
        return retriever_pb2.PAGE_AGGREGATION_SUM
    if value not in _NAMES:
        raise InvalidArgument(
            f"page aggregation {value} is unknown; use PAGE_AGGREGATION_SUM (1) or "
            "PAGE_AGGREGATION_MAX (2)"
        )
    return value


def relevance_name(how: int, query_count: int) -> str:
    """How selection reasons name the relevance ("mean similarity over 12 pages")."""
    if query_count == 1:
        return "similarity"
    return f"{_NAMES[how]} over {query_count} query vectors"


def query_matrix(
    single: Sequence[float], several: Sequence, dimension: int | None, expected: str
) -> np.ndarray:
    """The request's query vector(s) as unit rows, shape (q, d); INVALID_ARGUMENT when neither or
    both forms are given, or a vector is malformed. dimension None: the first vector's."""
    if single and several:
        raise InvalidArgument("give query_vector or query_vectors, not both")
    if len(several) > MAX_QUERY_VECTORS:
        raise InvalidArgument(
            f"at most {MAX_QUERY_VECTORS} query_vectors per request, got {len(several)}"
        )
    if not several:
        if not single and dimension is None:
            raise InvalidArgument("query_vector is empty (or give query_vectors)")
        dimension = dimension or len(single)
        return normalize_rows(records.check_vector(single, dimension, "query_vector", expected)[None])
    dimension = dimension or len(several[0].values)
    return normalize_rows(np.stack([
        records.check_vector(v.values, dimension, f"query_vectors[{i}]", expected)
        for i, v in enumerate(several)
    ]))


def aggregate(similarities: np.ndarray, how: int) -> np.ndarray:
    """(n, q) cosines of n candidates to q query vectors -> (n,) relevance."""
    if how == retriever_pb2.PAGE_AGGREGATION_MAX:
        return similarities.max(axis=1)
    return similarities.mean(axis=1)
