"""Settings shared by every service; each service subclasses with its own env prefix."""

from __future__ import annotations

import re

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ServiceSettings(BaseSettings):
    """Base for `CITEWEAVE_<SVC>_*` settings. Malformed values stop the service at start-up."""

    model_config = SettingsConfigDict(extra="forbid", validate_default=True)

    host: str = Field(
        "127.0.0.1",
        description="Address to bind. 127.0.0.1 locally; containers set 0.0.0.0.",
    )
    port: int = Field(0, ge=0, le=65535, description="gRPC port; 0 picks a free one.")
    metrics_port: int = Field(
        0, ge=0, le=65535, description="Prometheus /metrics port; 0 disables the endpoint."
    )
    log_level: str = Field("INFO", description="Python logging level name.")
    drain_s: float = Field(
        2.0, ge=0, description="After SIGTERM: seconds NOT_SERVING before the server stops."
    )
    grace_s: float = Field(
        10.0, ge=0, description="Seconds in-flight RPCs get to finish when the server stops."
    )
    max_message_mb: int = Field(
        64, ge=1, le=2047, description="Largest gRPC message accepted or sent, in MiB."
    )
    # Both end up as int32 milliseconds in gRPC: at most ~24 days.
    max_connection_age_s: float = Field(
        0.0, ge=0, le=2_000_000,
        description="Seconds after which the server asks a client to reconnect (GOAWAY; gRPC "
        "adds +-10% jitter); 0 = never. Clients keep one HTTP/2 connection per address and "
        "resolve DNS only when one closes, so on Kubernetes a replica added by the autoscaler "
        "behind a headless Service gets calls only after its callers reconnect: e.g. 300 for "
        "the embedder. Calls in flight finish on the old connection (see the grace).",
    )
    max_connection_age_grace_s: float = Field(
        600.0, ge=0, le=2_000_000,
        description="With max_connection_age_s: seconds a closing connection's calls in flight "
        "still get before they are cut. Streams outlive unary calls: keep it above the longest "
        "stream the service serves (a gateway request runs up to its request_timeout_s, a sync "
        "job for as long as the corpus takes, so leave the sync's age at 0).",
    )


def env_prefix(service: str) -> str:
    return f"CITEWEAVE_{service.upper()}_"


_HOST_PORT = re.compile(r"^[^\s:/,]+:\d{1,5}$")


def check_host_port(value: str, name: str) -> str:
    """A peer address setting: host:port, or ValueError naming the setting."""
    if not _HOST_PORT.match(value):
        raise ValueError(f"{name} must be host:port, got {value!r}")
    return value


def check_host_port_list(value: str, name: str) -> str:
    """A comma-separated host:port list (blanks around commas dropped), normalized; ValueError
    naming the setting when it is empty or an entry is not host:port."""
    addrs = [a.strip() for a in value.split(",") if a.strip()]
    if not addrs:
        raise ValueError(f"{name} needs at least one host:port")
    return ",".join(check_host_port(a, f"each address of {name}") for a in addrs)
