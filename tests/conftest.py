"""Fixtures shared by the suite: real service processes on free 127.0.0.1 ports."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from services.common.launcher import ServiceProcess, free_port

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]


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


MILVUS_START_TIMEOUT_S = 180


def _wait_ready(process: subprocess.Popen, timeout_s: float) -> int:
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    while time.monotonic() < deadline:
        if not selector.select(timeout=1.0):
            if process.poll() is not None:
                break
            continue
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line.rstrip())
        if line.startswith("READY "):
            return int(line.split()[1])
    raise RuntimeError(f"Milvus server did not start within {timeout_s:.0f}s:\n" + "\n".join(seen))


@pytest.fixture(scope="session")
def milvus_server_uri(tmp_path_factory) -> Iterator[str]:
    """A real Milvus server (PyPI `milvus==2.3.5`) on 127.0.0.1 for the session; tests use their
    own collections. Skipped when the package is absent. Runs in its own process group, which is
    killed at the end (the server's stop() is not clean)."""
    pytest.importorskip("milvus", reason="needs the Milvus server package: pip install milvus==2.3.5")
    base = tmp_path_factory.mktemp("milvus-server")
    process = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "milvus_server_process.py"), str(base)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        yield f"http://127.0.0.1:{_wait_ready(process, MILVUS_START_TIMEOUT_S)}"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(process.pid, signal.SIGKILL)  # the milvus binary, if it outlived its parent
        except ProcessLookupError:
            pass
        process.wait()
