"""One sync run: the SHA-256 diff of a source against the store, embedding and writing in batches.

Crash safety comes from the store itself: a row's vector and its sha256 are written together by
one upsert, so after a crash every row is either the old record with the old hash or the new
record with the new hash. Rerunning the diff therefore finds exactly the work that is left (at
most the batches that were in flight) and nothing is embedded twice beyond those.

Shards split one source among parallel runs (a Kubernetes Indexed Job): every run reads the whole
file and keeps the records whose id hashes to its shard, so the runs write disjoint sets of ids
and need no coordination beyond the store.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import logging
import os
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from citeweave.retriever.v1 import retriever_pb2
from citeweave.sync.v1 import sync_pb2
from services.common.corpus import PaperRow, embedding_text
from services.common.errors import InvalidArgument
from services.sync import linecache
from services.sync.download import Downloader, is_url, shown
from services.sync.peers import Cancelled, EmbedderPool, Rejected, RetrieverClient
from services.sync.settings import SyncSettings
from services.sync.snapshot import Snapshot
from services.sync.sources import (
    FORMAT_NAMES, Failure, Known, Parsed, Source, check_format, sha_prefix,
)

if TYPE_CHECKING:  # BERTopic's imports take seconds; only a fitted model loads them
    from services.sync.topics import TopicModel

log = logging.getLogger("citeweave.sync.job")

MAX_FAILURE_EVENTS = 1000  # failures streamed one by one; beyond, they are only counted
MISSING_SAMPLE = 100
DELETE_CHUNK = 1000
STATE_FILE = "unfinished-sync.json"

Emit = Callable[[sync_pb2.SyncResponse], None]


@dataclass(slots=True)
class Counts:
    """The run's counts as plain ints: the per-record loop updates them 10^5 times a second,
    which protobuf fields make several times slower. Only the run's own thread touches them."""

    read: int = 0
    unchanged: int = 0
    changed: int = 0
    new: int = 0
    embedded: int = 0
    upserted: int = 0
    failed: int = 0
    missing: int = 0
    deleted: int = 0
    from_snapshot: int = 0
    vector_reused: int = 0

    def message(self) -> sync_pb2.SyncCounts:
        return sync_pb2.SyncCounts(**{name: getattr(self, name) for name in self.__slots__})


@dataclass
class Pending:
    line: int
    row: PaperRow
    sha256: str
    changed: bool
    digest: int


@dataclass
class BatchResult:
    embedded: int = 0
    reused: int = 0
    from_snapshot: int = 0
    upserted: int = 0
    failures: list[Failure] = field(default_factory=list)
    written: list[Pending] = field(default_factory=list)


@dataclass
class Peers:
    embedders: EmbedderPool
    retriever: RetrieverClient
    topics: TopicModel | None


def shard_of(record_id: str, shard_count: int) -> int:
    """A record's shard. CRC-32 of the id's bytes, never hash(): that is salted per process, and
    parallel shard runs must agree on every id."""
    return zlib.crc32(record_id.encode("utf-8")) % shard_count


def check_request(request: sync_pb2.SyncRequest) -> None:
    """What is wrong with a request on its face, found before anything is downloaded or written."""
    check_format(request.format)
    is_url(request.source_path)  # refuses schemes other than http(s)
    options = request.options
    if options.shard_index >= max(options.shard_count, 1):
        raise InvalidArgument(
            f"shard_index {options.shard_index} is out of range for shard_count "
            f"{options.shard_count}: shards are numbered 0 to shard_count - 1 (shard_count 0 "
            "or 1 means no sharding, shard 0 only)"
        )
    if options.delete_missing and options.shard_count > 1:
        raise InvalidArgument(
            "delete_missing cannot be combined with shard_count > 1: a shard sees only its own "
            "records, so it cannot know which stored papers are missing from the source. Sync "
            "the shards without it, then run one unsharded sync with delete_missing."
        )


def summary_fields(summary: sync_pb2.SyncSummary) -> dict:
    """The summary as a log line's fields."""
    counts = summary.counts
    return {
        "counts": {f.name: getattr(counts, f.name) for f in counts.DESCRIPTOR.fields},
        "elapsed_s": round(summary.elapsed_ms / 1000, 1),
        "format": FORMAT_NAMES.get(summary.format, "unspecified"),
        "resumed": summary.resumed,
        "downloaded_bytes": summary.downloaded_bytes,
        "embedders": [{"addr": e.addr, "calls": e.calls, "texts": e.texts} for e in summary.embedders],
        "warnings": list(summary.warnings),
    }


