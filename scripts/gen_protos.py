"""Regenerates the Python stubs for every proto under protos/ into services/common/.

The output is committed; tests/test_protos.py regenerates into a temporary directory and fails
when the committed stubs differ, so a proto change without regeneration cannot land.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grpc_tools import protoc

REPO = Path(__file__).resolve().parents[1]
PROTO_ROOT = REPO / "protos"
DEFAULT_OUT = REPO / "services" / "common"


def proto_files() -> list[Path]:
    return sorted(PROTO_ROOT.rglob("*.proto"))


def generate(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    protos = [str(p.relative_to(PROTO_ROOT)) for p in proto_files()]
    include = str(Path(protoc.__file__).parent / "_proto")
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    # protoc writes no __init__.py; regular packages keep the import machinery simple.
    generated = sorted((out_dir / "citeweave").rglob("*.py*"))
    for directory in {p.parent for p in generated} | {out_dir / "citeweave"}:
        while directory != out_dir:
            (directory / "__init__.py").touch()
            directory = directory.parent
    return sorted((out_dir / "citeweave").rglob("*.py*"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(path.relative_to(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
