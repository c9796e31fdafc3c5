"""The `openai` backend: chat completions from any OpenAI-compatible endpoint, every failure
turned into one `LlmFault` with a kind and a message a person can act on.

Retries of transport-level failures (408/409/429/5xx, timeouts, connection errors) are the
`openai` package's own: exponential backoff from 0.5 s doubling to 8 s with jitter, Retry-After
honoured. What the package cannot judge, an empty, malformed or refused answer, is retried here
`output_retries` times; a context overflow is retried once by the caller with a smaller prompt.
Every request holds a slot of a semaphore, so one replica never has more than
`max_concurrent_requests` requests at the endpoint, and runs under the caller's deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from enum import Enum

import openai
from openai import AsyncOpenAI

from services.generator import metrics
from services.generator.settings import GeneratorSettings

log = logging.getLogger("citeweave.generator.llm")

# How long a request that had to wait for a slot pauses before it is sent (OpenAiBackend._slot).
SLOT_SETTLE_S = 0.1

_REFUSAL = re.compile(
    r"^\W*(?:i['’]?m sorry|i am sorry|sorry,|i cannot|i can['’]?t|i can not|i['’]?m unable|"
    r"i am unable|i['’]?m not able|as an ai\b|i apologi[sz]e|unfortunately,? i\b|i won['’]?t)",
    re.IGNORECASE,
)
_CONTEXT_OVERFLOW = re.compile(
    r"context[ _](?:length|window)|maximum context|too many tokens|exceeds? (?:the )?context|"
    r"prompt is too long|context_length_exceeded",
    re.IGNORECASE,
)
# Enough of the answer to tell a refusal from the start of a section.
REFUSAL_PROBE_CHARS = 80


class FaultKind(str, Enum):
    TIMEOUT = "timeout"
    RATE_LIMITED = "rate limited"
    SERVER_ERROR = "server error"
    CONNECTION = "connection failed"
    CONTEXT_OVERFLOW = "context overflow"
    REJECTED = "request rejected"
    AUTH = "authentication failed"
    MALFORMED = "malformed response"
    EMPTY = "empty answer"
    REFUSAL = "refusal"


class LlmFault(Exception):
    def __init__(self, kind: FaultKind, detail: str):
        super().__init__(f"{kind.value}: {detail}")
        self.kind = kind
        self.detail = detail

    @property
    def reason(self) -> str:
        return f"LLM {self.kind.value}: {self.detail}"


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, other: "Usage") -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens


@dataclass(frozen=True)
class Completion:
    text: str
    usage: Usage


def is_refusal(text: str) -> bool:
    return bool(_REFUSAL.match(text.strip()))


def _fault(exc: BaseException) -> LlmFault:
    """The fault for an exception of the openai package (after its own retries)."""
    if isinstance(exc, LlmFault):
        return exc
    if isinstance(exc, (openai.APITimeoutError, asyncio.TimeoutError, TimeoutError)):
        return LlmFault(FaultKind.TIMEOUT, "the endpoint did not answer in time")
    if isinstance(exc, openai.APIConnectionError):
        return LlmFault(FaultKind.CONNECTION, f"cannot reach the endpoint ({exc.__cause__ or exc})")
    if isinstance(exc, openai.RateLimitError):
        return LlmFault(FaultKind.RATE_LIMITED, "the endpoint kept answering 429 Too Many Requests")
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return LlmFault(FaultKind.AUTH, f"HTTP {exc.status_code}: check the API key")
    if isinstance(exc, openai.APIStatusError):
        message = _error_message(exc)
        if _CONTEXT_OVERFLOW.search(message):
            return LlmFault(FaultKind.CONTEXT_OVERFLOW, message)
        if exc.status_code >= 500:
            return LlmFault(FaultKind.SERVER_ERROR, f"HTTP {exc.status_code}: {message}")
        return LlmFault(FaultKind.REJECTED, f"HTTP {exc.status_code}: {message}")
    if isinstance(exc, (openai.APIResponseValidationError, json.JSONDecodeError, ValueError,
                        KeyError, TypeError, AttributeError)):
        return LlmFault(FaultKind.MALFORMED, f"could not read the answer ({type(exc).__name__})")
    return LlmFault(FaultKind.MALFORMED, f"{type(exc).__name__}: {exc}")


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:300]
        if isinstance(inner, str):
            return inner[:300]
    return str(exc.message)[:300]


class OpenAiBackend:
    def __init__(self, settings: GeneratorSettings):
        self.settings = settings
        self.model = settings.openai_model
        self._semaphore = asyncio.Semaphore(settings.max_concurrent_requests)
        self._client = AsyncOpenAI(
            base_url=settings.openai_base_url,
            api_key=settings.api_key(),
            timeout=settings.timeout_s,
            max_retries=settings.max_retries,
        )

    async def close(self) -> None:
        await self._client.close()

    @contextlib.asynccontextmanager
    async def _slot(self):
        """One of the max_concurrent_requests slots at the endpoint.

        A slot that frees while others wait has often been freed by a caller that went away, and
        its siblings (the other summaries of the same gateway request) are being cancelled in
        the same burst, each on its own stream. Without a pause the next waiter can send its LLM
        request before its own cancellation is delivered, spending a paid request on nobody."""
        waited = self._semaphore.locked()
        async with self._semaphore:
            if waited:
                await asyncio.sleep(SLOT_SETTLE_S)
            yield

    def _timeout(self, deadline: float | None) -> float:
        if deadline is None:
            return self.settings.timeout_s
        left = deadline - time.monotonic()
        if left <= 0.05:
            raise LlmFault(FaultKind.TIMEOUT, "no time left before the caller's deadline")
        return min(self.settings.timeout_s, left)

    def _request(self, messages: list[dict], max_tokens: int, timeout: float) -> dict:
        return dict(
            model=self.model, messages=messages, max_tokens=max_tokens,
            temperature=self.settings.temperature, timeout=timeout,
        )

    async def complete(
        self, messages: list[dict], max_tokens: int, deadline: float | None = None
    ) -> Completion:
        """One answer; retried on empty/malformed/refused output. Raises LlmFault."""
        last: LlmFault | None = None
        for _ in range(self.settings.output_retries + 1):
            try:
                return await self._complete_once(messages, max_tokens, deadline)
            except LlmFault as fault:
                metrics.LLM_FAULTS.labels(fault.kind.value).inc()
                if fault.kind not in (FaultKind.EMPTY, FaultKind.MALFORMED, FaultKind.REFUSAL):
                    raise
                last = fault
        assert last is not None
        raise last

    async def _complete_once(
        self, messages: list[dict], max_tokens: int, deadline: float | None
    ) -> Completion:
        timeout = self._timeout(deadline)
        started = time.perf_counter()
        async with self._slot():
            try:
                response = await asyncio.wait_for(
                    self._client.chat.completions.create(
                        **self._request(messages, max_tokens, timeout)
                    ),
                    timeout=None if deadline is None else max(0.05, deadline - time.monotonic()),
                )
                choices = response.choices or []
                if not choices:
                    raise LlmFault(FaultKind.EMPTY, "the answer had no choices")
                choice = choices[0]
                text = (choice.message.content or "").strip() if choice.message else ""
                refusal = getattr(choice.message, "refusal", None) if choice.message else None
            except Exception as exc:  # every failure becomes a fault with a reason
                raise _fault(exc) from exc
            finally:
                metrics.LLM_SECONDS.observe(time.perf_counter() - started)
        if refusal or choice.finish_reason == "content_filter" or is_refusal(text):
            raise LlmFault(FaultKind.REFUSAL, (refusal or text)[:160])
        if not text:
            raise LlmFault(FaultKind.EMPTY, "the answer was empty")
        usage = _usage(response.usage, messages, text, self.settings.chars_per_token)
        metrics.record_usage(usage.prompt_tokens, usage.completion_tokens)
        return Completion(text=text, usage=usage)

    async def stream(
        self, messages: list[dict], max_tokens: int, usage: Usage, deadline: float | None = None
    ) -> AsyncIterator[str]:
        """Text deltas as they arrive; `usage` is filled in at the end. Raises LlmFault, also
        part-way (a stream is never retried once text has arrived)."""
        timeout = self._timeout(deadline)
        started = time.perf_counter()
        received: list[str] = []
        reported = None
        finished = False
        async with self._slot():
            try:
                stream = await self._client.chat.completions.create(
                    **self._request(messages, max_tokens, timeout), stream=True,
                    stream_options={"include_usage": True},
                )
                async for chunk in _bounded(stream, deadline):
                    if chunk.usage is not None:
                        reported = chunk.usage
                    for choice in chunk.choices or []:
                        if choice.finish_reason == "content_filter":
                            raise LlmFault(FaultKind.REFUSAL, "the endpoint's content filter stopped it")
                        finished = finished or choice.finish_reason is not None
                        delta = choice.delta.content if choice.delta else None
                        if delta:
                            received.append(delta)
                            yield delta
                if not received:
                    raise LlmFault(FaultKind.EMPTY, "the stream carried no text")
                if not finished:
                    # A dropped connection can end the stream quietly: the text would be cut short.
                    raise LlmFault(FaultKind.MALFORMED, "the stream ended before the answer was finished")
            except LlmFault:
                raise
            except Exception as exc:
                raise _fault(exc) from exc
            finally:
                metrics.LLM_SECONDS.observe(time.perf_counter() - started)
        text = "".join(received)
        used = _usage(reported, messages, text, self.settings.chars_per_token)
        usage.add(used)
        metrics.record_usage(used.prompt_tokens, used.completion_tokens)


async def _bounded(stream, deadline: float | None):
    """The stream's chunks, failing with TIMEOUT when the caller's deadline passes."""
    iterator = stream.__aiter__()
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise LlmFault(FaultKind.TIMEOUT, "the caller's deadline passed while streaming")
        try:
            chunk = await asyncio.wait_for(iterator.__anext__(), timeout=left)
        except StopAsyncIteration:
            return
        yield chunk


def estimate_tokens(text: str, chars_per_token: float) -> int:
    return math.ceil(len(text) / chars_per_token)


def _usage(reported, messages: list[dict], text: str, chars_per_token: float) -> Usage:
    """The endpoint's token counts, or estimates when it reports none."""
    if reported is not None and getattr(reported, "prompt_tokens", None) is not None:
        return Usage(int(reported.prompt_tokens or 0), int(reported.completion_tokens or 0))
    prompt = sum(estimate_tokens(str(m.get("content", "")), chars_per_token) for m in messages)
    return Usage(prompt, estimate_tokens(text, chars_per_token))
