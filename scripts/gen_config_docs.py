"""Writes docs/configuration.md from the services' settings classes, so the docs match the code.

tests/test_config_docs.py fails when the committed file differs from what this renders.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path

from pydantic import SecretStr
from pydantic_core import PydanticUndefined

from services.cli.stack import SERVICE_ORDER, settings_class
from services.common.settings import env_prefix

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"

HEADER = """# Configuration

Every service reads its settings from environment variables `CITEWEAVE_<SERVICE>_<SETTING>`
(pydantic-settings). A malformed value stops the service at start-up (exit code 2) with a log
line naming the variable, the value and the rule. Peers are given as `*_ADDR` (`host:port`), or
as `*_ADDRS` (a comma-separated `host:port` list) where calls are spread over replicas.

This file is generated from the code by `python scripts/gen_config_docs.py`; a test fails when
it is out of date.
"""


def _default(field) -> str:
    if field.default is PydanticUndefined:
        return "(required)" if field.default_factory is None else "(computed)"
    default = field.default
    if isinstance(default, SecretStr):
        return "(secret, empty)" if not default.get_secret_value() else "(secret, set)"
    if isinstance(default, Enum):
        default = default.value
    return f"`{default!r}`" if default not in ("", None) else "(empty)"


def render() -> str:
    parts = [HEADER]
    for name in SERVICE_ORDER:
        cls = settings_class(name)
        prefix = env_prefix(name)
        parts.append(f"\n## {name}\n\n| variable | default | description |\n|---|---|---|")
        for key, field in cls.model_fields.items():
            description = (field.description or "").replace("|", "\\|").replace("\n", " ")
            parts.append(f"| `{prefix}{key.upper()}` | {_default(field)} | {description} |")
    return "\n".join(parts) + "\n"


def main() -> int:
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(render())
    print(DOC)
    return 0


if __name__ == "__main__":
    sys.exit(main())
