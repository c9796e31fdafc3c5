"""Generator settings, read from `CITEWEAVE_GENERATOR_*` and checked at start-up."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from services.common.settings import ServiceSettings


class BackendName(str, Enum):
    EXTRACTIVE = "extractive"
    OPENAI = "openai"


class GeneratorSettings(ServiceSettings):
    model_config = SettingsConfigDict(
        env_prefix="CITEWEAVE_GENERATOR_", extra="forbid", validate_default=True
    )

    port: int = Field(50054, ge=0, le=65535, description="gRPC port; 0 picks a free one.")
    backend: BackendName = Field(
        BackendName.EXTRACTIVE,
        description="Backend used when a request names none: extractive (offline, no LLM) or "
        "openai (needs openai_base_url).",
    )
    openai_base_url: str = Field(
        "",
        description="Base URL of an OpenAI-compatible endpoint, e.g. https://api.openai.com/v1 or "
        "http://127.0.0.1:8000/v1 (vLLM, Ollama, llama.cpp server). Empty: no LLM backend.",
    )
    openai_model: str = Field("", description="Model name sent to the endpoint.")
    openai_api_key: SecretStr = Field(
        SecretStr(""),
        description="API key. Prefer openai_api_key_file; never logged. Endpoints without auth "
        "(a local llama.cpp server) accept any value; empty sends 'none'.",
    )
    openai_api_key_file: Path | None = Field(
        None,
        description="File holding the API key (e.g. a mounted Kubernetes secret); read at "
        "start-up, surrounding whitespace stripped. Wins over openai_api_key.",
    )
    timeout_s: float = Field(
        60.0, gt=0, description="Per-attempt timeout of one LLM request (connect, and between "
        "streamed chunks); the caller's gRPC deadline also bounds it."
    )
    max_retries: int = Field(
        3, ge=0, le=10,
        description="Retries of an LLM request on 408/409/429/5xx, timeouts and connection "
        "errors, with exponential backoff (0.5 s doubling to 8 s) and jitter; a Retry-After of "
        "up to 2 min is honoured. The caller's deadline bounds it all.",
    )
    output_retries: int = Field(
        1, ge=0, le=5,
        description="Further attempts when the model answers with empty or malformed output.",
    )
    max_concurrent_requests: int = Field(
        4, ge=1, le=256,
        description="LLM requests in flight at once from this replica (summaries of a shortlist "
        "run concurrently up to this limit; the rest wait).",
    )
    context_tokens: int = Field(
        8192, ge=512,
        description="The model's context window in tokens; prompts are trimmed to fit it.",
    )
    summary_max_tokens: int = Field(
        400, ge=32, description="Most tokens a summary may take."
    )
    synthesis_max_tokens: int = Field(
        1500, ge=64, description="Most tokens a synthesized section or answer may take."
    )
    chars_per_token: float = Field(
        3.5, gt=0.5, le=8,
        description="Characters per token used to estimate prompt size (no tokenizer of the "
        "remote model is available offline); lower is safer.",
    )
    temperature: float = Field(0.2, ge=0, le=2, description="Sampling temperature.")
    max_papers: int = Field(
        50, ge=1, le=500, description="Most papers one Synthesize request may carry."
    )
    max_source_chars: int = Field(
        20_000, ge=100, description="Longest source abstract or question accepted."
    )
    max_page_chars: int = Field(
        100_000, ge=1000, description="Longest page text accepted per page."
    )
    max_pages: int = Field(20, ge=1, description="Most chosen pages accepted per paper.")
    extractive_sentences: int = Field(
        2, ge=1, le=8, description="Sentences the extractive writer quotes per paper."
    )

    @field_validator("openai_base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError(f"openai_base_url must be an http:// or https:// URL, got {value!r}")
        return value.rstrip("/")

    @field_validator("openai_api_key_file")
    @classmethod
    def _key_file(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"openai_api_key_file {value} is not a readable file")
        return value

    @model_validator(mode="after")
    def _backend_configured(self) -> "GeneratorSettings":
        if self.backend is BackendName.OPENAI and not self.openai_base_url:
            raise ValueError(
                "backend=openai needs CITEWEAVE_GENERATOR_OPENAI_BASE_URL (and _OPENAI_MODEL)"
            )
        if self.openai_base_url and not self.openai_model:
            raise ValueError("openai_base_url is set but openai_model is empty: name the model")
        budget = self.context_tokens - max(self.summary_max_tokens, self.synthesis_max_tokens)
        if budget < 256:
            raise ValueError(
                f"context_tokens {self.context_tokens} leaves {budget} tokens for the prompt "
                "after the output budget: raise context_tokens or lower *_max_tokens"
            )
        return self

    @property
    def llm_configured(self) -> bool:
        return bool(self.openai_base_url)

    def api_key(self) -> str:
        """The key from the file or the setting; never logged."""
        if self.openai_api_key_file is not None:
            return self.openai_api_key_file.read_text(encoding="utf-8").strip()
        return self.openai_api_key.get_secret_value() or "none"
