"""The services a benchmark starts: real processes on free 127.0.0.1 ports."""

from __future__ import annotations

from pathlib import Path

from services.common.launcher import ServiceProcess, free_port

START_TIMEOUT_S = 1800  # a first start exports the ONNX model


def start_service(
    name: str, settings: dict[str, str], log_path: Path, timeout_s: float = START_TIMEOUT_S
) -> ServiceProcess:
    """Started and SERVING, or stopped again and the error raised. No drain on stop: nothing
    routes traffic to a benchmark's services."""
    service = ServiceProcess(
        name=name, port=free_port(), settings={**settings, "drain_s": "0"}, log_path=log_path,
    ).start()
    try:
        service.wait_serving(timeout_s)
    except BaseException:
        service.stop()
        raise
    return service
