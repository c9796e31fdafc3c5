"""Gateway settings, read from `CITEWEAVE_GATEWAY_*` and checked at start-up."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from services.common.settings import ServiceSettings, check_host_port, check_host_port_list


class GatewaySettings(ServiceSettings):
    model_config = SettingsConfigDict(
        env_prefix="CITEWEAVE_GATEWAY_", extra="forbid", validate_default=True
    )

    port: int = Field(50050, ge=0, le=65535, description="gRPC port; 0 picks a free one.")
    http_port: int = Field(
        8080, ge=0, le=65535,
        description="Port of the web page and the JSON HTTP API; 0 picks a free one.",
    )
    embedder_addrs: str = Field(
        "127.0.0.1:50051",
        description="Comma-separated embedder host:port list, replicas serving one model. "
        "Embed calls go to them round robin, chunk by chunk, so the replicas share even one "
        "request's pages. On Kubernetes give one headless Service name: it resolves to every "
        "pod and the channel balances over them.",
    )
    retriever_addr: str = Field("127.0.0.1:50052", description="Retriever host:port.")
    fetcher_addr: str = Field("127.0.0.1:50053", description="Fetcher host:port.")
    generator_addr: str = Field("127.0.0.1:50054", description="Generator host:port.")

    api_keys_file: Path | None = Field(
        None,
        description="JSON file of API keys (a mounted secret): {\"KEY\": {\"tenant\": NAME, "
        "\"requests_per_minute\": N, \"max_concurrent\": N}, ...}; the limits are optional and "
        "default to the settings below. Unset: no keys needed (local use).",
    )
    requests_per_minute: float = Field(
        30.0, gt=0, description="Per API key (per client address when keys are off): requests "
        "started per minute, as a token bucket that allows this many in a burst.",
    )
    max_concurrent_per_key: int = Field(
        2, ge=1, le=1000, description="Per API key: requests in flight at once."
    )
    max_concurrent: int = Field(
        16, ge=1, le=10000, description="Requests in flight at once over all callers."
    )
    max_abstract_chars: int = Field(
        6000, ge=100, le=100_000, description="Longest abstract accepted."
    )
    max_question_chars: int = Field(2000, ge=10, le=100_000, description="Longest question.")
    max_pdf_mb: float = Field(20.0, gt=0, le=500, description="Largest PDF upload, in MiB.")
    max_pdf_pages: int = Field(
        60, ge=1, le=2000, description="PDFs with more pages are refused (before extraction)."
    )
    default_backend: str = Field(
        "", description="Generator backend when a request names none: empty lets the "
        "generator decide (its CITEWEAVE_GENERATOR_BACKEND), or extractive / openai.",
    )
    allow_backend_choice: bool = Field(
        True, description="Whether a request may name the generator backend; false pins "
        "every request to default_backend (e.g. to keep a shared LLM budget).",
    )
    request_timeout_s: float = Field(
        600.0, gt=0, description="Deadline of a whole request when the client sets none (a "
        "client's shorter deadline wins); every downstream call gets what is left.",
    )
    fetch_concurrency: int = Field(16, ge=1, le=256, description="Papers fetched at once.")
    summary_concurrency: int = Field(
        8, ge=1, le=256, description="Summaries requested at once (the generator has its own cap).",
    )
    tls_cert_file: Path | None = Field(
        None, description="PEM certificate chain: with tls_key_file, gRPC and HTTP serve TLS.",
    )
    tls_key_file: Path | None = Field(None, description="PEM private key of tls_cert_file.")

    @field_validator("embedder_addrs")
    @classmethod
    def _addrs(cls, value: str, info) -> str:
        return check_host_port_list(value, info.field_name)

    @field_validator("retriever_addr", "fetcher_addr", "generator_addr")
    @classmethod
    def _addr(cls, value: str, info) -> str:
        return check_host_port(value, info.field_name)

    @field_validator("default_backend")
    @classmethod
    def _backend(cls, value: str) -> str:
        if value not in ("", "extractive", "openai"):
            raise ValueError("default_backend must be empty, extractive or openai")
        return value

    @field_validator("api_keys_file", "tls_cert_file", "tls_key_file")
    @classmethod
    def _exists(cls, value: Path | None, info) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"{info.field_name} {value} is not a file")
        return value

    @model_validator(mode="after")
    def _renamed(self) -> "GatewaySettings":
        # pydantic-settings ignores variables of no field: the old name would silently leave the
        # gateway on the default embedder address.
        if os.environ.get("CITEWEAVE_GATEWAY_EMBEDDER_ADDR"):
            raise ValueError("CITEWEAVE_GATEWAY_EMBEDDER_ADDR is now "
                             "CITEWEAVE_GATEWAY_EMBEDDER_ADDRS (a comma-separated host:port "
                             "list): rename it")
        return self

    @model_validator(mode="after")
    def _tls_pair(self) -> "GatewaySettings":
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file go together: set both or neither")
        return self

    @property
    def embedder_addr_list(self) -> list[str]:
        return self.embedder_addrs.split(",")

    @property
    def max_pdf_bytes(self) -> int:
        return int(self.max_pdf_mb * 1024 * 1024)
