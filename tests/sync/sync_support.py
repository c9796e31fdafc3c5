"""Shared parts of the sync tests: slices of the real arXiv snapshots, a stack, one Sync call."""

from __future__ import annotations

import gzip
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from citeweave.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from citeweave.sync.v1 import sync_pb2, sync_pb2_grpc
from services.common.clients import sync_channel
from services.common.launcher import ServiceProcess, free_port

REPO = Path(__file__).resolve().parents[2]
# Slices of the real arXiv snapshots, committed (scripts/make_sync_fixtures.py; CC0, SOURCE.txt).
ARXIV = REPO / "tests" / "fixtures" / "arxiv"
SLICE_A = ARXIV / "slice-a.jsonl.gz"
SLICE_B = ARXIV / "slice-b.jsonl"
CHANGED_IDS = (ARXIV / "changed-ids-A-to-B.txt").read_text().split()
# Of the 14, these changed their title or abstract beyond whitespace; the other 9 changed
# categories, authors or only the line wrapping of the abstract, so their embedded text is the same.
TEXT_CHANGED_IDS = ["2504.11101", "2504.21023", "2506.12433", "2508.01302", "2509.22151"]


@dataclass
class Slices:
    a: Path
    b: Path
    unchanged_ids: list[str]
    new_ids: list[str]
    b_records: dict[str, dict] = field(repr=False)
    a_records: dict[str, dict] = field(repr=False)


def _records(path: Path) -> Iterator[tuple[bytes, dict]]:
    with (gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")) as lines:
        for line in lines:
            yield line, orjson.loads(line)


def make_slices(directory: Path) -> Slices:
    """A: 46 ids that stay the same plus the 14 changed ids, as snapshot A has them.
    B: the same ids as the full file has them, plus 30 ids that only B has."""
    a_records = {record["id"]: record for _, record in _records(SLICE_A)}
    b_records = {record["id"]: record for _, record in _records(SLICE_B)}
    assert set(CHANGED_IDS) <= set(a_records) <= set(b_records)
    a_path, b_path = directory / "slice-a.jsonl.gz", directory / "slice-b.jsonl"
    shutil.copyfile(SLICE_A, a_path)
    shutil.copyfile(SLICE_B, b_path)
    return Slices(
        a=a_path, b=b_path,
        unchanged_ids=[i for i in a_records if i not in CHANGED_IDS],
        new_ids=[i for i in b_records if i not in a_records],
        b_records=b_records, a_records=a_records,
    )


def big_source(path: Path, records: int) -> Path:
    """A plain JSON-lines file of `records` distinct papers (one real record, renumbered)."""
    template = (ARXIV / "kaggle-format-head200.jsonl").read_bytes().splitlines()[0]
    assert template.startswith(b'{"id":"0704.0001"')
    path.write_bytes(b"".join(
        template.replace(b'"0704.0001"', f'"2601.{i:05d}"'.encode(), 1) + b"\n"
        for i in range(records)))
    return path


@dataclass
class Stack:
    retriever: ServiceProcess
    sync: ServiceProcess
    tmp: Path

    @property
    def sync_stub(self) -> sync_pb2_grpc.SyncServiceStub:
        return sync_pb2_grpc.SyncServiceStub(sync_channel(self.sync.addr))

    @property
    def retriever_stub(self) -> retriever_pb2_grpc.RetrieverServiceStub:
        return retriever_pb2_grpc.RetrieverServiceStub(sync_channel(self.retriever.addr))

    def count(self) -> int:
        return self.retriever_stub.Stats(retriever_pb2.StatsRequest()).paper_count

    def rows(self, ids: list[str]) -> dict[str, retriever_pb2.PaperRecord]:
        reply = self.retriever_stub.Get(retriever_pb2.GetRequest(ids=ids, include_vectors=True))
        return {r.paper.id: r for r in reply.records}

    def start_sync(self, embedder_addrs: str, **settings: str) -> ServiceProcess:
        self.sync = ServiceProcess(
            name="sync", port=free_port(), log_path=self.tmp / "sync.log",
            settings={
                "embedder_addrs": embedder_addrs,
                "retriever_addr": self.retriever.addr,
                "state_dir": str(self.tmp / "sync-state"),
                "topic_model_dir": str(self.tmp / "topics"),
                "progress_interval_s": "0.05",
                **settings,
            },
        ).start()
        self.sync.wait_serving(120)
        return self.sync


@contextmanager
def sync_stack(
    tmp: Path, embedder_addrs: str, retriever_settings: dict[str, str] | None = None,
    **sync_settings: str,
) -> Iterator[Stack]:
    """A retriever on its own store and a sync service, against running embedder(s)."""
    first_embedder = embedder_addrs.split(",")[0]
    retriever = ServiceProcess(
        name="retriever", port=free_port(), log_path=tmp / "retriever.log",
        settings={"milvus_uri": str(tmp / "store.db"), "embedder_addr": first_embedder,
                  **(retriever_settings or {})},
    ).start()
    stack = Stack(retriever=retriever, sync=None, tmp=tmp)  # type: ignore[arg-type]
    try:
        retriever.wait_serving(180)
        stack.start_sync(embedder_addrs, **sync_settings)
        yield stack
    finally:
        if stack.sync is not None:
            stack.sync.stop()
        retriever.stop()


@dataclass
class SyncResult:
    summary: sync_pb2.SyncSummary
    failures: list[sync_pb2.SyncFailure]
    progress: list[sync_pb2.SyncProgress]

    @property
    def counts(self) -> dict[str, int]:
        c = self.summary.counts
        return {f.name: getattr(c, f.name) for f in c.DESCRIPTOR.fields}

    @property
    def embed_calls(self) -> int:
        return sum(e.calls for e in self.summary.embedders)


def run_sync(stub: sync_pb2_grpc.SyncServiceStub, source: Path, **options) -> SyncResult:
    snapshot = options.pop("snapshot_path", "")
    fmt = options.pop("format", sync_pb2.SOURCE_FORMAT_UNSPECIFIED)
    request = sync_pb2.SyncRequest(
        source_path=str(source), format=fmt,
        options=sync_pb2.SyncOptions(snapshot_path=str(snapshot), **options),
    )
    failures, progress, summary = [], [], None
    for event in stub.Sync(request, timeout=600):
        kind = event.WhichOneof("event")
        if kind == "failure":
            failures.append(event.failure)
        elif kind == "progress":
            progress.append(event.progress)
        else:
            summary = event.summary
    assert summary is not None
    return SyncResult(summary, failures, progress)


def only(counts: dict[str, int], **expected: int) -> dict[str, int]:
    """The counts named in `expected`, plus every other count that is not zero."""
    return {k: v for k, v in counts.items() if k in expected or v}
