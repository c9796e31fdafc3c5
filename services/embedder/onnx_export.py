"""One-time ONNX export of a sentence-transformers model, cached on disk.

Layout: `<cache_dir>/onnx/<model>-<torch version>/model.onnx` (+ `model-int8.onnx`). The torch
version is part of the name because the exporter's output changes with it. Files are written to
a temporary name and renamed, so a crash or two replicas exporting at once never leave a
half-written model that a later start would load.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path

from services.embedder.models import ModelSpec

log = logging.getLogger("citeweave.embedder.onnx")

INPUT_NAMES = ("input_ids", "attention_mask")
OUTPUT_NAME = "embedding"
OPSET = 17
# The second Linear of each feed-forward block. Its input (after GELU) has outliers that 8-bit
# activations cannot represent: quantizing it drops cosine to ~0.48, keeping it fp32 gives ~0.99.
_FFN_OUTPUT_MATMUL = re.compile(r"/layer\.\d+/output/dense/MatMul$")


def export_dir(spec: ModelSpec, cache_dir: Path) -> Path:
    # importlib.metadata instead of torch.__version__: a cached export must not cost a torch import.
    return cache_dir / "onnx" / f"{spec.name}-{version('torch')}"


def onnx_path(spec: ModelSpec, cache_dir: Path, int8: bool = False) -> Path:
    return export_dir(spec, cache_dir) / ("model-int8.onnx" if int8 else "model.onnx")


@contextmanager
def _atomic_target(target: Path):
    """Yields a temporary path next to target; renames it onto target only on success."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}-", suffix=".onnx")
    os.close(fd)
    try:
        yield Path(tmp)
        # mkstemp makes the file private (0600); replicas under another user share the cache.
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _cached(target: Path, build: Callable[[Path], None], what: str) -> Path:
    if target.exists():
        log.info("reusing cached onnx model", extra={"path": str(target)})
        return target
    log.info(f"building {what}", extra={"path": str(target)})
    with _atomic_target(target) as tmp:
        build(tmp)
    log.info(f"built {what}", extra={"path": str(target)})
    return target


def _export(spec: ModelSpec, out: Path) -> None:
    import torch

    from services.embedder.torch_model import load_pooled_encoder

    encoder = load_pooled_encoder(spec, "cpu")
    example = torch.ones((2, 8), dtype=torch.long)
    axes = {name: {0: "batch", 1: "sequence"} for name in INPUT_NAMES}
    # dynamo=False: the TorchScript exporter needs no onnxscript. Its tracer warns about
    # branches it freezes (mask padding, causal flag); for these encoders they are constant
    # across batch and sequence sizes, which the agreement tests check on padded batches.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            encoder,
            (example, example),
            str(out),
            input_names=list(INPUT_NAMES),
            output_names=[OUTPUT_NAME],
            dynamic_axes={**axes, OUTPUT_NAME: {0: "batch"}},
            opset_version=OPSET,
            dynamo=False,
        )


def ensure_onnx(spec: ModelSpec, cache_dir: Path) -> Path:
    """The fp32 export with pooling and normalization inside the graph; built on first use."""
    return _cached(onnx_path(spec, cache_dir), lambda out: _export(spec, out), "onnx export")


def _quantize(source: Path, out: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(source), load_external_data=False).graph
    keep_fp32 = [
        node.name
        for node in graph.node
        if node.op_type == "MatMul" and _FFN_OUTPUT_MATMUL.search(node.name)
    ]
    if not keep_fp32:
        raise RuntimeError(f"{source}: found no feed-forward output MatMul to keep in fp32")
    quantize_dynamic(
        str(source), str(out), weight_type=QuantType.QInt8, nodes_to_exclude=keep_fp32
    )


def ensure_int8(spec: ModelSpec, cache_dir: Path) -> Path:
    """Dynamic int8 quantization of the fp32 export, feed-forward output MatMuls kept fp32."""
    source = ensure_onnx(spec, cache_dir)
    return _cached(
        onnx_path(spec, cache_dir, int8=True), lambda out: _quantize(source, out), "int8 model"
    )
