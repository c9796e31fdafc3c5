"""Prometheus metrics of the generator, served on `metrics_port` by the common bootstrap."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

REQUESTS = Counter(
    "citeweave_generator_requests",
    "Summarize and Synthesize calls answered, by rpc and the backend that wrote the text.",
    ["rpc", "backend"],
)
FALLBACKS = Counter(
    "citeweave_generator_fallbacks",
    "Answers written by the extractive backend because the LLM failed, by fault kind.",
    ["rpc", "fault"],
)
CITATIONS_REMOVED = Counter(
    "citeweave_generator_citations_removed",
    "Citations removed from written text because they did not resolve, by reason.",
    ["reason"],
)
CITATIONS_REPAIRED = Counter(
    "citeweave_generator_citations_repaired",
    "Author-year citations a model wrote that matched exactly one shortlisted paper.",
)
LLM_FAULTS = Counter(
    "citeweave_generator_llm_faults",
    "LLM answers that failed after the client's retries, by fault kind.",
    ["kind"],
)
LLM_TOKENS = Counter(
    "citeweave_generator_llm_tokens", "Tokens used at the LLM endpoint.", ["kind"]
)
LLM_SECONDS = Histogram(
    "citeweave_generator_llm_seconds",
    "Time of one LLM request, retries included.",
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300),
)


def record_usage(prompt_tokens: int, completion_tokens: int) -> None:
    LLM_TOKENS.labels("prompt").inc(prompt_tokens)
    LLM_TOKENS.labels("completion").inc(completion_tokens)
