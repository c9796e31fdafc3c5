"""Shared parts of the sync tests: slices of the real arXiv snapshots, a stack, one Sync call,
an HTTP server for URL sources, the one-shot worker as a subprocess."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson

from citeweave.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from citeweave.sync.v1 import sync_pb2, sync_pb2_grpc
from services.common.clients import sync_channel
from services.common.launcher import ServiceProcess, free_port
from tests.local_http import serving

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
def running_retriever(tmp: Path, embedder_addr: str, **settings: str) -> Iterator[ServiceProcess]:
    """A retriever on its own Milvus Lite store under tmp."""
    retriever = ServiceProcess(
        name="retriever", port=free_port(), log_path=tmp / "retriever.log",
        settings={"milvus_uri": str(tmp / "store.db"), "embedder_addr": embedder_addr, **settings},
    ).start()
    try:
        retriever.wait_serving(180)
        yield retriever
    finally:
        retriever.stop()


@contextmanager
def sync_stack(
    tmp: Path, embedder_addrs: str, retriever_settings: dict[str, str] | None = None,
    **sync_settings: str,
) -> Iterator[Stack]:
    """A retriever on its own store and a sync service, against running embedder(s)."""
    with running_retriever(tmp, embedder_addrs.split(",")[0], **(retriever_settings or {})) as retriever:
        stack = Stack(retriever=retriever, sync=None, tmp=tmp)  # type: ignore[arg-type]
        try:
            stack.start_sync(embedder_addrs, **sync_settings)
            yield stack
        finally:
            if stack.sync is not None:
                stack.sync.stop()


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


# -- URL sources ----------------------------------------------------------------------------------


class FileServer:
    """Files over HTTP on 127.0.0.1, as a snapshot mirror serves them: ETag and Last-Modified,
    304 for a conditional GET that matches. `/files/NAME` sends both validators, `/lm/NAME` only
    Last-Modified. `misbehave[NAME]` makes NAME fail: an HTTP status, "truncate" (half the body,
    then the connection closes) or "stall" (no answer for `stall_s`). `requests` lists (path,
    status, If-None-Match, If-Modified-Since) of every GET."""

    def __init__(self, stall_s: float = 3.0):
        self.files: dict[str, tuple[bytes, str]] = {}
        self.misbehave: dict[str, int | str] = {}
        self.requests: list[tuple[str, int, str | None, str | None]] = []
        self.stall_s = stall_s
        self._versions = 0
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _FileHandler)
        self._http.owner = self  # type: ignore[attr-defined]
        self._http.daemon_threads = True
        self._http.handle_error = lambda request, address: None  # a client gone mid-answer
        self.port = self._http.server_address[1]

    def put(self, name: str, data: bytes) -> None:
        self._versions += 1  # a later put is a later Last-Modified, even within one second
        self.files[name] = (data, formatdate(1_700_000_000 + 60 * self._versions, usegmt=True))

    def url(self, name: str, route: str = "files") -> str:
        return f"http://127.0.0.1:{self.port}/{route}/{name}"

    def statuses(self, name: str) -> list[int]:
        return [status for path, status, *_ in self.requests if path.endswith("/" + name)]

    @classmethod
    @contextmanager
    def running(cls) -> Iterator["FileServer"]:
        server = cls()
        with serving(server._http):
            yield server


class _FileHandler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        owner: FileServer = self.server.owner  # type: ignore[attr-defined]
        route, _, name = self.path.lstrip("/").partition("/")
        self._answer(owner, route, name)

    def send_response(self, code: int, message: str | None = None) -> None:
        # Recorded before a byte of the answer leaves: a client that has its answer can count on
        # finding the request in `requests` (send_error goes through here too).
        self.server.owner.requests.append(  # type: ignore[attr-defined]
            (self.path, code, self.headers.get("If-None-Match"), self.headers.get("If-Modified-Since")))
        super().send_response(code, message)

    def _answer(self, owner: FileServer, route: str, name: str) -> int:
        trouble = owner.misbehave.get(name)
        if isinstance(trouble, int):
            self.send_error(trouble)
            return trouble
        if name not in owner.files or route not in ("files", "lm"):
            self.send_error(404)
            return 404
        if trouble == "stall":
            time.sleep(owner.stall_s)
        data, modified = owner.files[name]
        etag = '"' + hashlib.sha256(data).hexdigest()[:16] + '"' if route == "files" else None
        if (etag is not None and self.headers.get("If-None-Match") == etag) or (
                etag is None and self.headers.get("If-Modified-Since") == modified):
            self.send_response(304)
            self.end_headers()
            return 304
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Last-Modified", modified)
        if etag is not None:
            self.send_header("ETag", etag)
        self.end_headers()
        body = data[: len(data) // 2] if trouble == "truncate" else data
        for start in range(0, len(body), 4096):
            self.wfile.write(body[start:start + 4096])
        self.close_connection = True
        return 200


# -- the one-shot worker -------------------------------------------------------------------------


@dataclass
class WorkerRun:
    process: subprocess.Popen
    log_path: Path

    def wait(self, timeout_s: float = 300) -> int:
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, 9)
            self.process.wait()
            raise AssertionError(f"the worker ran over {timeout_s} s:\n{self.output()}") from None

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def lines(self) -> list[dict]:
        """The JSON log lines (each must be one)."""
        return [json.loads(line) for line in self.output().splitlines() if line.strip()]

    def summary(self) -> dict:
        (finished,) = [line for line in self.lines() if line["message"] == "sync finished"]
        return finished


def start_worker(args: list[str], log_path: Path, settings: dict[str, str],
                 env: dict[str, str] | None = None) -> WorkerRun:
    """`python -m services.sync.worker ARGS` with CITEWEAVE_SYNC_<KEY> for each setting."""
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith("CITEWEAVE_SYNC_") and k != "JOB_COMPLETION_INDEX"}
    environment.update({f"CITEWEAVE_SYNC_{k.upper()}": v for k, v in settings.items()})
    environment.update(env or {})
    environment.setdefault("HF_HUB_OFFLINE", "1")
    environment["PYTHONPATH"] = str(REPO)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "services.sync.worker", *args], env=environment, cwd=REPO,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    return WorkerRun(process, log_path)
