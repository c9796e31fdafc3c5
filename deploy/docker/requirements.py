"""Prints the pinned dependencies of pyproject.toml, one requirement a line, for the image builds.

The images install exactly `[project].dependencies` (the single place versions are pinned, see
pyproject.toml) and nothing else, so a local `make install` and an image run the same versions.
`--only torch` prints the torch line alone: it is installed first, from the PyTorch index of the
variant (CPU or CUDA), and the rest then finds it already satisfied, as `make install` does.
Anything not pinned with `==` stops the build: an image must never pick up a newer release.

    python requirements.py pyproject.toml [--only NAME | --exclude NAME]
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

# name[extras]==version, nothing else (no ranges, markers or URLs).
PINNED = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?P<extras>\[[A-Za-z0-9_,.-]+\])?"
                    r"==(?P<version>[A-Za-z0-9.+!_-]+)$")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_dependencies(pyproject: Path) -> list[str]:
    """The `[project].dependencies` lines; ValueError naming any line that is not `==`-pinned."""
    lines = [d.replace(" ", "") for d in tomllib.loads(pyproject.read_text())["project"]["dependencies"]]
    loose = [d for d in lines if not PINNED.match(d)]
    if loose:
        raise ValueError(f"not pinned with == in {pyproject}: {', '.join(loose)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pyproject", type=Path)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--only", help="print only this package's line")
    group.add_argument("--exclude", help="print every line but this package's")
    args = parser.parse_args(argv)
    lines = pinned_dependencies(args.pyproject)
    if args.only:
        lines = [d for d in lines if normalize(PINNED.match(d)["name"]) == normalize(args.only)]
        if not lines:
            parser.error(f"{args.only} is not a dependency in {args.pyproject}")
    elif args.exclude:
        lines = [d for d in lines if normalize(PINNED.match(d)["name"]) != normalize(args.exclude)]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
