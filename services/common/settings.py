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


def env_prefix(service: str) -> str:
    return f"CITEWEAVE_{service.upper()}_"


_HOST_PORT = re.compile(r"^[^\s:/,]+:\d{1,5}$")


def check_host_port(value: str, name: str) -> str:
    """A peer address setting: host:port, or ValueError naming the setting."""
    if not _HOST_PORT.match(value):
        raise ValueError(f"{name} must be host:port, got {value!r}")
    return value
