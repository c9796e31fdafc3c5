"""Prometheus metrics of the fetcher, served on `metrics_port` by the common bootstrap."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

_SECONDS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)

FETCHES = Counter(
    "citeweave_fetcher_fetches",
    "FetchPaper calls answered, by outcome: full_text, or the fallback cause (not_found, "
    "timeout, unavailable, not_pdf, encrypted, too_large, too_many_pages, no_text, unreadable).",
    ["outcome"],
)
FETCHES_IN_FLIGHT = Gauge("citeweave_fetcher_fetches_in_flight", "FetchPaper calls in progress.")
CACHE_HITS = Counter("citeweave_fetcher_cache_hits", "PDFs served from the disk cache.")
CACHE_MISSES = Counter(
    "citeweave_fetcher_cache_misses", "PDF cache lookups that found nothing usable."
)
SHARED_DOWNLOADS = Counter(
    "citeweave_fetcher_shared_downloads",
    "FetchPaper calls that joined a download of the same PDF already in flight.",
)
DOWNLOADED_BYTES = Counter(
    "citeweave_fetcher_downloaded_bytes", "Bytes of PDFs downloaded over HTTP."
)
DOWNLOAD_SECONDS = Histogram(
    "citeweave_fetcher_download_seconds",
    "Time to get one PDF from its source (retries included).",
    buckets=_SECONDS,
)
DOWNLOAD_RETRIES = Counter(
    "citeweave_fetcher_download_retries", "PDF download retries after 429/5xx/connection errors."
)
EXTRACT_SECONDS = Histogram(
    "citeweave_fetcher_extract_seconds", "Text extraction time of one PDF.", buckets=_SECONDS
)
EXTRACT_PDF_CALLS = Counter(
    "citeweave_fetcher_extract_pdf_calls",
    "ExtractPdf calls by outcome: ok, or the reason the PDF was refused.",
    ["outcome"],
)
METADATA_REQUESTS = Counter(
    "citeweave_fetcher_metadata_requests",
    "arXiv API lookups, one per batch of ids (the arxiv client's retries not counted).",
)
METADATA_BATCH_IDS = Histogram(
    "citeweave_fetcher_metadata_batch_ids",
    "Ids per arXiv API request.",
    buckets=(1, 2, 4, 8, 16, 32, 64, 100),
)
METADATA_CACHE_HITS = Counter(
    "citeweave_fetcher_metadata_cache_hits", "arXiv records served from the cache."
)
