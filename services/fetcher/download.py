"""Where PDFs come from: a local directory (pdf_dir) or HTTP (arXiv or a mirror), with a size
limit, timeouts, retries and a bound on concurrent downloads. Every failure is a PdfProblem, so a
paper falls back to its abstract instead of failing the call.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Generic, TypeVar

import httpx

from services.fetcher import metrics
from services.fetcher.ids import PaperId
from services.fetcher.pages import PdfProblem, Problem
from services.fetcher.settings import FetcherSettings

log = logging.getLogger("citeweave.fetcher.download")
T = TypeVar("T")

PDF_MAGIC = b"%PDF-"
# The PDF header may follow a little junk; readers look for it in the first kilobyte.
MAGIC_WINDOW = 1024
MIB = 1024 * 1024


@dataclass(frozen=True)
class Downloaded:
    data: bytes
    url: str
    download_ms: float


class _Retryable(Exception):
    def __init__(self, problem: PdfProblem, retry_after_s: float | None = None):
        super().__init__(problem.message)
        self.problem = problem
        self.retry_after_s = retry_after_s


def looks_like_pdf(head: bytes) -> bool:
    return PDF_MAGIC in head[:MAGIC_WINDOW]


def not_pdf(where: str, head: bytes, content_type: str = "") -> PdfProblem:
    start = head[:32].decode("latin-1").replace("\n", " ").strip()
    kind = f", Content-Type {content_type}" if content_type else ""
    return PdfProblem(
        Problem.NOT_PDF, f"{where} is not a PDF (it starts with {start!r}{kind})"
    )


def too_large(where: str, size: int | None, limit_bytes: int) -> PdfProblem:
    size_text = f"{size / MIB:.1f} MiB, " if size is not None else ""
    return PdfProblem(
        Problem.TOO_LARGE,
        f"{where} is {size_text}over the {limit_bytes / MIB:g} MiB limit "
        "(CITEWEAVE_FETCHER_MAX_PDF_MB)",
    )


def retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds (delta-seconds or an HTTP date), None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


class SingleFlight(Generic[T]):
    """At most one running task per key in this process: concurrent callers share its result.

    The task runs on its own; a caller that stops waiting (its deadline) does not cancel it, so
    a download still completes into the cache for the next call."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task] = {}

    def __len__(self) -> int:
        return len(self._tasks)

    async def run(
        self, key: str, factory: Callable[[], Awaitable[T]], timeout_s: float | None
    ) -> tuple[T, bool]:
        """(result, whether this caller joined a task already running); TimeoutError when the
        task does not finish within timeout_s."""
        task = self._tasks.get(key)
        joined = task is not None
        if task is None:
            task = asyncio.ensure_future(factory())
            self._tasks[key] = task
            task.add_done_callback(lambda done: self._finished(key, done))
        return await asyncio.wait_for(asyncio.shield(task), timeout_s), joined

    def _finished(self, key: str, task: asyncio.Task) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
        if not task.cancelled():
            task.exception()  # retrieved: a caller may have stopped waiting

    async def cancel_all(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class PdfSource:
    """Reads a PDF from pdf_dir, or downloads it over one shared HTTP client."""

    def __init__(self, settings: FetcherSettings, io: Executor):
        self.settings = settings
        self._io = io
        self._limit = settings.max_pdf_bytes
        self._semaphore = asyncio.Semaphore(settings.max_concurrent_downloads)
        self._client: httpx.AsyncClient | None = None

    @property
    def local(self) -> bool:
        return self.settings.pdf_dir is not None

    async def start(self) -> None:
        if self.local:
            return
        self._client = httpx.AsyncClient(
            follow_redirects=True,
            max_redirects=5,
            headers={"User-Agent": self.settings.user_agent},
            timeout=httpx.Timeout(
                self.settings.download_timeout_s, connect=self.settings.connect_timeout_s
            ),
            limits=httpx.Limits(
                max_connections=self.settings.max_concurrent_downloads,
                max_keepalive_connections=self.settings.max_concurrent_downloads,
            ),
        )

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def url_for(self, paper_id: PaperId) -> str:
        if self.settings.pdf_dir is not None:
            return self._candidates(paper_id)[0].as_uri()
        return self.settings.pdf_url_template.replace("{id}", paper_id.value)

    def _candidates(self, paper_id: PaperId) -> list[Path]:
        """<dir>/<id>.pdf, then (for a versioned arXiv id) <dir>/<id without version>.pdf."""
        stems = [paper_id.file_stem]
        if paper_id.arxiv and paper_id.versioned:
            stems.append(paper_id.base.replace("/", "_"))
        return [self.settings.pdf_dir / f"{stem}.pdf" for stem in stems]

    async def fetch(self, paper_id: PaperId) -> Downloaded:
        start = time.perf_counter()
        if self.local:
            loop = asyncio.get_running_loop()
            data, url = await loop.run_in_executor(self._io, self._read_local, paper_id)
        else:
            url = self.url_for(paper_id)
            data = await self._download(url)
            metrics.DOWNLOADED_BYTES.inc(len(data))
        elapsed = time.perf_counter() - start
        metrics.DOWNLOAD_SECONDS.observe(elapsed)
        return Downloaded(data, url, elapsed * 1000.0)

    # -- local directory --------------------------------------------------------------------

    def _read_local(self, paper_id: PaperId) -> tuple[bytes, str]:
        for path in self._candidates(paper_id):
            try:
                size = path.stat().st_size
                if size > self._limit:
                    raise too_large(f"{path.name}", size, self._limit)
                data = path.read_bytes()
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                continue
            except PermissionError:
                raise PdfProblem(
                    Problem.UNAVAILABLE, f"{path} cannot be read (permission denied)"
                ) from None
            if not looks_like_pdf(data):
                raise not_pdf(path.name, data)
            return data, path.as_uri()
        names = " or ".join(p.name for p in self._candidates(paper_id))
        raise PdfProblem(
            Problem.NOT_FOUND, f"the PDF directory {self.settings.pdf_dir} has no {names}"
        )

    # -- HTTP -------------------------------------------------------------------------------

    async def _download(self, url: str) -> bytes:
        attempts = self.settings.download_retries + 1
        for attempt in range(attempts):
            try:
                return await self._attempt(url)
            except _Retryable as retry:
                problem, wait_s = retry.problem, retry.retry_after_s
                if attempt + 1 >= attempts:
                    break
                if wait_s is not None and wait_s > self.settings.retry_after_max_s:
                    raise PdfProblem(
                        Problem.UNAVAILABLE,
                        f"{problem.message} and asks to retry after {wait_s:.0f}s, longer than "
                        f"{self.settings.retry_after_max_s:g}s "
                        "(CITEWEAVE_FETCHER_RETRY_AFTER_MAX_S)",
                    ) from None
                if wait_s is None:
                    wait_s = self.settings.retry_backoff_s * 2**attempt * random.uniform(0.5, 1.5)
                metrics.DOWNLOAD_RETRIES.inc()
                log.info("retrying download", extra={"url": url, "attempt": attempt + 1,
                                                     "wait_s": round(wait_s, 3),
                                                     "reason": problem.message})
                await asyncio.sleep(wait_s)
        raise PdfProblem(
            Problem.UNAVAILABLE,
            f"{problem.message} (gave up after {attempts} attempt{'s' if attempts > 1 else ''})",
        )

    async def _attempt(self, url: str) -> bytes:
        assert self._client is not None, "PdfSource.start() was not awaited"
        timeout_s = self.settings.download_timeout_s
        async with self._semaphore:
            try:
                async with asyncio.timeout(timeout_s):
                    return await self._stream(url)
            except (TimeoutError, httpx.TimeoutException):
                raise PdfProblem(
                    Problem.TIMEOUT,
                    f"{url} did not deliver the PDF within {timeout_s:g}s "
                    "(CITEWEAVE_FETCHER_DOWNLOAD_TIMEOUT_S)",
                ) from None
            except httpx.TooManyRedirects:
                raise PdfProblem(Problem.UNAVAILABLE, f"{url} redirects too many times") from None
            except (httpx.TransportError, httpx.StreamError) as exc:
                raise _Retryable(
                    PdfProblem(Problem.UNAVAILABLE, f"{url} is unreachable ({type(exc).__name__})")
                ) from None

    async def _stream(self, url: str) -> bytes:
        async with self._client.stream("GET", url) as response:
            status = response.status_code
            if status in (404, 410):
                raise PdfProblem(Problem.NOT_FOUND, f"{url} answered HTTP {status}: no such PDF")
            if status == 429 or status >= 500:
                raise _Retryable(
                    PdfProblem(Problem.UNAVAILABLE, f"{url} answered HTTP {status}"),
                    retry_after_seconds(response.headers.get("retry-after")),
                )
            if status >= 300:
                raise PdfProblem(Problem.UNAVAILABLE, f"{url} answered HTTP {status}")
            content_type = response.headers.get("content-type", "")
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self._limit:
                raise too_large(url, int(declared), self._limit)
            body = bytearray()
            checked = False
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > self._limit:
                    raise too_large(url, None, self._limit)
                if not checked and len(body) >= MAGIC_WINDOW:
                    if not looks_like_pdf(body):
                        raise not_pdf(url, bytes(body), content_type)
                    checked = True
            if not looks_like_pdf(body):
                raise not_pdf(url, bytes(body), content_type)
            return bytes(body)
