"""Fetcher settings, read from `CITEWEAVE_FETCHER_*` and checked at start-up."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from services.common.settings import ServiceSettings

DEFAULT_USER_AGENT = "citeweave-fetcher/0.1 (related-work writer)"


def default_cache_dir() -> Path:
    """<CITEWEAVE_CACHE_DIR or ~/.cache/citeweave>/pdfs, the embedder's cache-dir convention."""
    root = Path(os.environ.get("CITEWEAVE_CACHE_DIR", Path.home() / ".cache" / "citeweave"))
    return root / "pdfs"


def _http_url(value: str, name: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"{name} must be an http:// or https:// URL, got {value!r}")
    return value


class FetcherSettings(ServiceSettings):
    model_config = SettingsConfigDict(
        env_prefix="CITEWEAVE_FETCHER_", extra="forbid", validate_default=True
    )

    port: int = Field(50053, ge=0, le=65535, description="gRPC port; 0 picks a free one.")
    arxiv_api_url: str = Field(
        "https://export.arxiv.org/api/query?{}",
        description="arXiv API query URL with {} where the query string goes (the arxiv "
        "package's query_url_format); point it at a mirror or a local look-alike.",
    )
    arxiv_delay_s: float = Field(
        3.0,
        ge=0,
        le=60,
        description="Least seconds between two arXiv API requests (arXiv's terms of use ask for "
        "3). Concurrent lookups are batched into one request, so this bounds requests, not "
        "papers.",
    )
    arxiv_retries: int = Field(
        2, ge=0, le=10, description="Retries of a failed arXiv API request (HTTP error, "
        "connection error), each after arxiv_delay_s."
    )
    metadata_batch_window_ms: float = Field(
        50.0,
        ge=0,
        le=5000,
        description="How long the first metadata lookup waits for others to join its arXiv API "
        "request (up to 100 ids per request).",
    )
    metadata_timeout_s: float = Field(
        30.0,
        gt=0,
        le=600,
        description="Longest wait for arXiv metadata (also each API request's read timeout); "
        "then UNAVAILABLE, suggesting skip_metadata.",
    )
    pdf_url_template: str = Field(
        "https://arxiv.org/pdf/{id}",
        description="Where PDFs are downloaded from; {id} becomes the arXiv id (with its version "
        "when known). Unused when pdf_dir is set.",
    )
    pdf_dir: Path | None = Field(
        None,
        description="Local directory of PDFs named <id>.pdf ('/' in old-style ids replaced by "
        "'_'), read instead of downloading: for institutions with their own copies and offline "
        "use. Ids that are not arXiv ids are then accepted too.",
    )
    cache_dir: Path = Field(
        default_factory=default_cache_dir,
        description="On-disk cache of downloaded PDFs and arXiv records (SQLite index + "
        "content-addressed blobs); replicas may share it. Defaults to "
        "<CITEWEAVE_CACHE_DIR or ~/.cache/citeweave>/pdfs.",
    )
    cache_max_mb: int = Field(
        2048,
        ge=0,
        description="Size bound of the PDF cache in MiB; least recently used PDFs are evicted "
        "beyond it. 0 disables PDF caching.",
    )
    unversioned_ttl_s: float = Field(
        7 * 24 * 3600.0,
        ge=0,
        description="Cache lifetime of a PDF or record fetched by an id without version "
        "(its latest version can change); versioned ids never expire.",
    )
    download_timeout_s: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="Longest one PDF download attempt may take, first byte to last; never longer "
        "than the caller's gRPC deadline allows.",
    )
    connect_timeout_s: float = Field(
        10.0, gt=0, le=600, description="Connect timeout of PDF downloads and arXiv API requests."
    )
    download_retries: int = Field(
        2,
        ge=0,
        le=10,
        description="Retries of a PDF download after HTTP 429/5xx or a connection error, with "
        "exponential backoff and jitter (Retry-After is honoured when at most "
        "retry_after_max_s).",
    )
    retry_backoff_s: float = Field(
        0.5, ge=0, le=60, description="First retry delay of a PDF download; doubles per retry."
    )
    retry_after_max_s: float = Field(
        10.0,
        ge=0,
        le=600,
        description="Longest Retry-After a download waits for; a longer one gives up at once "
        "(UNAVAILABLE fallback).",
    )
    max_pdf_mb: float = Field(
        50.0,
        gt=0,
        description="Largest PDF downloaded, read or accepted by ExtractPdf, in MiB; must be "
        "below max_message_mb so an upload fits a gRPC message.",
    )
    max_pages: int = Field(
        300, ge=1, le=100000, description="PDFs with more pages are not extracted (TOO_MANY_PAGES)."
    )
    extraction_timeout_s: float = Field(
        30.0, gt=0, le=3600, description="Time limit of one PDF's text extraction."
    )
    extract_workers: int = Field(
        2, ge=1, le=64, description="Worker processes extracting PDF text in parallel."
    )
    max_concurrent_downloads: int = Field(
        8, ge=1, le=256, description="PDF downloads in flight at once (further ones wait)."
    )
    user_agent: str = Field(
        DEFAULT_USER_AGENT,
        min_length=1,
        description="User-Agent of PDF downloads and arXiv API requests; add a contact address "
        "when running against arxiv.org at volume.",
    )

    @field_validator("arxiv_api_url")
    @classmethod
    def _api_url(cls, value: str) -> str:
        _http_url(value, "arxiv_api_url")
        try:
            filled = value.format("q")
        except (IndexError, KeyError, ValueError):
            filled = None
        if value.count("{}") != 1 or filled is None:
            raise ValueError(
                "arxiv_api_url must contain {} exactly once, where the query goes, and no other "
                "braces, e.g. https://export.arxiv.org/api/query?{}"
            )
        return value

    @field_validator("pdf_url_template")
    @classmethod
    def _pdf_template(cls, value: str) -> str:
        _http_url(value, "pdf_url_template")
        if "{id}" not in value:
            raise ValueError(
                "pdf_url_template must contain {id}, where the arXiv id goes, e.g. "
                "https://arxiv.org/pdf/{id}"
            )
        return value

    @field_validator("pdf_dir", mode="before")
    @classmethod
    def _pdf_dir_unset(cls, value):
        return None if value == "" else value

    @field_validator("pdf_dir")
    @classmethod
    def _pdf_dir(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_dir():
            raise ValueError(f"pdf_dir {str(value)!r} is not a directory")
        # Absolute once here, so file:// URLs need no file-system call in a request.
        return value.resolve() if value is not None else None

    @model_validator(mode="after")
    def _upload_fits_message(self) -> "FetcherSettings":
        # ExtractPdf carries the PDF in one gRPC message, which also holds the filename.
        if self.max_pdf_mb >= self.max_message_mb:
            raise ValueError(
                f"CITEWEAVE_FETCHER_MAX_PDF_MB ({self.max_pdf_mb:g}) must be below "
                f"CITEWEAVE_FETCHER_MAX_MESSAGE_MB ({self.max_message_mb}), so an ExtractPdf "
                "upload fits a gRPC message"
            )
        return self

    @property
    def max_pdf_bytes(self) -> int:
        return int(self.max_pdf_mb * 1024 * 1024)
