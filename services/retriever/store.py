"""The paper collection in Milvus (Lite or server) through pymilvus' MilvusClient.

Every method blocks. The service calls them from one dedicated thread (see app.py): Milvus Lite
runs inside this process and admits one user of its data directory, and a single thread keeps the
gRPC event loop free while serializing access.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pymilvus import DataType, MilvusClient

from services.retriever import records
from services.retriever.settings import RetrieverSettings, is_server_uri

log = logging.getLogger("citeweave.retriever.store")

VECTOR_FIELD = "vector"
METRIC = "COSINE"
INDEX_TYPE = "HNSW"
# Reads that must see the caller's own earlier writes (Get after Upsert, counts, deletes).
STRONG = "Strong"
# Milvus caps one query's result window (offset + limit) at 16,384 rows; stay well under it.
ID_CHUNK = 1000
ITERATOR_BATCH = 10000


class IncompatibleCollection(RuntimeError):
    """The existing collection cannot serve: another vector dimension than the model's, or not
    a citeweave collection. Start-up fails and the data is left as it is."""


@dataclass(frozen=True)
class Hit:
    row: dict
    similarity: float


def _schema(dimension: int):
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=records.ID_BYTES)
    schema.add_field("title", DataType.VARCHAR, max_length=records.TITLE_BYTES)
    schema.add_field("abstract", DataType.VARCHAR, max_length=records.ABSTRACT_BYTES)
    schema.add_field(
        "authors", DataType.ARRAY, element_type=DataType.VARCHAR,
        max_capacity=records.MAX_AUTHORS, max_length=records.AUTHOR_BYTES,
    )
    schema.add_field("year", DataType.INT32)
    schema.add_field("date", DataType.VARCHAR, max_length=records.DATE_BYTES)
    schema.add_field(
        "categories", DataType.ARRAY, element_type=DataType.VARCHAR,
        max_capacity=records.MAX_CATEGORIES, max_length=records.CATEGORY_BYTES,
    )
    schema.add_field("topic", DataType.INT64)
    schema.add_field("sha256", DataType.VARCHAR, max_length=records.SHA_BYTES)
    schema.add_field("url", DataType.VARCHAR, max_length=records.URL_BYTES)
    schema.add_field(VECTOR_FIELD, DataType.FLOAT_VECTOR, dim=dimension)
    return schema


def _quoted_ids(ids: Sequence[str]) -> str:
    return ", ".join(records.literal(i) for i in ids)


class PaperStore:
    def __init__(self, settings: RetrieverSettings, dimension: int):
        self.settings = settings
        self.dimension = dimension
        self.collection = settings.collection
        self.kind = "milvus-server" if is_server_uri(settings.milvus_uri) else "milvus-lite"
        self._client: MilvusClient | None = None
        # Milvus Lite admits one process, so this retriever sees every write to the store and
        # can keep (id -> sha256) in memory: ListHashes then streams 74k hashes in well under a
        # second instead of the ~9 s that paging Lite's query iterator takes. A server may have
        # other writers (replicas), so it is always asked.
        self._hashes: dict[str, str] | None = None
        # Likewise (id -> (title, abstract)) for rebuilding the lexical index: reading 75k texts
        # back through Lite's iterator holds the store thread for many seconds, and a sync's
        # upserts queue behind it (import fell from ~940 to ~220 records/s in the benchmark).
        self._texts: dict[str, tuple[str, str]] | None = None

    @property
    def client(self) -> MilvusClient:
        if self._client is None:
            raise RuntimeError("the store is not open")
        return self._client

    # -- lifecycle -----------------------------------------------------------------------------

    def open(self) -> None:
        uri = self.settings.milvus_uri
        if self.kind == "milvus-lite":
            Path(uri).parent.mkdir(parents=True, exist_ok=True)
        self._client = MilvusClient(uri=uri, token=self.settings.milvus_token or "")
        try:
            if self.client.has_collection(self.collection):
                self._check_existing()
            else:
                self._create()
            # A server keeps collections released after a restart; Lite loads on open.
            self.client.load_collection(self.collection)
            if self.kind == "milvus-lite":
                self._hashes, self._texts = {}, {}
                for rows in self._query_rows(["id", "sha256", "title", "abstract"], ITERATOR_BATCH):
                    for row in rows:
                        self._hashes[row["id"]] = row["sha256"]
                        self._texts[row["id"]] = (row["title"], row["abstract"])
        except BaseException:
            # Release Lite's directory lock so a corrected restart can open the store.
            self.close()
            raise
        log.info(
            "store open",
            extra={"kind": self.kind, "uri": uri, "collection": self.collection,
                   "dimension": self.dimension},
        )

    def close(self) -> None:
        self._hashes = self._texts = None
        if self._client is not None:
            client, self._client = self._client, None
            client.close()

    def _create(self) -> None:
        index = self.client.prepare_index_params()
        index.add_index(
            field_name=VECTOR_FIELD,
            index_type=INDEX_TYPE,
            metric_type=METRIC,
            params={"M": self.settings.hnsw_m, "efConstruction": self.settings.hnsw_ef_construction},
        )
        # Session consistency: the retriever is the collection's only writer, so reading its own
        # writes (a Search right after an Upsert) is what callers need, without Strong's wait for
        # the newest timestamp on every search against a server.
        self.client.create_collection(
            self.collection, schema=_schema(self.dimension), consistency_level="Session"
        )
        # sync=False: waiting for an empty index is pointless, and the wait asks for a timestamp
        # allocation that Milvus Lite does not implement (it logs a traceback for it).
        self.client.create_index(self.collection, index, sync=False)
        log.info("collection created", extra={"collection": self.collection})

    def _check_existing(self) -> None:
        described = self.client.describe_collection(self.collection)
        vector = next((f for f in described["fields"] if f["name"] == VECTOR_FIELD), None)
        if vector is None:
            raise IncompatibleCollection(
                f"collection {self.collection!r} at {self.settings.milvus_uri} has no "
                f"{VECTOR_FIELD!r} field; it was not created by citeweave. Nothing was changed."
            )
        stored = int(vector["params"]["dim"])
        if stored != self.dimension:
            raise IncompatibleCollection(
                f"collection {self.collection!r} at {self.settings.milvus_uri} stores "
                f"{stored}-dimensional vectors but the embedding model produces "
                f"{self.dimension}-dimensional ones. Nothing was changed. Re-embed the corpus "
                "into a new collection (CITEWEAVE_RETRIEVER_COLLECTION) or store, or run the "
                f"embedder with the {stored}-dimensional model."
            )
        if not self.client.list_indexes(self.collection, field_name=VECTOR_FIELD):
            raise IncompatibleCollection(
                f"collection {self.collection!r} has no index on {VECTOR_FIELD!r}; "
                "it was not created by citeweave. Nothing was changed."
            )

    # -- reads ---------------------------------------------------------------------------------

    def search(self, vector: list[float], limit: int, expression: str) -> list[Hit]:
        return self.search_many([vector], limit, expression)[0]

    def search_many(
        self, vectors: Sequence[list[float]], limit: int, expression: str
    ) -> list[list[Hit]]:
        """One search request for several query vectors (nq > 1): the hits of each, in order."""
        ef = max(self.settings.search_ef, limit)
        results = self.client.search(
            self.collection,
            data=list(vectors),
            limit=limit,
            filter=expression,
            output_fields=[*records.SCALAR_FIELDS, VECTOR_FIELD],
            search_params={"metric_type": METRIC, "params": {"ef": ef}},
            anns_field=VECTOR_FIELD,
        )
        per_query = []
        for result in results:
            hits = []
            for hit in result:
                row = dict(hit["entity"])
                row["id"] = hit.id  # the primary key is reported as hit.id, not always in entity
                hits.append(Hit(row=row, similarity=float(hit.distance)))
            per_query.append(hits)
        return per_query

    def get(
        self, ids: Sequence[str], include_vectors: bool, expression: str = ""
    ) -> dict[str, dict]:
        """Stored rows by id; with an expression, only the rows that also match it."""
        fields = [*records.SCALAR_FIELDS, *([VECTOR_FIELD] if include_vectors else [])]
        found: dict[str, dict] = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), ID_CHUNK):
            chunk = unique[start:start + ID_CHUNK]
            condition = f"id in [{_quoted_ids(chunk)}]"
            rows = self.client.query(
                self.collection,
                filter=f"({condition}) and ({expression})" if expression else condition,
                output_fields=fields,
                limit=len(chunk),
                consistency_level=STRONG,
            )
            found.update((row["id"], dict(row)) for row in rows)
        return found

    def count(self) -> int:
        rows = self.client.query(
            self.collection, filter="", output_fields=["count(*)"], consistency_level=STRONG
        )
        return int(rows[0]["count(*)"])

    def index_info(self) -> tuple[str, str]:
        info = self.client.describe_index(self.collection, index_name=VECTOR_FIELD)
        return str(info.get("index_type", "")), str(info.get("metric_type", ""))

    def iter_hashes(self, page_size: int) -> Iterator[list[tuple[str, str]]]:
        """Pages of (id, sha256) over the whole collection: from memory for Lite (see __init__),
        by a query iterator from a server. The caller must drain or close() the generator."""
        if self._hashes is None:
            yield from self._query_hashes(page_size)
            return
        entries = list(self._hashes.items())  # a copy: writes may land while the pages stream
        for start in range(0, len(entries), page_size):
            yield entries[start:start + page_size]

    def _query_hashes(self, page_size: int) -> Iterator[list[tuple[str, str]]]:
        for rows in self._query_rows(["id", "sha256"], page_size):
            yield [(row["id"], row["sha256"]) for row in rows]

    def texts_in_memory(self) -> list[tuple[str, str, str]] | None:
        """Every (id, title, abstract) from the Lite mirror (a copy), or None for a server."""
        if self._texts is None:
            return None
        return [(i, title, abstract) for i, (title, abstract) in self._texts.items()]

    def iter_texts(self, page_size: int) -> Iterator[list[tuple[str, str, str]]]:
        """Pages of (id, title, abstract) over the whole collection by a query iterator, for the
        lexical index. The caller must drain or close() the generator."""
        for rows in self._query_rows(["id", "title", "abstract"], page_size):
            yield [(row["id"], row["title"], row["abstract"]) for row in rows]

    def _query_rows(self, fields: list[str], page_size: int) -> Iterator[list[dict]]:
        """Pages of rows over the whole collection, by a query iterator.

        Each iterator batch costs Milvus Lite a scan of the whole collection plus the rows it
        returns, so batches are fetched large (100k rows: 45 s in batches of 1,000, 12 s in
        batches of 10,000) and cut into pages of page_size here. The caller must drain or
        close() the generator so the iterator is released.
        """
        iterator = self.client.query_iterator(
            self.collection,
            batch_size=max(page_size, ITERATOR_BATCH),
            filter="",
            output_fields=fields,
            consistency_level=STRONG,
        )
        try:
            while True:
                batch = iterator.next()
                if not batch:
                    return
                for start in range(0, len(batch), page_size):
                    yield batch[start:start + page_size]
        finally:
            iterator.close()

    # -- writes --------------------------------------------------------------------------------

    def upsert(self, rows: Sequence[dict]) -> int:
        for start in range(0, len(rows), ID_CHUNK):
            chunk = list(rows[start:start + ID_CHUNK])
            self.client.upsert(self.collection, chunk)
            if self._hashes is not None:
                self._hashes.update((row["id"], row["sha256"]) for row in chunk)
            if self._texts is not None:
                self._texts.update((row["id"], (row["title"], row["abstract"])) for row in chunk)
        return len(rows)

    def flush(self) -> None:
        """Seals written rows into indexed segments (see settle.py for why Lite needs it)."""
        self.client.flush(self.collection)

    def delete(self, ids: Sequence[str]) -> int:
        existing = list(self.get(ids, include_vectors=False))
        for start in range(0, len(existing), ID_CHUNK):
            chunk = existing[start:start + ID_CHUNK]
            self.client.delete(self.collection, filter=f"id in [{_quoted_ids(chunk)}]")
            if self._hashes is not None:
                for paper_id in chunk:
                    self._hashes.pop(paper_id, None)
            if self._texts is not None:
                for paper_id in chunk:
                    self._texts.pop(paper_id, None)
        return len(existing)
