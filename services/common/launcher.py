"""Starts services as their own local processes (`citeweave up`, integration tests)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from services.common.clients import is_serving
from services.common.settings import env_prefix

REPO = Path(__file__).resolve().parents[2]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class ServiceProcess:
    """One `python -m services.<name>` process bound to 127.0.0.1:port."""

    name: str
    port: int
    settings: dict[str, str] = field(default_factory=dict)
    log_path: Path | None = None
    process: subprocess.Popen | None = None
    _log: IO | None = None
    # How messages name it: "embedder-2" for a replica; the service name when empty.
    label: str = ""

    @property
    def title(self) -> str:
        return self.label or self.name

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        prefix = env_prefix(self.name)
        env.update({f"{prefix}HOST": "127.0.0.1", f"{prefix}PORT": str(self.port)})
        env.update({f"{prefix}{k.upper()}": str(v) for k, v in self.settings.items()})
        env.setdefault("HF_HUB_OFFLINE", "1")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        return env

    def start(self) -> "ServiceProcess":
        out: IO | int = subprocess.DEVNULL
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = self.log_path.open("ab")
            out = self._log
        self.process = subprocess.Popen(
            [sys.executable, "-m", f"services.{self.name}"],
            env=self.environment(),
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            start_new_session=True,
        )
        return self

    def log_tail(self, lines: int = 20) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def wait_serving(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.title} exited with code {self.process.returncode} before serving:\n"
                    f"{self.log_tail()}"
                )
            if is_serving(self.addr):
                return
            time.sleep(0.25)
        raise TimeoutError(
            f"{self.title} did not report SERVING on {self.addr} within {timeout_s:.0f}s:\n"
            f"{self.log_tail()}"
        )

    def stop(self, timeout_s: float = 90.0) -> int | None:
        """SIGTERM (graceful drain), then SIGKILL of the whole process group if it lingers.

        The default is generous because Milvus Lite's close waits for an index build in progress
        (32 s measured at 100k vectors); a kill then costs a replay of its log on the next start."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        return self.process.returncode
