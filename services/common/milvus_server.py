"""A real Milvus server (PyPI `milvus==2.3.5`, a dev dependency) for tests and benchmarks.

The tests that need a server and the retriever benchmark's size sweep (Milvus Lite cannot hold a
million vectors in benchmark time on two cores) start one here, on 127.0.0.1 in a fresh base
directory.

`python -m services.common.milvus_server BASE_DIR` runs the server until killed and prints `READY <port>`
once it answers; `running_server()` starts that in its own process group and ends the whole group
afterwards, because the server's own stop() is not clean.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

REPO = Path(__file__).resolve().parents[2]

# Without these every component advertises the machine's external address, which is not
# reachable here (DESIGN.md); 127.0.0.1 keeps all traffic local.
COMPONENTS = (
    "rootCoord", "proxy", "queryCoord", "queryNode", "indexCoord", "indexNode", "dataCoord",
    "dataNode",
)
START_TIMEOUT_S = 180


def _serve(base_dir: str) -> None:
    from milvus import default_server

    default_server.set_base_dir(base_dir)
    for component in COMPONENTS:
        default_server.config.set(f"{component}.ip", "127.0.0.1")
    default_server.start()
    print(f"READY {default_server.listen_port}", flush=True)
    while True:
        time.sleep(3600)


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
    raise RuntimeError(f"Milvus server did not start within {timeout_s:.0f}s:\n" + "\n".join(seen[-20:]))


def _drain(stream: IO[str]) -> None:
    for _ in stream:
        pass


def _kill_group(process: subprocess.Popen) -> None:
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 30)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait_s)
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def running_server(
    base_dir: Path | None = None, timeout_s: float = START_TIMEOUT_S
) -> Iterator[str]:
    """A fresh Milvus server for the duration of the block; yields its http:// URI. base_dir must
    be new (restarting on a used one can wait ~60 s for stale sessions); default: a temporary one."""
    try:
        import milvus  # noqa: F401  (only to fail early with an actionable message)
    except ImportError as exc:
        raise SystemExit(
            "the Milvus server store needs the dev dependency milvus==2.3.5: "
            "pip install -e '.[dev]' (make install does)"
        ) from exc
    with contextlib.ExitStack() as stack:
        if base_dir is None:
            base_dir = Path(stack.enter_context(
                tempfile.TemporaryDirectory(prefix="citeweave-milvus-")
            ))
        process = subprocess.Popen(
            [sys.executable, "-m", "services.common.milvus_server", str(base_dir)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            cwd=REPO,
        )
        try:
            port = _wait_ready(process, timeout_s)
            # Keep reading its output: a full pipe would block the server mid-run.
            threading.Thread(target=_drain, args=(process.stdout,), daemon=True).start()
            yield f"http://127.0.0.1:{port}"
        finally:
            _kill_group(process)


if __name__ == "__main__":
    _serve(sys.argv[1])
