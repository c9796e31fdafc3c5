"""The local stack: each service as its own process on 127.0.0.1, started in dependency order."""

from __future__ import annotations

import importlib
import signal
from dataclasses import dataclass, field
from pathlib import Path

from services.common.launcher import ServiceProcess, free_port

# Start order: a service's peers come before it.
SERVICE_ORDER = ("embedder", "retriever", "fetcher", "generator", "sync", "gateway")
SETTINGS_CLASSES = {
    "embedder": "services.embedder.settings.EmbedderSettings",
    "retriever": "services.retriever.settings.RetrieverSettings",
    "fetcher": "services.fetcher.settings.FetcherSettings",
    "generator": "services.generator.settings.GeneratorSettings",
    "sync": "services.sync.settings.SyncSettings",
    "gateway": "services.gateway.settings.GatewaySettings",
}


# A closed local port: where an offline fetcher's remote sources point, so nothing leaves the
# machine even if a code path ignored pdf_dir.
UNREACHABLE_URL = "http://127.0.0.1:9"


def offline_fetcher_settings(pdf_dir: Path, cache_dir: Path | None = None) -> dict[str, str]:
    """Fetcher settings that read PDFs from `pdf_dir` only and never reach arXiv."""
    settings = {
        "pdf_dir": str(pdf_dir),
        "arxiv_api_url": f"{UNREACHABLE_URL}/api/query?{{}}",
        "pdf_url_template": f"{UNREACHABLE_URL}/pdf/{{id}}",
    }
    if cache_dir is not None:
        settings["cache_dir"] = str(cache_dir)
    return settings


def unwind_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C, so the `finally` of a command stops the services it started
    instead of leaving them running."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


def settings_class(name: str) -> type:
    module, _, class_name = SETTINGS_CLASSES[name].rpartition(".")
    return getattr(importlib.import_module(module), class_name)


def configured_port(name: str) -> int:
    """The port from CITEWEAVE_<SVC>_PORT or the service's default; a bad value fails here."""
    return settings_class(name)().port or free_port()


@dataclass
class LocalStack:
    log_dir: Path
    ports: dict[str, int] = field(default_factory=dict)
    settings: dict[str, dict[str, str]] = field(default_factory=dict)
    processes: list[ServiceProcess] = field(default_factory=list)

    def port(self, name: str) -> int:
        if name not in self.ports:
            self.ports[name] = configured_port(name)
        return self.ports[name]

    def addr(self, name: str) -> str:
        return f"127.0.0.1:{self.port(name)}"

    def _settings_for(self, name: str) -> dict[str, str]:
        wired = {
            "retriever": {"embedder_addr": self.addr("embedder")},
            "sync": {"embedder_addrs": self.addr("embedder"), "retriever_addr": self.addr("retriever")},
            "gateway": {f"{peer}_addr": self.addr(peer)
                        for peer in ("embedder", "retriever", "fetcher", "generator")},
        }.get(name, {})
        return {**wired, **self.settings.get(name, {})}

    def start(self, timeout_s: float = 600, log=print) -> None:
        try:
            for name in SERVICE_ORDER:
                service = ServiceProcess(
                    name=name,
                    port=self.port(name),
                    settings=self._settings_for(name),
                    log_path=self.log_dir / f"{name}.log",
                )
                self.processes.append(service.start())
                log(f"starting {name} on {service.addr} (log: {service.log_path})")
                service.wait_serving(timeout_s)
                log(f"{name} is serving on {service.addr}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for service in reversed(self.processes):
            service.stop()
        self.processes.clear()
