"""Retriever settings, from `CITEWEAVE_RETRIEVER_*` environment variables."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from services.common.settings import ServiceSettings, check_host_port

_SERVER_URI = re.compile(r"^(https?|tcp)://", re.IGNORECASE)


def is_server_uri(uri: str) -> bool:
    return bool(_SERVER_URI.match(uri))


class RetrieverSettings(ServiceSettings):
    model_config = SettingsConfigDict(
        env_prefix="CITEWEAVE_RETRIEVER_", extra="forbid", validate_default=True
    )

    port: int = Field(50052, ge=0, le=65535, description="gRPC port; 0 picks a free one.")
    milvus_uri: str = Field(
        "var/store/citeweave.db",
        description=(
            "Vector store. A path ending in .db is a Milvus Lite directory opened in-process "
            "(only one process may open it); http://host:19530 is a Milvus server."
        ),
    )
    milvus_token: str | None = Field(
        None, description="Milvus server token ('user:password' or an API key); unused for Lite."
    )
    collection: str = Field(
        "papers", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,254}$", description="Collection name."
    )
    dimension: int = Field(
        768,
        ge=2,
        le=32768,
        description=(
            "Vector dimension used to create the collection and check requests when "
            "embedder_addr is not set; with embedder_addr the embedder's model decides."
        ),
    )
    embedder_addr: str | None = Field(
        None,
        description=(
            "Embedder host:port. When set, warm-up waits for it and takes the dimension from "
            "its GetModelInfo, so the collection always matches the model."
        ),
    )
    embedder_wait_s: float = Field(
        600.0, gt=0, description="How long warm-up waits for the embedder to report SERVING."
    )
    hnsw_m: int = Field(16, ge=2, le=2048, description="HNSW M (graph degree) for a new index.")
    hnsw_ef_construction: int = Field(
        200, ge=8, le=4096, description="HNSW efConstruction for a new index."
    )
    search_ef: int = Field(
        128,
        ge=1,
        le=32768,
        description="HNSW ef at query time; raised to the number of candidates when smaller.",
    )

    lexical_index: bool = Field(
        True,
        description="Keep a BM25 index of titles and abstracts (bm25s) for the lexical and "
        "hybrid search modes. It lives in memory (roughly 1 GB per million papers) and is "
        "rebuilt from the store after writes; false switches both modes off.",
    )
    write_settle_delay_s: float = Field(
        2.0,
        ge=0,
        le=3600,
        description="Quiet time after the last write before Milvus Lite is flushed and the "
        "lexical index rebuilt, so a sync's stream of upserts causes one rebuild, not one per "
        "batch.",
    )
    lexical_refresh_interval_s: float = Field(
        300.0,
        ge=0,
        description="With a Milvus server, also rebuild the lexical index this often to pick up writes made "
        "through other retriever replicas; 0 = only after this replica's writes.",
    )
    fusion: Literal["rrf", "weighted"] = Field(
        "weighted",
        description="Default fusion of the hybrid mode: reciprocal-rank fusion or a weighted "
        "sum of min-max scaled cosine and BM25 (see docs/evaluation.md for the measurement).",
    )
    lexical_weight: float = Field(
        0.3,
        gt=0,
        le=1,
        description="Default BM25 weight of the weighted fusion (cosine gets 1 - weight).",
    )

    @field_validator("milvus_uri")
    @classmethod
    def _uri(cls, value: str) -> str:
        if is_server_uri(value):
            return value
        if not value.endswith(".db"):
            raise ValueError(
                "a Milvus Lite store is a path ending in .db (e.g. var/store/citeweave.db); "
                "a Milvus server is http://host:19530"
            )
        return value

    @field_validator("embedder_addr")
    @classmethod
    def _addr(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        return check_host_port(value, "embedder_addr")
