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


MAX_REPLICAS = 8
# The services that run as one process locally, and why (`--replicas` refusals say so).
SINGLE_PROCESS = {
    "retriever": "it alone opens the Milvus Lite directory, and one process at a time may "
                 "(a second gets DataDirLockedError)",
    "fetcher": "its one caller, the gateway, takes one fetcher address, and one fetcher already "
               "extracts pages in a pool of worker processes",
    "generator": "its one caller, the gateway, takes one generator address, and one generator "
                 "already sends its LLM calls concurrently (max_concurrent_requests)",
    "sync": "one sync or topic fit runs at a time, and it already spreads its batches over "
            "every embedder",
    "gateway": "it is the stack's one entry point, on fixed gRPC and HTTP ports",
}
REPLICABLE = tuple(name for name in SERVICE_ORDER if name not in SINGLE_PROCESS)


def _check_name(name: str, value: str) -> None:
    if name not in SERVICE_ORDER:
        raise ValueError(f"--replicas {value}: there is no service {name!r}; the services are "
                         f"{', '.join(SERVICE_ORDER)}")


def check_replicas(replicas: dict[str, int]) -> dict[str, int]:
    """ValueError, in one line a person can act on, for a count `citeweave up` cannot start."""
    for name, count in replicas.items():
        _check_name(name, f"{name}={count}")
        if not 1 <= count <= MAX_REPLICAS:
            raise ValueError(f"--replicas {name}={count}: N must be a whole number from 1 to "
                             f"{MAX_REPLICAS}")
        if count > 1 and name in SINGLE_PROCESS:
            raise ValueError(f"--replicas {name}={count}: the {name} runs as one process "
                             f"locally: {SINGLE_PROCESS[name]}. Only "
                             f"{', '.join(REPLICABLE)} can have replicas")
    return replicas


def parse_replicas(values: list[str]) -> dict[str, int]:
    """`--replicas NAME=N` options (repeatable) as {name: N}, checked."""
    replicas: dict[str, int] = {}
    for value in values:
        name, sep, number = (part.strip() for part in value.partition("="))
        if not sep or not name or not number:
            raise ValueError(f"--replicas takes NAME=N, e.g. --replicas embedder=2; got {value!r}")
        _check_name(name, value)
        if name in replicas:
            raise ValueError(f"--replicas names {name} twice; give it once")
        if not number.isdigit():
            raise ValueError(f"--replicas {value}: N must be a whole number from 1 to "
                             f"{MAX_REPLICAS}")
        replicas[name] = int(number)
    return check_replicas(replicas)


@dataclass
class LocalStack:
    log_dir: Path
    # The first replica's port per service (CITEWEAVE_<SVC>_PORT or the default when absent);
    # further replicas take free ports.
    ports: dict[str, int] = field(default_factory=dict)
    settings: dict[str, dict[str, str]] = field(default_factory=dict)
    # Processes per service, 1 when absent (see check_replicas).
    replicas: dict[str, int] = field(default_factory=dict)
    processes: list[ServiceProcess] = field(default_factory=list)
    _extra_ports: dict[str, list[int]] = field(default_factory=dict)
    _metrics: dict[str, list[int]] = field(default_factory=dict)

    def port(self, name: str) -> int:
        if name not in self.ports:
            self.ports[name] = configured_port(name)
        return self.ports[name]

    def count(self, name: str) -> int:
        return self.replicas.get(name, 1)

    def replica_ports(self, name: str) -> list[int]:
        extra = self._extra_ports.setdefault(name, [])
        while len(extra) < self.count(name) - 1:
            extra.append(free_port())
        return [self.port(name), *extra]

    def addrs(self, name: str) -> list[str]:
        """Every replica's address, the first one first."""
        return [f"127.0.0.1:{port}" for port in self.replica_ports(name)]

    def addr(self, name: str) -> str:
        """The first replica's address (the only one, for every service but the embedder)."""
        return f"127.0.0.1:{self.port(name)}"

    def _settings_for(self, name: str) -> dict[str, str]:
        embedders = ",".join(self.addrs("embedder"))
        wired = {
            # The retriever only asks for the model's dimension: one replica answers for all.
            "retriever": {"embedder_addr": self.addr("embedder")},
            "sync": {"embedder_addrs": embedders, "retriever_addr": self.addr("retriever")},
            "gateway": {"embedder_addrs": embedders,
                        **{f"{peer}_addr": self.addr(peer)
                           for peer in ("retriever", "fetcher", "generator")}},
        }.get(name, {})
        return {**wired, **self.settings.get(name, {})}

    def _metrics_ports(self, name: str) -> list[int]:
        """Replicas cannot share a metrics port: the first keeps the configured one, the others
        take free ports; 0 (off) stays off for all."""
        if len(self._metrics.get(name, ())) != self.count(name):
            configured = self.settings.get(name, {}).get("metrics_port")
            first = (int(configured) if configured is not None
                     else settings_class(name)().metrics_port)
            self._metrics[name] = ([first, *(free_port() for _ in range(self.count(name) - 1))]
                                   if first else [0] * self.count(name))
        return self._metrics[name]

    def plan(self, name: str) -> list[ServiceProcess]:
        """The processes of one service, not started: one per replica, each on its own port
        with its own log (embedder-1.log, embedder-2.log, ...; embedder.log when alone)."""
        check_replicas(self.replicas)
        settings = self._settings_for(name)
        alone = self.count(name) == 1
        return [
            ServiceProcess(
                name=name, port=port, label="" if alone else f"{name}-{i}",
                settings={**settings, **({"metrics_port": str(metrics)} if metrics else {})},
                log_path=self.log_dir / (f"{name}.log" if alone else f"{name}-{i}.log"),
            )
            for i, (port, metrics) in enumerate(
                zip(self.replica_ports(name), self._metrics_ports(name)), start=1)
        ]

    def start(self, timeout_s: float = 600, log=print) -> None:
        try:
            for name in SERVICE_ORDER:
                # Replicas warm up together: a model load is the slow part of starting.
                group = self.plan(name)
                for service in group:
                    self.processes.append(service.start())
                    log(f"starting {service.title} on {service.addr} (log: {service.log_path})")
                for service in group:
                    service.wait_serving(timeout_s)
                    log(f"{service.title} is serving on {service.addr}")
        except BaseException:
            self.stop()
            raise

    def endpoints(self) -> list[str]:
        """One line per running process: its gRPC address and, when on, its metrics URL."""
        lines = []
        for service in self.processes:
            line = f"{service.title:<12} {service.addr}"
            metrics = int(service.settings.get("metrics_port") or 0)
            if metrics:
                line += f"  metrics http://127.0.0.1:{metrics}/metrics"
            lines.append(line)
        return lines

    def stop(self) -> None:
        for service in reversed(self.processes):
            service.stop()
        self.processes.clear()