def to_record(row: PaperRow, sha256: str, vector: np.ndarray, topic: int) -> retriever_pb2.PaperRecord:
    return retriever_pb2.PaperRecord(
        paper=retriever_pb2.Paper(
            id=row.id, title=row.title, abstract=row.abstract, authors=row.authors,
            year=row.year, date=row.date, categories=row.categories, topic=topic,
            sha256=sha256, url=row.url,
        ),
        vector=vector.tolist(),
    )


class SyncRun:
    def __init__(
        self,
        request: sync_pb2.SyncRequest,
        peers: Peers,
        settings: SyncSettings,
        emit: Emit,
        cancelled: threading.Event,
    ):
        self.request = request
        self.options = request.options
        self.peers = peers
        self.batch_size = self.options.batch_size or settings.batch_size
        self.workers = settings.batches_per_embedder * len(settings.embedder_addr_list)
        self.state_dir = settings.state_dir
        self.progress_interval_s = settings.progress_interval_s
        self.log_interval_s = settings.log_interval_s
        self.downloader = Downloader(settings.download_dir.resolve(),
                                     settings.download_connect_timeout_s,
                                     settings.download_read_timeout_s)
        self.shards = max(self.options.shard_count, 1)
        self.shard = self.options.shard_index
        # Per-shard state files: parallel shard runs sharing a state directory never clash.
        self.shard_tag = f"-shard-{self.shard}-of-{self.shards}" if self.shards > 1 else ""
        self.log_context = {"source": shown(request.source_path)}
        if self.shards > 1:
            self.log_context["shard"] = f"{self.shard}/{self.shards}"
        self.emit = emit
        self.cancelled = cancelled
        self.counts = Counts()
        self.warnings: list[str] = []
        self._start = time.monotonic()
        self._last_progress = 0.0
        self._last_log = self._start
        self.downloaded_bytes = 0
        self.snapshot: Snapshot | None = None
        self.source: Source | None = None
        # The pool counts for the service's lifetime; a summary reports this run's share.
        self._usage_before = {u.addr: (u.calls, u.texts) for u in peers.embedders.usage()}

    # -- events --------------------------------------------------------------------------------

    def _elapsed_ms(self) -> int:
        return int((time.monotonic() - self._start) * 1000)

    def progress(self, force: bool = False) -> None:
        source = self.source
        self._report(sync_pb2.SYNC_PHASE_READING, source.position if source else 0,
                     source.size if source else 0, force)

    def _report(self, phase: int, bytes_read: int, bytes_total: int, force: bool = False) -> None:
        """A progress event every progress_interval_s, a log line every log_interval_s."""
        now = time.monotonic()
        if not force and now - self._last_progress < self.progress_interval_s:
            return
        self._last_progress = now
        counts = self.counts.message()
        elapsed = max(now - self._start, 1e-9)
        progress = sync_pb2.SyncProgress(
            counts=counts, elapsed_ms=int(elapsed * 1000), rate_per_s=counts.read / elapsed,
            bytes_read=bytes_read, bytes_total=bytes_total, phase=phase,
        )
        self.emit(sync_pb2.SyncResponse(progress=progress))
        if now - self._last_log >= self.log_interval_s:
            self._last_log = now
            log.info("sync progress", extra={
                **self.log_context,
                "phase": sync_pb2.SyncPhase.Name(phase).removeprefix("SYNC_PHASE_").lower(),
                "bytes_read": bytes_read, "bytes_total": bytes_total,
                "read": counts.read, "unchanged": counts.unchanged, "new": counts.new,
                "changed": counts.changed, "embedded": counts.embedded,
                "upserted": counts.upserted, "failed": counts.failed,
                "rate_per_s": round(progress.rate_per_s, 1),
            })

    def fail(self, failure: Failure) -> None:
        self.counts.failed += 1
        if self.counts.failed <= MAX_FAILURE_EVENTS:
            self.emit(sync_pb2.SyncResponse(failure=sync_pb2.SyncFailure(
                line_number=failure.line, record_id=failure.record_id, reason=failure.reason,
            )))

    # -- the run -------------------------------------------------------------------------------

    def run(self) -> sync_pb2.SyncSummary:
        # Everything that can be wrong with the request is found before the first write, and
        # what needs no download before the download.
        check_request(self.request)
        if self.options.snapshot_path:
            self._use_snapshot(Snapshot.load(Path(self.options.snapshot_path)))
        source = self.source = Source.open(self._local_source(), self.request.format)
        if self.peers.topics is None:
            self.warnings.append(
                "no topic model is fitted: new and changed papers get topic -1; run "
                "`citeweave topics fit` to assign topics"
            )
        elif self.peers.topics.model_name != self.peers.embedders.model:
            self.warnings.append(
                f"the topic model was fitted on {self.peers.topics.model_name} vectors but the "
                f"embedder serves {self.peers.embedders.model}: topics are not assigned; refit"
            )
            self.peers.topics = None
        stored = self.peers.retriever.stored_hashes(self.cancelled)
        shards, shard = self.shards, self.shard
        if shards > 1:
            # Other shards' ids are neither compared nor called missing (nor held in memory).
            stored = {i: h for i, h in stored.items() if shard_of(i, shards) == shard}
        resumed = self._mark_started(source.path)
        cache_file = linecache.cache_path(
            self.state_dir, FORMAT_NAMES[source.format], self.shard_tag)
        known = linecache.load(cache_file)
        self.line_cache: linecache.Entries = {}  # the next run's cache, built as lines are seen

        executor = cf.ThreadPoolExecutor(self.workers, thread_name_prefix="sync-batch")
        in_flight: set[cf.Future] = set()
        seen: set[str] = set()  # every id read, to report a second line with the same id
        batch: list[Pending] = []
        counts, limit = self.counts, self.options.limit
        try:
            for item in source.records(known):
                if limit and counts.read >= limit:
                    break
                if shards > 1 and self._shard_of(item) != shard:
                    continue
                counts.read += 1
                if not counts.read % 256:
                    if self.cancelled.is_set():
                        raise Cancelled()
                    self.progress()
                if isinstance(item, Known):
                    paper_id = item.record_id
                    old = stored.pop(paper_id, None)
                    if old is not None and sha_prefix(old) == item.sha_prefix:
                        counts.unchanged += 1
                        seen.add(paper_id)
                        self.line_cache[item.digest] = (paper_id, item.sha_prefix)
                        continue
                    # The store no longer holds what this line gave last time: parse it.
                    if old is not None:
                        stored[paper_id] = old
                    item = source.parse_line(item.line, item.raw, item.digest)
                if isinstance(item, Failure):
                    if item.record_id:
                        # Keep the stored version of a record whose new version is broken, and
                        # the first of two lines with one id.
                        stored.pop(item.record_id, None)
                        seen.add(item.record_id)
                    self.fail(item)
                    continue
                paper_id = item.row.id
                old = stored.pop(paper_id, None)
                if old is None and paper_id in seen:
                    self.fail(Failure(item.line, paper_id, "duplicate id: an earlier line has "
                                                           "the same id; the first one is kept"))
                    continue
                seen.add(paper_id)
                if old == item.sha256:
                    counts.unchanged += 1
                    self.line_cache[item.digest] = (paper_id, sha_prefix(old))
                    continue
                if old is None:
                    counts.new += 1
                else:
                    counts.changed += 1
                if not self.options.dry_run:
                    batch.append(Pending(item.line, item.row, item.sha256, old is not None, item.digest))
                    if len(batch) >= self.batch_size:
                        in_flight = self._submit(executor, in_flight, batch)
                        batch = []
                self.progress()
            if batch:
                in_flight = self._submit(executor, in_flight, batch)
            self._drain(in_flight, wait_all=True)
        except BaseException:
            self.cancelled.set()
            executor.shutdown(wait=True, cancel_futures=True)
            raise
        executor.shutdown(wait=True)

        missing_sample = self._missing(source, stored)
        if not self.options.dry_run:
            if source.complete and not (limit and counts.read >= limit):
                linecache.save(cache_file, self.line_cache)
            self._clear_state()
        self.progress(force=True)
        summary = sync_pb2.SyncSummary(
            counts=self.counts.message(),
            elapsed_ms=self._elapsed_ms(),
            missing_ids_sample=missing_sample,
            resumed=resumed,
            warnings=self.warnings,
            format=source.format,
            embedders=self._usage(),
            downloaded_bytes=self.downloaded_bytes,
        )
        log.info("sync finished", extra={**self.log_context, **summary_fields(summary)})
        return summary

    def _local_source(self) -> Path:
        """The source as a local file: a URL is downloaded first (or its copy reused)."""
        url = self.request.source_path
        if not is_url(url):
            return Path(url)
        log.info("downloading the source", extra=self.log_context)

        def on_progress(received: int, total: int) -> None:
            self._report(sync_pb2.SYNC_PHASE_DOWNLOADING, received, total)

        downloaded = self.downloader.fetch(url, on_progress, self.cancelled)
        self.downloaded_bytes = size = downloaded.downloaded_bytes
        if size:
            self._report(sync_pb2.SYNC_PHASE_DOWNLOADING, size, size, force=True)
        log.info("source downloaded" if size else
                 "source not modified since its last download; reading that copy",
                 extra={**self.log_context, "path": str(downloaded.path), "downloaded_bytes": size,
                        "seconds": round(time.monotonic() - self._start, 1)})
        return downloaded.path

    def _shard_of(self, item: Parsed | Failure | Known) -> int:
        key = item.row.id if isinstance(item, Parsed) else item.record_id
        # A line whose id cannot be read goes by its line number, so exactly one shard reports it.
        return shard_of(key, self.shards) if key else item.line % self.shards

    def _usage(self) -> list[sync_pb2.EmbedderUse]:
        usage = self.peers.embedders.usage()
        for use in usage:
            calls, texts = self._usage_before.get(use.addr, (0, 0))
            use.calls -= calls
            use.texts -= texts
        return usage

    def _use_snapshot(self, snapshot: Snapshot) -> None:
        if snapshot.model != self.peers.embedders.model:
            self.warnings.append(
                f"the snapshot holds {snapshot.model} vectors but the embedder serves "
                f"{self.peers.embedders.model}; every record is embedded for real"
            )
            return
        self.snapshot = snapshot

    # -- batches -------------------------------------------------------------------------------

    def _submit(self, executor, in_flight: set[cf.Future], batch: list[Pending]) -> set[cf.Future]:
        # Bounded: at most `workers` batches are held, whatever the size of the source.
        while len(in_flight) >= self.workers:
            in_flight = self._drain(in_flight, wait_all=False)
        in_flight.add(executor.submit(self._process, batch))
        return in_flight

    def _drain(self, in_flight: set[cf.Future], wait_all: bool) -> set[cf.Future]:
        done, pending = cf.wait(
            in_flight, return_when=cf.ALL_COMPLETED if wait_all else cf.FIRST_COMPLETED
        )
        for future in done:
            result = future.result()  # a peer that stayed down ends the run here
            self.counts.embedded += result.embedded
            self.counts.vector_reused += result.reused
            self.counts.from_snapshot += result.from_snapshot
            self.counts.upserted += result.upserted
            for p in result.written:
                self.line_cache[p.digest] = (p.row.id, sha_prefix(p.sha256))
            for failure in result.failures:
                self.fail(failure)
        self.progress()
        return pending

    def _process(self, batch: list[Pending]) -> BatchResult:
        result = BatchResult()
        vectors: dict[str, np.ndarray] = {}
        changed = [p.row.id for p in batch if p.changed]
        if changed:
            # A change that leaves title and abstract alone (categories, authors, date) keeps
            # the stored vector: it is what embedding the same text again would give.
            texts = {p.row.id: embedding_text(p.row.title, p.row.abstract) for p in batch}
            for record in self.peers.retriever.get(changed, self.cancelled):
                if embedding_text(record.paper.title, record.paper.abstract) == texts[record.paper.id]:
                    vectors[record.paper.id] = np.asarray(record.vector, dtype=np.float32)
                    result.reused += 1
        if self.snapshot is not None:
            for p in batch:
                if p.row.id not in vectors:
                    vector = self.snapshot.vector(p.row.id, p.sha256)
                    if vector is not None:
                        vectors[p.row.id] = vector
                        result.from_snapshot += 1
        to_embed = [p for p in batch if p.row.id not in vectors]
        if to_embed:
            embedded = self._embed(to_embed, result)
            vectors.update(embedded)
            result.embedded += len(embedded)
        ready = [p for p in batch if p.row.id in vectors]
        topics = self._topics(ready, vectors)
        records = [to_record(p.row, p.sha256, vectors[p.row.id], t) for p, t in zip(ready, topics, strict=True)]
        result.written = self._upsert(ready, records, result)
        result.upserted = len(result.written)
        return result

    def _embed(self, batch: list[Pending], result: BatchResult) -> dict[str, np.ndarray]:
        texts = [embedding_text(p.row.title, p.row.abstract) for p in batch]
        try:
            matrix = self.peers.embedders.embed(texts, self.cancelled)
            return {p.row.id: matrix[i] for i, p in enumerate(batch)}
        except Rejected:
            if len(batch) == 1:
                raise
        # One record the embedder refuses must not cost the others of its batch.
        vectors = {}
        for p, text in zip(batch, texts, strict=True):
            try:
                vectors[p.row.id] = self.peers.embedders.embed([text], self.cancelled)[0]
            except Rejected as exc:
                result.failures.append(Failure(p.line, p.row.id, f"the embedder refused it: {exc.details}"))
        return vectors

    def _topics(self, batch: list[Pending], vectors: dict[str, np.ndarray]) -> list[int]:
        if self.peers.topics is None or not batch:
            return [-1] * len(batch)
        return self.peers.topics.assign(
            [embedding_text(p.row.title, p.row.abstract) for p in batch],
            np.stack([vectors[p.row.id] for p in batch]),
        )

    def _upsert(self, batch: list[Pending], records: list, result: BatchResult) -> list[Pending]:
        """The records written; one the store refuses is isolated and reported."""
        if not records:
            return []
        try:
            self.peers.retriever.upsert(records, self.cancelled)
            return batch
        except Rejected as exc:
            if len(records) == 1:
                result.failures.append(Failure(batch[0].line, batch[0].row.id, f"the store refused it: {exc.details}"))
                return []
        written = []
        for p, record in zip(batch, records, strict=True):
            try:
                self.peers.retriever.upsert([record], self.cancelled)
                written.append(p)
            except Rejected as exc:
                result.failures.append(Failure(p.line, p.row.id, f"the store refused it: {exc.details}"))
        return written

    # -- the end of a full snapshot --------------------------------------------------------------

    def _missing(self, source: Source, stored: dict[str, str]) -> list[str]:
        """Stored ids the source no longer has; deleted only when asked and only when the whole
        source was read (a truncated file or an unreadable id would make present papers look
        missing)."""
        if self.shards > 1:
            self.warnings.append(
                "missing ids are not computed for a sharded run (a shard sees only its own "
                "records); an unsharded sync computes them"
            )
            return []
        if self.options.limit and self.counts.read >= self.options.limit:
            if stored:
                self.warnings.append("missing ids are not computed for a run with a limit")
            return []
        if not source.complete or source.unidentified_failures:
            why = ("the source could not be read to its end" if not source.complete
                   else f"{source.unidentified_failures} lines had no readable id")
            if stored:
                self.warnings.append(
                    f"missing ids are not computed because {why}: {len(stored)} stored papers "
                    "were not seen, and none is deleted"
                )
            return []
        missing = sorted(stored)
        self.counts.missing = len(missing)
        if missing and self.options.delete_missing and not self.options.dry_run:
            if self.counts.read == self.counts.failed:
                self.warnings.append(
                    f"the source has no valid record: refusing to delete all {len(missing)} "
                    "stored papers"
                )
            else:
                for start in range(0, len(missing), DELETE_CHUNK):
                    deleted = self.peers.retriever.delete(
                        missing[start:start + DELETE_CHUNK], self.cancelled
                    )
                    self.counts.deleted += deleted
                    self.progress()
        elif missing and not self.options.delete_missing:
            self.warnings.append(
                f"{len(missing)} stored papers are not in this source; they are kept (rerun "
                "with delete_missing / --delete-missing to remove them)"
            )
        return missing[:MISSING_SAMPLE]

    # -- the marker of an unfinished run ----------------------------------------------------------

    def _state_path(self) -> Path:
        return self.state_dir / STATE_FILE.replace(".json", f"{self.shard_tag}.json")

    def _mark_started(self, source: Path) -> bool:
        """True when the previous run on this source did not finish. Writes the marker."""
        path = self._state_path()
        resumed = False
        try:
            resumed = json.loads(path.read_text()).get("source") == str(source)
        except (OSError, ValueError):
            pass
        if not self.options.dry_run:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"source": str(source), "started": time.time()}))
            os.replace(tmp, path)
        return resumed

    def _clear_state(self) -> None:
        self._state_path().unlink(missing_ok=True)
