"""`citeweave up --replicas embedder=2`: two embedder processes, and the sync service and the
gateway both spread their Embed calls over them.

The share each embedder got is read from its own Prometheus counter (citeweave_embedder_texts,
incremented by the Embed handler), not from any client's bookkeeping."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from typer.testing import CliRunner

from citeweave.gateway.v1 import gateway_pb2 as gw
from citeweave.gateway.v1 import gateway_pb2_grpc
from citeweave.sync.v1 import sync_pb2, sync_pb2_grpc
from services.cli.main import app
from services.cli.stack import SERVICE_ORDER, UNREACHABLE_URL, LocalStack, parse_replicas
from services.common.clients import is_serving, sync_channel
from services.common.launcher import free_port
from services.evaluation.harness import embedder_counters

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "fixtures" / "arxiv" / "kaggle-format-head200.jsonl"
PDF = REPO / "tests" / "fixtures" / "pdfs" / "2004.07180_SPECTER_2020.acl-main.207.pdf"
CLI = [sys.executable, "-m", "services.cli.main"]
# Round robin over two replicas gives each half; well below half means one was (mostly) idle.
FAIR_SHARE = 0.35
ENDPOINT = re.compile(r"^\s*(?P<name>[a-z]+(?:-\d+)?)\s+(?P<addr>127\.0\.0\.1:\d+)"
                      r"(?:\s+metrics http://127\.0\.0\.1:(?P<metrics>\d+)/metrics)?\s*$")


# --replicas, parsed and refused before anything starts.

@pytest.mark.parametrize(("value", "fragment"), [
    ("embedder", "takes NAME=N"),
    ("embedder=", "takes NAME=N"),
    ("=2", "takes NAME=N"),
    ("embedder=0", "from 1 to 8"),
    ("embedder=9", "from 1 to 8"),
    ("embedder=two", "from 1 to 8"),
    ("embedder=-1", "from 1 to 8"),
    ("milvus=2", "no service 'milvus'"),
    ("retriever=2", "Milvus Lite"),
    ("fetcher=2", "one fetcher address"),
    ("generator=2", "one generator address"),
    ("sync=2", "one sync"),
    ("gateway=2", "entry point"),
])
def test_bad_replicas_exit_2_with_one_line(value, fragment, tmp_path) -> None:
    result = CliRunner().invoke(app, ["up", "--log-dir", str(tmp_path), "--replicas", value])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --replicas"), result.output
    assert fragment in lines[0]
    assert not list(tmp_path.iterdir()), "nothing was started"


def test_replicas_are_parsed() -> None:
    assert parse_replicas([]) == {}
    assert parse_replicas(["embedder=2"]) == {"embedder": 2}
    assert parse_replicas([" embedder = 8 "]) == {"embedder": 8}
    # One process is what every service runs anyway, so saying so is allowed.
    assert parse_replicas(["retriever=1", "embedder=3"]) == {"retriever": 1, "embedder": 3}
    with pytest.raises(ValueError, match="twice"):
        parse_replicas(["embedder=2", "embedder=3"])


def test_the_stack_wires_every_embedder_replica(tmp_path) -> None:
    stack = LocalStack(log_dir=tmp_path, replicas={"embedder": 2},
                       ports={name: free_port() for name in SERVICE_ORDER},
                       settings={"embedder": {"metrics_port": str(free_port())}})
    embedders = stack.plan("embedder")
    assert [(e.port, e.settings) for e in embedders] == [
        (e.port, e.settings) for e in stack.plan("embedder")], "planning twice changes nothing"
    assert [e.title for e in embedders] == ["embedder-1", "embedder-2"]
    assert [e.log_path.name for e in embedders] == ["embedder-1.log", "embedder-2.log"]
    addrs = [e.addr for e in embedders]
    assert len(set(addrs)) == 2 and addrs == stack.addrs("embedder")
    assert addrs[0] == stack.addr("embedder")
    assert len({e.settings["metrics_port"] for e in embedders}) == 2
    assert all(e.environment()["CITEWEAVE_EMBEDDER_PORT"] == str(e.port) for e in embedders)
    (sync,), (gateway,), (retriever,) = (stack.plan(n) for n in ("sync", "gateway", "retriever"))
    assert sync.settings["embedder_addrs"] == gateway.settings["embedder_addrs"] == ",".join(addrs)
    # The retriever only asks one of them for the model's dimension.
    assert retriever.settings["embedder_addr"] == addrs[0]
    # Without replicas nothing changes: one process, embedder.log, as `make demo` has it.
    (alone,) = LocalStack(log_dir=tmp_path, ports={"embedder": free_port()}).plan("embedder")
    assert (alone.title, alone.log_path.name) == ("embedder", "embedder.log")
    with pytest.raises(ValueError, match="Milvus Lite"):
        LocalStack(log_dir=tmp_path, replicas={"retriever": 2}).plan("retriever")


# A real `citeweave up --replicas embedder=2`.

@pytest.fixture(scope="module")
def up(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("replicas")
    (tmp / "pdfs").mkdir()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "CITEWEAVE_EMBEDDER_PORT": str(free_port()),
        "CITEWEAVE_EMBEDDER_MODEL": "all-MiniLM-L6-v2",
        # Two replicas on a 2-core machine: one inference thread each.
        "CITEWEAVE_EMBEDDER_INTRA_OP_THREADS": "1",
        # Each replica's own counter is the observation; replica 2 takes a free metrics port.
        "CITEWEAVE_EMBEDDER_METRICS_PORT": str(free_port()),
        "CITEWEAVE_RETRIEVER_PORT": str(free_port()),
        "CITEWEAVE_RETRIEVER_MILVUS_URI": str(tmp / "store.db"),
        "CITEWEAVE_FETCHER_PORT": str(free_port()),
        "CITEWEAVE_FETCHER_PDF_DIR": str(tmp / "pdfs"),
        "CITEWEAVE_FETCHER_CACHE_DIR": str(tmp / "pdf-cache"),
        "CITEWEAVE_FETCHER_ARXIV_API_URL": f"{UNREACHABLE_URL}/api/query?{{}}",
        "CITEWEAVE_FETCHER_PDF_URL_TEMPLATE": f"{UNREACHABLE_URL}/pdf/{{id}}",
        "CITEWEAVE_GENERATOR_PORT": str(free_port()),
        "CITEWEAVE_SYNC_PORT": str(free_port()),
        "CITEWEAVE_SYNC_STATE_DIR": str(tmp / "sync-state"),
        "CITEWEAVE_SYNC_TOPIC_MODEL_DIR": str(tmp / "topics"),
        "CITEWEAVE_GATEWAY_PORT": str(free_port()),
        "CITEWEAVE_GATEWAY_HTTP_PORT": str(free_port()),
        # Nothing balances over this stack: a short drain keeps the stop test short.
        **{f"CITEWEAVE_{name.upper()}_DRAIN_S": "0.2" for name in SERVICE_ORDER},
    }
    logs, stderr_path = tmp / "logs", tmp / "up.stderr"
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(
            [*CLI, "up", "--replicas", "embedder=2", "--log-dir", str(logs), "--timeout-s", "300"],
            env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=stderr, text=True,
        )
    line = process.stdout.readline()
    output = stderr_path.read_text()
    if line.strip() != "ready":
        process.kill()
        pytest.fail(f"citeweave up did not become ready: {line!r}\n{output}")
    endpoints = {m["name"]: m for m in map(ENDPOINT.match, output.splitlines()) if m}
    yield {"process": process, "env": env, "logs": logs, "output": output,
           "endpoints": endpoints, "stderr": stderr_path}
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        process.wait(120)


def texts_embedded(metrics_port: str) -> int:
    """The replica's own count of texts its Embed handler received."""
    return embedder_counters(int(metrics_port))[0]


