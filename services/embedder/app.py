"""The EmbedderService: validation, embedding cache, micro-batched inference."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np

from citeweave.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from services.common.errors import InvalidArgument, Unavailable
from services.embedder import metrics
from services.embedder.backends import Backend, load_backend
from services.embedder.batching import MicroBatcher
from services.embedder.cache import DiskEmbeddingCache, EmbeddingCache, cache_key
from services.embedder.settings import EmbedderSettings

log = logging.getLogger("citeweave.embedder")

SERVICE_NAME = embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"].full_name


def validate_texts(texts: Sequence[str], max_inputs: int, max_chars: int) -> None:
    """INVALID_ARGUMENT naming the offending index and the limit, so the caller can fix it."""
    if not texts:
        raise InvalidArgument(f"texts is empty; send between 1 and {max_inputs} texts")
    if len(texts) > max_inputs:
        raise InvalidArgument(
            f"too many texts: {len(texts)} > max_inputs_per_request={max_inputs}; "
            f"split them into requests of at most {max_inputs}"
        )
    for index, text in enumerate(texts):
        if not text.strip():
            raise InvalidArgument(f"texts[{index}] is empty or whitespace only")
        if len(text) > max_chars:
            raise InvalidArgument(
                f"texts[{index}] has {len(text)} characters, over max_chars_per_text={max_chars}; "
                "shorten or split it (the model reads only its first tokens anyway)"
            )


class EmbedderApp(embedder_pb2_grpc.EmbedderServiceServicer):
    name = "embedder"
    service_names = (SERVICE_NAME,)

    def __init__(self, settings: EmbedderSettings):
        self.settings = settings
        self.backend: Backend | None = None
        self._batcher: MicroBatcher | None = None
        self._cache = EmbeddingCache(settings.cache_entries)
        self._disk: DiskEmbeddingCache | None = None
        # SQLite is used from one thread only, and never from the event loop.
        self._disk_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="disk-cache")

    def register(self, server: grpc.aio.Server) -> None:
        embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(self, server)

    async def warm_up(self) -> None:
        started = time.perf_counter()
        backend = await asyncio.to_thread(load_backend, self.settings)
        # The first run allocates buffers and (on CUDA) compiles kernels; do it before SERVING
        # so the first caller does not pay for it.
        await asyncio.to_thread(backend.embed, backend.tokenizer.encode(["warm-up"]))
        s = self.settings
        self._batcher = MicroBatcher(
            backend.embed,
            backend.spec.dimension,
            max_batch_tokens=s.max_batch_tokens,
            max_batch_size=s.max_batch_size,
            max_wait_s=s.max_wait_ms / 1000,
            max_queued_texts=s.max_queued_texts,
        )
        self._batcher.start()
        if s.disk_cache is not None:
            self._disk = await self._on_disk_thread(
                DiskEmbeddingCache, s.disk_cache, f"{backend.spec.name}/{backend.name}"
            )
        self.backend = backend
        log.info(
            "model ready",
            extra={
                "model": backend.spec.name,
                "backend": backend.name,
                "dimension": backend.spec.dimension,
                "warm_up_s": round(time.perf_counter() - started, 2),
            },
        )

    async def close(self) -> None:
        if self._batcher is not None:
            await self._batcher.close()
        if self._disk is not None:
            await self._on_disk_thread(self._disk.close)
        self._disk_thread.shutdown(wait=True)

    async def _on_disk_thread(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(
            self._disk_thread, functools.partial(fn, *args)
        )

    def _ready(self) -> tuple[Backend, MicroBatcher]:
        if self.backend is None or self._batcher is None:
            raise Unavailable("embedder is warming up; retry once health reports SERVING")
        return self.backend, self._batcher

    async def Embed(self, request, context):  # noqa: N802 - gRPC method name
        started = time.perf_counter()
        texts = list(request.texts)
        s = self.settings
        validate_texts(texts, s.max_inputs_per_request, s.max_chars_per_text)
        backend, batcher = self._ready()
        metrics.TEXTS.inc(len(texts))

        keys = [cache_key(backend.spec.name, text) for text in texts]
        vectors = np.empty((len(texts), backend.spec.dimension), dtype=np.float32)
        missing = []
        for index, key in enumerate(keys):
            hit = self._cache.get(key)
            if hit is None:
                missing.append(index)
            else:
                vectors[index] = hit
        if missing and self._disk is not None:
            stored = await self._on_disk_thread(self._disk.get_many, [keys[i][1] for i in missing])
            still_missing = []
            for index in missing:
                hit = stored.get(keys[index][1])
                if hit is None:
                    still_missing.append(index)
                else:
                    vectors[index] = hit
                    self._cache.put(keys[index], hit)
            missing = still_missing
        if missing:
            # Tokenizing up to max_inputs x max_chars characters is too slow for the event loop.
            token_ids = await asyncio.to_thread(
                backend.tokenizer.encode, [texts[i] for i in missing]
            )
            computed = await batcher.submit(token_ids)
            for index, vector in zip(missing, computed):
                vectors[index] = vector
                self._cache.put(keys[index], vector)
            if self._disk is not None:
                await self._on_disk_thread(
                    self._disk.put_many, [(keys[i][1], vectors[i]) for i in missing]
                )
        cached = len(texts) - len(missing)
        metrics.CACHE_HITS.inc(cached)
        metrics.REQUEST_SECONDS.observe(time.perf_counter() - started)
        return embedder_pb2.EmbedResponse(
            vectors=[embedder_pb2.Vector(values=row.tolist()) for row in vectors],
            model_name=backend.spec.name,
            dimension=backend.spec.dimension,
            cached_count=cached,
        )

    async def GetModelInfo(self, request, context):  # noqa: N802 - gRPC method name
        backend, _ = self._ready()
        return embedder_pb2.GetModelInfoResponse(
            model_name=backend.spec.name,
            dimension=backend.spec.dimension,
            backend=backend.name,
            max_inputs_per_request=self.settings.max_inputs_per_request,
            max_chars_per_text=self.settings.max_chars_per_text,
            max_seq_length=backend.spec.max_seq_length,
        )
