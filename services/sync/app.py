"""The sync gRPC service: corpus sync and topics. One write job (Sync or FitTopics) at a time."""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

import grpc
import numpy as np

from citeweave.retriever.v1 import retriever_pb2
from citeweave.sync.v1 import sync_pb2, sync_pb2_grpc
from services.common.clients import wait_serving_async
from services.common.corpus import embedding_text
from services.common.errors import Aborted, FailedPrecondition, Unavailable
from services.sync.download import shown
from services.sync.job import Peers, SyncRun
from services.sync.peers import Cancelled, EmbedderPool, RetrieverClient
from services.sync.settings import SyncSettings

if TYPE_CHECKING:
    from services.sync.topics import TopicModel

log = logging.getLogger("citeweave.sync")

SERVICE_NAME = sync_pb2.DESCRIPTOR.services_by_name["SyncService"].full_name
_DONE = object()
TOPIC_WRITE_BATCH = 500


def _topic_pb(info) -> sync_pb2.Topic:
    return sync_pb2.Topic(id=info.id, top_words=info.top_words, size=info.size)


class SyncServicer(sync_pb2_grpc.SyncServiceServicer):
    def __init__(self, app: "SyncApp"):
        self.app = app

    async def _stream_job(
        self, what: str, job: Callable[[Callable, threading.Event], object], final
    ) -> AsyncIterator:
        """Runs job(emit, cancelled) in a thread, streaming what it emits, then final(result).

        A client that goes away sets `cancelled`; the job stops at its next check, and the lock
        is held until it has, so two jobs never write at once."""
        if self.app.busy.locked():
            raise Aborted(
                f"{self.app.busy_with} is running; one sync or topic fit runs at a time. "
                "Retry when it has finished."
            )
        async with self.app.busy:
            self.app.busy_with = what
            loop = asyncio.get_running_loop()
            queue: asyncio.Queue = asyncio.Queue()
            cancelled = threading.Event()

            def emit(event) -> None:
                loop.call_soon_threadsafe(queue.put_nowait, event)

            future = loop.run_in_executor(None, job, emit, cancelled)
            future.add_done_callback(lambda _: queue.put_nowait(_DONE))
            try:
                while (event := await queue.get()) is not _DONE:
                    yield event
                yield final(future.result())
            finally:
                if not future.done():
                    cancelled.set()
                    log.info("client went away; stopping", extra={"job": what})
                    try:
                        await asyncio.shield(future)
                    except (Cancelled, Exception):  # noqa: BLE001 - the caller is gone
                        pass

    async def Sync(self, request, context):
        peers = await self.app.peers()

        def job(emit, cancelled):
            return SyncRun(request, peers, self.app.settings, emit, cancelled).run()

        async for event in self._stream_job(
            f"a sync of {shown(request.source_path)}", job,
            lambda summary: sync_pb2.SyncResponse(summary=summary),
        ):
            yield event

    async def FitTopics(self, request, context):
        peers = await self.app.peers()

        def job(emit, cancelled):
            return self.app.fit_topics(request, peers, emit, cancelled)

        async for event in self._stream_job(
            "a topic fit", job, lambda result: sync_pb2.FitTopicsResponse(result=result)
        ):
            yield event

    async def ListTopics(self, request, context):
        model = self.app.topics
        if model is None:
            raise FailedPrecondition("no topic model is fitted yet; run `citeweave topics fit`")
        return sync_pb2.ListTopicsResponse(topics=[_topic_pb(t) for t in model.topics()])


