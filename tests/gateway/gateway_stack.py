"""The whole pipeline as real processes on 127.0.0.1, for the gateway's end-to-end tests: embedder
(MiniLM), retriever (Milvus Lite) with the seven fixture papers plus 60 arXiv distractors, fetcher
reading the fixture PDFs from a LocalArxiv mirror, generator (extractive), and the gateway with
its gRPC and HTTP ports."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from services.common.clients import sync_channel
from services.common.corpus import embedding_text, read_jsonl, row_from_arxiv
from services.common.launcher import ServiceProcess, free_port
from services.fetcher.local_arxiv import LocalArxiv
from tests.conftest import running_service

REPO = Path(__file__).resolve().parents[2]
PDFS = REPO / "tests" / "fixtures" / "pdfs"
DISTRACTORS = REPO / "tests" / "fixtures" / "arxiv" / "kaggle-format-head200.jsonl"
QUERY = (
    "We study representation learning for scientific documents and citation recommendation. "
    "Using a large corpus of academic papers with full text and citation links, we train "
    "transformer encoders on the citation graph and evaluate document embeddings on "
    "retrieval, ranking and summarization tasks."
)
QUESTION = "How are document embeddings of scientific papers trained from citations?"
API_KEY = "test-key-0123456789abcdef"


def fixture_papers() -> list[dict]:
    return [json.loads(line) for line in (PDFS / "papers.jsonl").read_text().splitlines()]


def arxiv_fixture_papers() -> list[dict]:
    return [p for p in fixture_papers() if not p["id"].startswith("10.")]


def store_corpus(embedder_addr: str, retriever_addr: str) -> None:
    """The seven fixture papers plus 60 arXiv distractors, embedded and upserted."""
    from citeweave.embedder.v1 import embedder_pb2, embedder_pb2_grpc
    from citeweave.retriever.v1 import retriever_pb2, retriever_pb2_grpc

    rows = [(p["id"], p["title"], p["abstract"], p["authors"], p["year"])
            for p in fixture_papers()]
    for i, record in enumerate(read_jsonl(DISTRACTORS)):
        if i >= 60:
            break
        row = row_from_arxiv(record)
        rows.append((row.id, row.title, row.abstract, row.authors, row.year))
    with sync_channel(embedder_addr) as emb, sync_channel(retriever_addr) as ret:
        vectors = embedder_pb2_grpc.EmbedderServiceStub(emb).Embed(
            embedder_pb2.EmbedRequest(texts=[embedding_text(r[1], r[2]) for r in rows]), timeout=300
        ).vectors
        retriever_pb2_grpc.RetrieverServiceStub(ret).Upsert(retriever_pb2.UpsertRequest(records=[
            retriever_pb2.PaperRecord(
                paper=retriever_pb2.Paper(id=r[0], title=r[1], abstract=r[2], authors=r[3], year=r[4]),
                vector=v.values,
            )
            for r, v in zip(rows, vectors)
        ]), timeout=120)


def mirror_fixture_pdfs(arxiv: LocalArxiv) -> None:
    for paper in arxiv_fixture_papers():
        arxiv.add(paper["id"], title=paper["title"], abstract=paper["abstract"],
                  pdf=PDFS / paper["file"])


@dataclass
class GatewayStack:
    tmp: Path
    arxiv: LocalArxiv
    processes: dict[str, ServiceProcess] = field(default_factory=dict)
    http_port: int = 0
    api_key: str | None = None

    @property
    def grpc_addr(self) -> str:
        return self.processes["gateway"].addr

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def addr(self, name: str) -> str:
        return self.processes[name].addr

    def stop(self, name: str) -> None:
        """Stops one service (the others keep running), as an outage would."""
        self.processes[name].stop(timeout_s=30)

    def log(self, name: str) -> str:
        return self.processes[name].log_path.read_text()


def start_gateway(stack: GatewayStack, settings: dict[str, str] | None = None,
                  name: str = "gateway") -> ServiceProcess:
    """A gateway process wired to the stack's services (its own free gRPC and HTTP ports)."""
    http_port = free_port()
    wired = {
        "embedder_addrs": stack.addr("embedder"), "retriever_addr": stack.addr("retriever"),
        "fetcher_addr": stack.addr("fetcher"), "generator_addr": stack.addr("generator"),
        "http_port": str(http_port),
    }
    process = ServiceProcess(name="gateway", port=free_port(), settings={**wired, **(settings or {})},
                             log_path=stack.tmp / f"{name}.log").start()
    try:
        process.wait_serving(120)
    except BaseException:
        process.stop()
        raise
    stack.processes[name] = process
    if name == "gateway":
        stack.http_port = http_port
    return process


@contextmanager
def running_gateway_stack(
    tmp: Path,
    embedder: ServiceProcess | None = None,
    gateway_settings: dict[str, str] | None = None,
    generator_settings: dict[str, str] | None = None,
) -> Iterator[GatewayStack]:
    """Starts every service (its own embedder unless one is given) and stores the corpus."""
    with ExitStack() as stack_exit:
        arxiv = stack_exit.enter_context(LocalArxiv())
        mirror_fixture_pdfs(arxiv)
        stack = GatewayStack(tmp=tmp, arxiv=arxiv)
        if embedder is None:
            embedder = stack_exit.enter_context(
                running_service("embedder", tmp, {"model": "all-MiniLM-L6-v2"}))
        stack.processes["embedder"] = embedder
        stack.processes["retriever"] = stack_exit.enter_context(running_service(
            "retriever", tmp, {"milvus_uri": str(tmp / "store.db"),
                               "embedder_addr": embedder.addr, "write_settle_delay_s": "0.2"}))
        stack.processes["fetcher"] = stack_exit.enter_context(running_service("fetcher", tmp, {
            "arxiv_api_url": arxiv.api_url, "pdf_url_template": arxiv.pdf_url_template,
            "arxiv_delay_s": "0", "cache_dir": str(tmp / "pdf-cache"),
            "download_timeout_s": "5", "download_retries": "0",
        }))
        stack.processes["generator"] = stack_exit.enter_context(
            running_service("generator", tmp, generator_settings or {}))
        store_corpus(embedder.addr, stack.addr("retriever"))
        # Every test calls from 127.0.0.1, one tenant when keys are off: the default limits
        # (30 a minute) would refuse a suite's worth of requests. Limits have their own gateways.
        start_gateway(stack, {"requests_per_minute": "100000", "max_concurrent_per_key": "64",
                              **(gateway_settings or {})})
        stack_exit.callback(lambda: stack.processes["gateway"].stop())
        if gateway_settings and gateway_settings.get("api_keys_file"):
            stack.api_key = API_KEY
        yield stack
        for name, process in stack.processes.items():
            if name.startswith("gateway"):
                process.stop()


def write_keys_file(path: Path, **limits) -> Path:
    """An API keys file with API_KEY for tenant "lab" (limits as given) and a second tenant."""
    path.write_text(json.dumps({
        API_KEY: {"tenant": "lab", **limits},
        "other-key-0123456789abcdef": {"tenant": "other"},
    }))
    return path
