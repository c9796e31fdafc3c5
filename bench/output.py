"""The output contract of every benchmark: one JSON object, printed as the last line of stdout.

Progress goes to stderr, but a library may still print to stdout before the result; the
collector (bench/run_all.py) therefore reads only the last non-empty line.
"""

from __future__ import annotations

import json
import math
from typing import Any


class BenchOutputError(ValueError):
    """A benchmark's stdout did not end with one JSON object."""


def _finite(value: Any) -> Any:
    """NaN and infinity are not JSON (json.dumps would write them anyway); they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def dumps(result: dict) -> str:
    """One line of strict JSON (numpy scalars converted, no NaN)."""
    return json.dumps(_finite(result), default=_numpy_default, allow_nan=False)


def _numpy_default(value: Any) -> Any:
    # numpy scalars and arrays slip into results through np.percentile and friends.
    if hasattr(value, "tolist"):
        return _finite(value.tolist())
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def emit(result: dict) -> None:
    print(dumps(result), flush=True)


def last_json_object(stdout: str) -> dict:
    """The JSON object on the last non-empty line of a benchmark's stdout."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise BenchOutputError("the benchmark printed nothing on stdout")
    try:
        value = json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise BenchOutputError(f"the last line of stdout is not JSON ({exc}): {lines[-1][:200]!r}")
    if not isinstance(value, dict):
        raise BenchOutputError(f"the last line of stdout is JSON but not an object: {lines[-1][:200]!r}")
    return value