def shares(before: list[int], after: list[int]) -> tuple[list[int], int]:
    deltas = [b - a for a, b in zip(before, after)]
    return deltas, sum(deltas)


def test_up_prints_both_embedder_addresses_and_each_serves(up) -> None:
    endpoints = up["endpoints"]
    embedders = [endpoints.get("embedder-1"), endpoints.get("embedder-2")]
    assert all(embedders), up["output"]
    addrs = [e["addr"] for e in embedders]
    assert addrs[0] == f"127.0.0.1:{up['env']['CITEWEAVE_EMBEDDER_PORT']}"
    assert len(set(addrs)) == 2 and all(is_serving(a) for a in addrs)
    assert embedders[0]["metrics"] == up["env"]["CITEWEAVE_EMBEDDER_METRICS_PORT"]
    assert embedders[1]["metrics"] and embedders[1]["metrics"] != embedders[0]["metrics"]
    for name in ("retriever", "fetcher", "generator", "sync", "gateway"):
        assert name in endpoints, up["output"]
    assert {p.name for p in up["logs"].iterdir()} >= {"embedder-1.log", "embedder-2.log",
                                                       "retriever.log", "gateway.log"}


def test_sync_and_gateway_both_spread_their_texts_over_the_two_embedders(up) -> None:
    metrics = [up["endpoints"][f"embedder-{i}"]["metrics"] for i in (1, 2)]
    start = [texts_embedded(m) for m in metrics]

    # A sync of 200 records in batches of 16: 13 Embed calls from the sync service.
    with sync_channel(up["endpoints"]["sync"]["addr"]) as channel:
        events = list(sync_pb2_grpc.SyncServiceStub(channel).Sync(sync_pb2.SyncRequest(
            source_path=str(CORPUS), options=sync_pb2.SyncOptions(batch_size=16)), timeout=600))
    summary = events[-1].summary
    assert summary.counts.new == summary.counts.upserted == 200, summary
    synced = [texts_embedded(m) for m in metrics]
    deltas, total = shares(start, synced)
    assert total == summary.counts.embedded == 200, deltas
    assert min(deltas) >= FAIR_SHARE * total, f"sync: texts per embedder {deltas}"
    print(f"sync: texts per embedder {deltas}")

    # One PDF through the gateway: its pages are one request's texts, split over both.
    request = gw.GenerateRelatedWorkRequest(
        pdf=PDF.read_bytes(), filename=PDF.name, options=gw.RetrievalOptions(breadth=5, depth=1),
        backend=gw.GENERATOR_BACKEND_EXTRACTIVE)
    with grpc.insecure_channel(up["endpoints"]["gateway"]["addr"]) as channel:
        events = list(gateway_pb2_grpc.GatewayServiceStub(channel).GenerateRelatedWork(
            request, timeout=300))
    result = events[-1].result
    assert result.input_kind == "pdf" and len(result.shortlist) == 5, result.warnings
    deltas, total = shares(synced, [texts_embedded(m) for m in metrics])
    assert total >= 6, f"the PDF's pages were embedded: {deltas}"
    assert min(deltas) >= FAIR_SHARE * total, f"gateway: texts per embedder {deltas}"
    print(f"gateway: texts per embedder {deltas}")


def test_sigterm_stops_every_replica(up) -> None:
    addrs = [up["endpoints"][f"embedder-{i}"]["addr"] for i in (1, 2)]
    process = up["process"]
    process.send_signal(signal.SIGTERM)
    assert process.wait(120) == 0
    assert not any(is_serving(a) for a in (*addrs, up["endpoints"]["gateway"]["addr"]))
    assert "stopping" in up["stderr"].read_text()
    # Both replicas drained and logged their stop.
    for i in (1, 2):
        last = [json.loads(line) for line in (up["logs"] / f"embedder-{i}.log").read_text()
                .splitlines() if line.startswith("{")]
        assert any(entry.get("message") == "stopped" for entry in last), last[-3:]
