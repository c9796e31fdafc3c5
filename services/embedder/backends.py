"""Inference backends. Each turns batches of token ids into L2-normalized float32 vectors.

Tokenization is shared and happens before batching, because the batcher sizes batches by
token count. Backends receive unpadded id lists and pad them to the longest in the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Protocol

import numpy as np
from tokenizers import Tokenizer

from services.embedder.batching import TokenIds
from services.embedder.models import ModelSpec, model_spec
from services.embedder.onnx_export import INPUT_NAMES, OUTPUT_NAME, ensure_int8, ensure_onnx
from services.embedder.settings import EmbedderSettings


class TextTokenizer:
    """The model's fast tokenizer, truncating like sentence-transformers (max_seq_length)."""

    def __init__(self, spec: ModelSpec):
        self._tokenizer = Tokenizer.from_file(str(spec.path / "tokenizer.json"))
        # tokenizer.json ships with fixed-length padding; padding is done per batch instead.
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(spec.max_seq_length)
        pad_id = self._tokenizer.token_to_id(spec.pad_token)
        if pad_id is None:
            raise ValueError(f"{spec.name}: pad token {spec.pad_token!r} not in the vocabulary")
        self.pad_id = pad_id

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        return [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts))]

    def pad(self, batch: Sequence[TokenIds]) -> tuple[np.ndarray, np.ndarray]:
        """(input_ids, attention_mask), int64, padded to the longest sequence of the batch."""
        width = max(len(ids) for ids in batch)
        input_ids = np.full((len(batch), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        return input_ids, mask


class Backend(Protocol):
    # As reported by GetModelInfo: "onnx-cpu", "onnx-cpu-int8", "torch-cuda" or "torch-cpu".
    name: str
    spec: ModelSpec
    tokenizer: TextTokenizer

    def embed(self, batch: Sequence[TokenIds]) -> np.ndarray:
        """(len(batch), dimension) float32, rows of unit length."""
        ...


class OnnxBackend:
    def __init__(self, spec: ModelSpec, path, threads: int = 0, int8: bool = False):
        import onnxruntime as ort

        self.spec = spec
        self.name = "onnx-cpu-int8" if int8 else "onnx-cpu"
        self.tokenizer = TextTokenizer(spec)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads:
            options.intra_op_num_threads = threads
        self._session = ort.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )

    def embed(self, batch: Sequence[TokenIds]) -> np.ndarray:
        input_ids, mask = self.tokenizer.pad(batch)
        feeds = dict(zip(INPUT_NAMES, (input_ids, mask)))
        return self._session.run([OUTPUT_NAME], feeds)[0].astype(np.float32, copy=False)


class TorchBackend:
    def __init__(self, spec: ModelSpec, device: str, threads: int = 0):
        import torch

        from services.embedder.torch_model import load_pooled_encoder

        self._torch = torch
        if threads:
            torch.set_num_threads(threads)
        self.spec = spec
        self.device = device
        self.name = f"torch-{device}"
        self.tokenizer = TextTokenizer(spec)
        self._module = load_pooled_encoder(spec, device)
        if device == "cuda":
            self._module.half()  # fp16 halves memory and doubles throughput on tensor cores

    def embed(self, batch: Sequence[TokenIds]) -> np.ndarray:
        torch = self._torch
        input_ids, mask = self.tokenizer.pad(batch)
        with torch.inference_mode():
            out = self._module(
                torch.from_numpy(input_ids).to(self.device), torch.from_numpy(mask).to(self.device)
            )
            # Renormalize in fp32: fp16 rounding leaves norms a few 1e-4 off one.
            out = torch.nn.functional.normalize(out.float(), p=2, dim=1)
        return out.cpu().numpy()


def cuda_available() -> bool:
    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        return False
    # The CPU wheel cannot see a GPU; knowing that from its version spares a slow torch import.
    if "+cpu" in torch_version:
        return False
    import torch

    return torch.cuda.is_available()


def resolve_backend(requested: str) -> str:
    if requested == "auto":
        return "torch" if cuda_available() else "onnx"
    return requested


def load_backend(settings: EmbedderSettings) -> Backend:
    """Loads (and on first use exports) the model for the configured backend."""
    spec = model_spec(settings.model)
    kind = resolve_backend(settings.backend)
    threads = settings.intra_op_threads
    if kind == "torch":
        return TorchBackend(spec, "cuda" if cuda_available() else "cpu", threads)
    if kind == "onnx-int8":
        return OnnxBackend(spec, ensure_int8(spec, settings.cache_dir), threads, int8=True)
    return OnnxBackend(spec, ensure_onnx(spec, settings.cache_dir), threads)