class SyncApp:
    """ServiceApp: waits for its peers in warm-up, loads the topic model when one is saved."""

    name = "sync"
    service_names = (SERVICE_NAME,)

    def __init__(self, settings: SyncSettings):
        self.settings = settings
        self.busy = asyncio.Lock()
        self.busy_with = ""
        self.topics: TopicModel | None = None
        self._embedders: EmbedderPool | None = None
        self._retriever: RetrieverClient | None = None

    def register(self, server: grpc.aio.Server) -> None:
        sync_pb2_grpc.add_SyncServiceServicer_to_server(SyncServicer(self), server)

    async def warm_up(self) -> None:
        s = self.settings
        peers = [*(("embedder", a, "EMBEDDER_ADDRS") for a in s.embedder_addr_list),
                 ("retriever", s.retriever_addr, "RETRIEVER_ADDR")]
        for kind, addr, setting in peers:
            try:
                await wait_serving_async(addr, s.peer_wait_s)
            except TimeoutError:
                raise Unavailable(
                    f"{kind} {addr} did not report SERVING within {s.peer_wait_s:g} s; check that "
                    f"it runs and that CITEWEAVE_SYNC_{setting} names it"
                ) from None
        self._embedders = EmbedderPool(s.embedder_addr_list, s.rpc_timeout_s, s.rpc_attempts)
        await asyncio.to_thread(self._embedders.check_models)
        self._retriever = RetrieverClient(s.retriever_addr, s.rpc_timeout_s, s.rpc_attempts)
        if s.topic_model_dir.exists():
            await asyncio.to_thread(self._load_topics)
        log.info("peers ready", extra={"embedders": s.embedder_addrs, "model": self._embedders.model,
                                       "retriever": s.retriever_addr,
                                       "topics": self.topics is not None})

    def _load_topics(self) -> None:
        from services.sync.topics import TopicModel, TopicModelMissing

        try:
            self.topics = TopicModel.load(self.settings.topic_model_dir)
        except TopicModelMissing:
            self.topics = None

    async def peers(self) -> Peers:
        if self._embedders is None or self._retriever is None:
            raise Unavailable("the sync service is still starting; retry when health reports SERVING")
        return Peers(self._embedders, self._retriever, self.topics)

    async def close(self) -> None:
        for peer in (self._embedders, self._retriever):
            if peer is not None:
                peer.close()

    # -- topics --------------------------------------------------------------------------------

    def fit_topics(self, request, peers: Peers, emit, cancelled: threading.Event) -> sync_pb2.FitTopicsResult:
        """Fits BERTopic on the stored embeddings, saves it, writes every paper's topic."""
        from services.sync.topics import NotEnoughPapers, TopicModel

        def stage(name: str, percent: int) -> None:
            emit(sync_pb2.FitTopicsResponse(progress=sync_pb2.FitTopicsProgress(stage=name, percent=percent)))

        stage("reading stored papers", 0)
        ids = sorted(peers.retriever.stored_hashes(cancelled))
        if len(ids) > self.settings.max_topic_fit_papers:
            fit_ids = sorted(random.Random(0).sample(ids, self.settings.max_topic_fit_papers))
        else:
            fit_ids = ids
        records = list(peers.retriever.get(fit_ids, cancelled))
        texts = [embedding_text(r.paper.title, r.paper.abstract) for r in records]
        vectors = np.asarray([r.vector for r in records], dtype=np.float32)
        start = time.monotonic()
        try:
            model, assigned = TopicModel.fit(
                texts, vectors, peers.embedders.model, request.min_topic_size,
                on_stage=lambda name, pct: stage(name, 5 + pct * 70 // 100),
            )
        except NotEnoughPapers as exc:
            raise FailedPrecondition(str(exc)) from None
        log.info("topics fitted", extra={"papers": len(records), "seconds": round(time.monotonic() - start, 1)})
        model.save(self.settings.topic_model_dir)
        self.topics = model
        stage("writing topics to the store", 75)
        written = self._write_topics(records, assigned, peers, cancelled)
        in_fit = set(fit_ids)
        rest = [i for i in ids if i not in in_fit]
        for start_at in range(0, len(rest), TOPIC_WRITE_BATCH):
            chunk = list(peers.retriever.get(rest[start_at:start_at + TOPIC_WRITE_BATCH], cancelled))
            topics = model.assign(
                [embedding_text(r.paper.title, r.paper.abstract) for r in chunk],
                np.asarray([r.vector for r in chunk], dtype=np.float32),
            )
            written += self._write_topics(chunk, topics, peers, cancelled)
            stage("assigning the papers outside the fit sample", 75 + 25 * start_at // max(len(rest), 1))
        stage("done", 100)
        return sync_pb2.FitTopicsResult(
            topics=[_topic_pb(t) for t in model.topics()], papers_assigned=written,
        )

    @staticmethod
    def _write_topics(records, topics, peers: Peers, cancelled) -> int:
        written = 0
        for start in range(0, len(records), TOPIC_WRITE_BATCH):
            chunk = []
            for record, topic in zip(records[start:start + TOPIC_WRITE_BATCH],
                                     topics[start:start + TOPIC_WRITE_BATCH], strict=True):
                updated = retriever_pb2.PaperRecord()
                updated.CopyFrom(record)
                updated.paper.topic = int(topic)
                chunk.append(updated)
            written += peers.retriever.upsert(chunk, cancelled)
        return written
