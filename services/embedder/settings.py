"""Embedder settings, read from `CITEWEAVE_EMBEDDER_*` and checked at start-up."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from services.common.settings import ServiceSettings
from services.embedder.models import MODEL_NAMES, MPNET, cache_dir

ModelName = Literal["all-mpnet-base-v2", "all-MiniLM-L6-v2"]
BackendName = Literal["auto", "onnx", "onnx-int8", "torch"]
assert set(get_args(ModelName)) == set(MODEL_NAMES)  # the Literal must follow models.py


class EmbedderSettings(ServiceSettings):
    model_config = SettingsConfigDict(
        env_prefix="CITEWEAVE_EMBEDDER_", extra="forbid", validate_default=True
    )

    port: int = Field(50051, ge=0, le=65535, description="gRPC port; 0 picks a free one.")
    model: ModelName = Field(
        MPNET,
        description="Sentence-transformers model served: all-mpnet-base-v2 (768-d) or "
        "all-MiniLM-L6-v2 (384-d, for fast tests).",
    )
    backend: BackendName = Field(
        "auto",
        description="Inference backend. auto: torch on CUDA when a GPU is visible, else onnx. "
        "onnx: ONNX Runtime fp32 on CPU (exported once, cached). onnx-int8: dynamic int8 "
        "quantization (faster, cosine ~0.99 vs fp32; opt-in). torch: sentence-transformers "
        "weights in torch (CUDA if available, else CPU).",
    )
    max_inputs_per_request: int = Field(
        256, ge=1, description="Most texts one Embed call may carry (INVALID_ARGUMENT beyond)."
    )
    max_chars_per_text: int = Field(
        20000, ge=1, description="Longest text accepted, in characters (INVALID_ARGUMENT beyond)."
    )
    max_batch_tokens: int = Field(
        16384,
        ge=1,
        description="Token budget of one inference batch: padded length x number of texts.",
    )
    max_batch_size: int = Field(
        4,
        ge=1,
        description="Most texts in one inference batch. On CPU small batches of similar "
        "length are fastest (least padding, activations stay in cache); raise it (e.g. 64) "
        "on a GPU.",
    )
    max_wait_ms: float = Field(
        5.0,
        ge=0,
        description="How long the batcher waits for concurrent requests to fill a batch.",
    )
    max_queued_texts: int = Field(
        4096,
        ge=1,
        description="Texts admitted but not yet embedded; a request that would exceed it gets "
        "RESOURCE_EXHAUSTED.",
    )
    cache_entries: int = Field(
        20000,
        ge=0,
        description="Entries of the in-memory LRU embedding cache keyed by (model, sha256 of "
        "text); 0 disables it.",
    )
    disk_cache: Path | None = Field(
        None,
        description="SQLite file keeping embeddings across restarts, keyed by model, backend "
        "and sha256 of the text (evaluation re-runs, store rebuilds). Unset: memory only.",
    )
    cache_dir: Path = Field(
        default_factory=cache_dir,
        description="Where the ONNX export is cached (<cache_dir>/onnx/...). Defaults to "
        "CITEWEAVE_CACHE_DIR or ~/.cache/citeweave.",
    )
    intra_op_threads: int = Field(
        0,
        ge=0,
        description="Threads per inference call (ONNX Runtime / torch); 0 = library default.",
    )

    @model_validator(mode="after")
    def _request_fits_queue(self) -> "EmbedderSettings":
        # Otherwise a maximal request could never be admitted, and retrying would not help.
        if self.max_inputs_per_request > self.max_queued_texts:
            raise ValueError(
                f"max_inputs_per_request ({self.max_inputs_per_request}) must not exceed "
                f"max_queued_texts ({self.max_queued_texts})"
            )
        return self
