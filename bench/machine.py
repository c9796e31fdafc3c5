"""What the benchmarks ran on: CPU, cores, memory, Python, date and load.

These machines are shared, so every saved result carries the load average next to the date:
a figure measured at load 4 on two cores is not comparable with one measured at load 0.2.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
from pathlib import Path


def _cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> list[str]:
    """The SIMD flags that decide the embedder's speed (AVX2, AVX-512, VNNI)."""
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_tile")
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                present = set(line.split(":", 1)[1].split())
                return [flag for flag in wanted if flag in present]
    except OSError:
        pass
    return []


def _memory_gib(meminfo: Path = Path("/proc/meminfo")) -> float | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return None


def load_average() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def describe() -> dict:
    """A JSON-serializable description of this machine, now."""
    return {
        "cpu_model": _cpu_model(),
        "cpu_flags": _cpu_flags(),
        "cpu_count": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "load_average_at_start": load_average(),
    }
