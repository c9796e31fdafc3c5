"""Sync settings, read from `CITEWEAVE_SYNC_*` and checked at start-up."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from services.common.settings import ServiceSettings, check_host_port, check_host_port_list

class SyncSettings(ServiceSettings):
    model_config = SettingsConfigDict(
        env_prefix="CITEWEAVE_SYNC_", extra="forbid", validate_default=True
    )

    port: int = Field(50055, ge=0, le=65535, description="gRPC port; 0 picks a free one.")
    embedder_addrs: str = Field(
        "127.0.0.1:50051",
        description=(
            "Comma-separated embedder host:port list. Batches go to them round robin, "
            "concurrently, so each added embedder replica adds embedding throughput."
        ),
    )
    retriever_addr: str = Field("127.0.0.1:50052", description="Retriever host:port.")
    batch_size: int = Field(
        128, ge=1, le=4096,
        description="Records per embedding + upsert batch (a request may ask for another).",
    )
    batches_per_embedder: int = Field(
        2, ge=1, le=64,
        description=(
            "Batches in flight per embedder address: 2 keeps an embedder busy while the "
            "previous batch is being upserted. Bounds memory together with batch_size."
        ),
    )
    rpc_timeout_s: float = Field(
        600.0, gt=0, description="Deadline of one Embed, Upsert or Get call."
    )
    rpc_attempts: int = Field(
        5, ge=1, le=20,
        description=(
            "Tries per call when a peer is unavailable, overloaded or times out, with "
            "exponential backoff and jitter; then the sync stops (rerunning it continues)."
        ),
    )
    peer_wait_s: float = Field(
        600.0, gt=0, description="How long warm-up waits for the embedders and the retriever."
    )
    state_dir: Path = Field(
        Path("var/sync"), description="Marker of an unfinished sync (reported as resumed)."
    )
    topic_model_dir: Path = Field(
        Path("var/topics"),
        description="Where `topics fit` saves the BERTopic model and sync loads it from.",
    )
    max_topic_fit_papers: int = Field(
        100_000, ge=100,
        description=(
            "Topic fitting uses at most this many papers (a uniform sample); the rest are "
            "assigned to the fitted topics. Bounds memory and time at arXiv scale."
        ),
    )
    progress_interval_s: float = Field(
        0.5, gt=0, description="Seconds between progress events of a running sync."
    )
    log_interval_s: float = Field(
        10.0, gt=0,
        description="Seconds between the progress log lines of a running sync (service and worker).",
    )
    download_dir: Path = Field(
        Path("var/sync/downloads"),
        description=(
            "Where http(s) sources are downloaded: one file per URL (named from a hash of the "
            "URL), its ETag / Last-Modified beside it for the next conditional GET. Needs room "
            "for the snapshot (~1.3 GB for arXiv's)."
        ),
    )
    download_connect_timeout_s: float = Field(
        30.0, gt=0, description="Seconds to connect to the host of an http(s) source."
    )
    download_read_timeout_s: float = Field(
        120.0, gt=0,
        description=(
            "Seconds an http(s) download may wait for its next bytes (not the whole download, "
            "which takes as long as it takes)."
        ),
    )

    @field_validator("embedder_addrs")
    @classmethod
    def _embedder_addrs(cls, value: str) -> str:
        return check_host_port_list(value, "embedder_addrs")

    @field_validator("retriever_addr")
    @classmethod
    def _retriever_addr(cls, value: str) -> str:
        return check_host_port(value, "retriever_addr")

    @property
    def embedder_addr_list(self) -> list[str]:
        return self.embedder_addrs.split(",")
