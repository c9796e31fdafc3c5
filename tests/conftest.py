"""Fixtures shared by the suite: real service processes on free 127.0.0.1 ports."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from services.common.launcher import ServiceProcess, free_port
from services.common.milvus_server import running_server

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@contextmanager
def running_service(
    name: str, tmp_path: Path, settings: dict[str, str] | None = None, timeout_s: float = 180
) -> Iterator[ServiceProcess]:
    """Starts `python -m services.<name>` on a free port and waits for SERVING; stops it after."""
    service = ServiceProcess(
        name=name,
        port=free_port(),
        settings=settings or {},
        log_path=tmp_path / f"{name}.log",
    ).start()
    try:
        service.wait_serving(timeout_s)
        yield service
    finally:
        service.stop()


def start_up_failure_log(name: str, settings: dict[str, str], tmp_path: Path) -> str:
    """Starts `python -m services.<name>` with bad settings; asserts it stops at start-up with
    exit code 2 and an "invalid setting" message, and returns its log."""
    log = tmp_path / f"{name}.log"
    process = ServiceProcess(name, free_port(), settings, log_path=log).start()
    try:
        code = process.process.wait(120)
    finally:
        process.stop()
    text = log.read_text()
    assert code == 2, text
    assert "invalid setting" in text
    return text


@pytest.fixture(scope="session")
def session_tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("session")


@pytest.fixture(scope="session")
def minilm_embedder(session_tmp) -> Iterator[ServiceProcess]:
    """One MiniLM embedder process for every test that is not about the model itself.

    Its ONNX export lives in the default cache (CITEWEAVE_CACHE_DIR or ~/.cache/citeweave), which
    `make install` pre-builds; without it the first start exports once (~15 s) for the session.
    """
    with running_service("embedder", session_tmp, {"model": "all-MiniLM-L6-v2"}) as service:
        yield service


@pytest.fixture(scope="session")
def milvus_server_uri(tmp_path_factory) -> Iterator[str]:
    """A real Milvus server (PyPI `milvus==2.3.5`) on 127.0.0.1 for the session; tests use their
    own collections. Skipped when the package is absent."""
    pytest.importorskip("milvus", reason="needs the Milvus server package: pip install milvus==2.3.5")
    with running_server(tmp_path_factory.mktemp("milvus-server")) as uri:
        yield uri


@pytest.fixture(scope="session")
def gateway_stack(minilm_embedder, tmp_path_factory):
    """Every service running (keys off, the extractive writer) with the fixture corpus stored,
    shared by the gateway, HTTP, client and browser tests. Tests leave it running: the outage
    tests start their own; tests of keys and limits start their own gateway on it."""
    from tests.gateway.gateway_stack import running_gateway_stack

    with running_gateway_stack(tmp_path_factory.mktemp("gateway"), embedder=minilm_embedder) as stack:
        yield stack
