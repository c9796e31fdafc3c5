"""The longlist for a text: embed it, then retriever.Search."""

from __future__ import annotations

from citeweave.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from citeweave.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from services.common.clients import sync_channel

RULES = {
    "mmr": retriever_pb2.SELECTION_RULE_MMR,
    "citegeist-min": retriever_pb2.SELECTION_RULE_CITEGEIST_MIN,
}
MODES = {
    "dense": retriever_pb2.SEARCH_MODE_DENSE,
    "lexical": retriever_pb2.SEARCH_MODE_LEXICAL,
    "hybrid": retriever_pb2.SEARCH_MODE_HYBRID,
}


def search_longlist(
    text: str,
    embedder_addr: str,
    retriever_addr: str,
    breadth: int,
    diversity: float,
    rule: str,
    categories: list[str],
    topics: list[int] = (),
    mode: str = "dense",
) -> retriever_pb2.SearchResponse:
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; choose {', '.join(RULES)}")
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose {', '.join(MODES)}")
    with sync_channel(embedder_addr) as emb_channel, sync_channel(retriever_addr) as ret_channel:
        vector = embedder_pb2_grpc.EmbedderServiceStub(emb_channel).Embed(
            embedder_pb2.EmbedRequest(texts=[text]), timeout=120
        ).vectors[0].values
        return retriever_pb2_grpc.RetrieverServiceStub(ret_channel).Search(
            retriever_pb2.SearchRequest(
                query_vector=vector,
                breadth=breadth,
                diversity=diversity,
                rule=RULES[rule],
                filter=retriever_pb2.SearchFilter(categories=categories, topics=topics),
                mode=MODES[mode],
                query_text=text if mode != "dense" else "",
            ),
            timeout=60,
        )
