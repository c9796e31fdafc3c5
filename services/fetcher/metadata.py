"""arXiv metadata through the `arxiv` package, batched: the ids asked for within a short window go
out as one API request (arXiv asks for at most one request every 3 seconds, and a longlist asks
for 30 papers at once).

One consumer task takes up to 100 waiting ids at a time and runs one `arxiv.Search(id_list=...)`
on a single worker thread (the `arxiv.Client` keeps its rate limit in plain attributes, so it must
not be used from two threads). Ids that arrive while a request is in flight wait for the next one
and go out together. Each id has one shared future, so concurrent callers of the same id cause one
lookup; records are cached (versioned ids for good, unversioned ones for unversioned_ttl_s).
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Executor
from dataclasses import asdict, dataclass, field
from urllib.parse import urlsplit

import arxiv
import requests

from services.common.errors import CiteweaveError, NotFound, Unavailable
from services.fetcher import metrics
from services.fetcher.cache import PdfCache
from services.fetcher.ids import PaperId, parse_arxiv
from services.fetcher.settings import FetcherSettings

log = logging.getLogger("citeweave.fetcher.metadata")

MAX_IDS_PER_REQUEST = 100  # the arxiv client's page size: one request, one page


@dataclass(frozen=True)
class Record:
    """What the service keeps of an arxiv.Result."""

    id: str  # with version, as the API names it ("2401.01234v2", "hep-th/9901001v1")
    title: str
    abstract: str
    authors: list[str] = field(default_factory=list)
    year: int = 0
    categories: list[str] = field(default_factory=list)

    @property
    def version(self) -> int | None:
        parsed = parse_arxiv(self.id)
        return parsed.version if parsed else None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Record":
        return cls(**data)


def record_from_result(result: arxiv.Result) -> Record:
    return Record(
        id=result.get_short_id(),
        title=" ".join(result.title.split()),
        abstract=" ".join(result.summary.split()),
        authors=[author.name for author in result.authors],
        year=result.published.year if result.published else 0,
        categories=list(result.categories),
    )


class TimeoutSession(requests.Session):
    """A requests session with a default timeout and our User-Agent.

    The arxiv package calls `self._session.get(url, headers=...)` with no timeout, and requests
    has no default one: an API that accepts the connection and never answers would hold the
    metadata thread, and every lookup queued behind it, forever."""

    def __init__(self, timeout: tuple[float, float], user_agent: str):
        super().__init__()
        self.timeout = timeout
        self.user_agent = user_agent

    def request(self, method, url, **kwargs):
        kwargs.setdefault("timeout", self.timeout)
        headers = dict(kwargs.pop("headers", None) or {})
        headers.pop("user-agent", None)
        headers["User-Agent"] = self.user_agent
        return super().request(method, url, headers=headers, **kwargs)


class FeedNotUnderstood(Exception):
    pass


def make_client(settings: FetcherSettings) -> arxiv.Client:
    client = arxiv.Client(
        page_size=MAX_IDS_PER_REQUEST,
        delay_seconds=settings.arxiv_delay_s,
        num_retries=settings.arxiv_retries,
    )
    client.query_url_format = settings.arxiv_api_url
    client._session = TimeoutSession(
        (settings.connect_timeout_s, settings.metadata_timeout_s),
        f"{settings.user_agent} arxiv.py/{arxiv.__version__}",
    )
    return client


def _api_base(url_format: str) -> str:
    parts = urlsplit(url_format.replace("{}", ""))
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


class ArxivLookup:
    """Blocking lookups; runs only on the metadata thread."""

    def __init__(self, settings: FetcherSettings):
        self.client = make_client(settings)
        self.api = _api_base(settings.arxiv_api_url)

    def search(self, ids: list[str]) -> dict[str, Record | CiteweaveError]:
        """A record or an error for each id (as asked: with or without version)."""
        try:
            results = self._one_page(ids)
        except arxiv.HTTPError as exc:
            if exc.status == 400 and len(ids) > 1:
                # The API refuses a whole list for one id it does not accept; ask one by one.
                return {k: v for i in ids for k, v in self.search([i]).items()}
            if exc.status == 400:
                return {ids[0]: NotFound(f"arXiv has no paper {ids[0]} (the API refused the id)")}
            return dict.fromkeys(ids, self._unavailable(f"answered HTTP {exc.status}"))
        except requests.exceptions.Timeout:
            return dict.fromkeys(ids, self._unavailable("did not answer in time"))
        except requests.exceptions.RequestException as exc:
            return dict.fromkeys(ids, self._unavailable(f"is unreachable ({type(exc).__name__})"))
        except FeedNotUnderstood as exc:
            return dict.fromkeys(ids, self._unavailable(f"sent something that is not an arXiv "
                                                        f"feed ({exc})"))
        errors = [r for r in results if "/api/errors" in r.entry_id]
        if errors and len(ids) > 1:
            return {k: v for i in ids for k, v in self.search([i]).items()}
        found = [record_from_result(r) for r in results if "/api/errors" not in r.entry_id]
        by_id = {r.id: r for r in found}
        by_base: dict[str, Record] = {}
        for record in found:
            parsed = parse_arxiv(record.id)
            if parsed is not None:
                latest = by_base.get(parsed.base)
                if latest is None or (record.version or 0) > (latest.version or 0):
                    by_base[parsed.base] = record
        answers: dict[str, Record | CiteweaveError] = {}
        for wanted in ids:
            parsed = parse_arxiv(wanted)
            record = by_id.get(wanted)
            if record is None and parsed is not None and not parsed.versioned:
                record = by_base.get(parsed.base)
            answers[wanted] = record or NotFound(f"arXiv has no paper {wanted}")
        return answers

    def _one_page(self, ids: list[str]) -> list[arxiv.Result]:
        search = arxiv.Search(id_list=ids, max_results=len(ids))
        # One page, read directly: `Client.results` asks for a next page whenever the feed's
        # totalResults exceeds the entries it got, which the API has reported for lists holding
        # unknown ids, and that empty page costs every retry (with its delay) before it fails.
        url = self.client._format_url(search, 0, len(ids))
        metrics.METADATA_REQUESTS.inc()
        feed = self.client._parse_feed(url, first_page=True)
        if feed.malformed:
            raise FeedNotUnderstood(str(feed.error))
        if not feed.results and feed.header.items_per_page == 0:
            # The API always states itemsPerPage; an HTML page or a proxy's answer does not.
            raise FeedNotUnderstood("no opensearch:itemsPerPage")
        return feed.results

    def _unavailable(self, what: str) -> Unavailable:
        return Unavailable(
            f"the arXiv API at {self.api} {what}; retry later, or set skip_metadata when the "
            "caller has the paper's record (CITEWEAVE_FETCHER_ARXIV_API_URL sets the endpoint)"
        )


class MetadataBatcher:
    """Async front of ArxivLookup: batching, one future per id in flight, the record cache."""

    def __init__(
        self,
        settings: FetcherSettings,
        lookup: ArxivLookup,
        executor: Executor,
        cache: PdfCache | None,
        io: Executor,
    ):
        self.settings = settings
        self.lookup = lookup
        self._executor = executor
        self._io = io
        self._cache = cache
        self._window_s = settings.metadata_batch_window_ms / 1000.0
        self._futures: dict[str, asyncio.Future] = {}  # queued or in flight
        self._queue: list[str] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="arxiv-metadata")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        for future in self._futures.values():
            if not future.done():
                future.set_exception(Unavailable("the fetcher is shutting down"))
        self._futures.clear()

    async def get(self, paper_id: PaperId, timeout_s: float) -> Record:
        """The record of an arXiv id; NotFound or Unavailable otherwise."""
        key = paper_id.value
        loop = asyncio.get_running_loop()
        if self._cache is not None:
            try:
                cached = await loop.run_in_executor(self._io, self._cache.get_record, key)
                record = Record.from_dict(cached) if cached is not None else None
            except Exception:  # noqa: BLE001 - a cache that cannot be read is a miss
                log.exception("could not read the record cache", extra={"id": key})
                record = None
            if record is not None:
                metrics.METADATA_CACHE_HITS.inc()
                return record
        future = self._futures.get(key)
        if future is None:
            future = self._futures[key] = loop.create_future()
            # Marks an error as seen even when every caller stopped waiting before it came.
            future.add_done_callback(lambda f: f.cancelled() or f.exception())
            self._queue.append(key)
            self._wake.set()
        try:
            # shield: a caller giving up must not cancel the lookup other callers share.
            return await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except TimeoutError:
            raise Unavailable(
                self.lookup._unavailable(f"gave no record for {key} within {timeout_s:.1f}s")
                .message
            ) from None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            if self._window_s and len(self._queue) < MAX_IDS_PER_REQUEST:
                await asyncio.sleep(self._window_s)
            batch = self._queue[:MAX_IDS_PER_REQUEST]
            del self._queue[:MAX_IDS_PER_REQUEST]
            if not self._queue:
                self._wake.clear()
            if not batch:
                continue
            start = time.perf_counter()
            try:
                answers = await loop.run_in_executor(self._executor, self.lookup.search, batch)
            except Exception as exc:  # noqa: BLE001 - the loop must outlive any one batch
                log.exception("arXiv lookup failed", extra={"ids": len(batch)})
                answers = dict.fromkeys(batch, self.lookup._unavailable(
                    f"could not be queried ({type(exc).__name__})"))
            metrics.METADATA_BATCH_IDS.observe(len(batch))
            found = [(k, a) for k, a in answers.items() if isinstance(a, Record)]
            log.info(
                "arXiv lookup",
                extra={"ids": len(batch), "found": len(found),
                       "ms": round((time.perf_counter() - start) * 1000, 1)},
            )
            if self._cache is not None and found:
                items = [(k, a.to_dict(), not parse_arxiv(k).versioned) for k, a in found]
                try:
                    await loop.run_in_executor(self._io, self._cache.put_records, items)
                except Exception:  # noqa: BLE001 - a cache write failing loses nothing
                    log.exception("could not cache arXiv records")
            for key in batch:
                future = self._futures.pop(key, None)
                if future is None or future.done():
                    continue
                answer = answers.get(key) or NotFound(f"arXiv has no paper {key}")
                if isinstance(answer, Exception):
                    future.set_exception(answer)
                else:
                    future.set_result(answer)
