from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SourceFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SOURCE_FORMAT_UNSPECIFIED: _ClassVar[SourceFormat]
    SOURCE_FORMAT_ARXIV_KAGGLE: _ClassVar[SourceFormat]
    SOURCE_FORMAT_JSONL: _ClassVar[SourceFormat]

class SyncPhase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SYNC_PHASE_UNSPECIFIED: _ClassVar[SyncPhase]
    SYNC_PHASE_DOWNLOADING: _ClassVar[SyncPhase]
    SYNC_PHASE_READING: _ClassVar[SyncPhase]
SOURCE_FORMAT_UNSPECIFIED: SourceFormat
SOURCE_FORMAT_ARXIV_KAGGLE: SourceFormat
SOURCE_FORMAT_JSONL: SourceFormat
SYNC_PHASE_UNSPECIFIED: SyncPhase
SYNC_PHASE_DOWNLOADING: SyncPhase
SYNC_PHASE_READING: SyncPhase

class SyncOptions(_message.Message):
    __slots__ = ("delete_missing", "batch_size", "dry_run", "limit", "snapshot_path", "shard_index", "shard_count")
    DELETE_MISSING_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_PATH_FIELD_NUMBER: _ClassVar[int]
    SHARD_INDEX_FIELD_NUMBER: _ClassVar[int]
    SHARD_COUNT_FIELD_NUMBER: _ClassVar[int]
    delete_missing: bool
    batch_size: int
    dry_run: bool
    limit: int
    snapshot_path: str
    shard_index: int
    shard_count: int
    def __init__(self, delete_missing: _Optional[bool] = ..., batch_size: _Optional[int] = ..., dry_run: _Optional[bool] = ..., limit: _Optional[int] = ..., snapshot_path: _Optional[str] = ..., shard_index: _Optional[int] = ..., shard_count: _Optional[int] = ...) -> None: ...

class SyncRequest(_message.Message):
    __slots__ = ("source_path", "format", "options")
    SOURCE_PATH_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    source_path: str
    format: SourceFormat
    options: SyncOptions
    def __init__(self, source_path: _Optional[str] = ..., format: _Optional[_Union[SourceFormat, str]] = ..., options: _Optional[_Union[SyncOptions, _Mapping]] = ...) -> None: ...

class SyncCounts(_message.Message):
    __slots__ = ("read", "unchanged", "changed", "new", "embedded", "upserted", "failed", "missing", "deleted", "from_snapshot", "vector_reused")
    READ_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    NEW_FIELD_NUMBER: _ClassVar[int]
    EMBEDDED_FIELD_NUMBER: _ClassVar[int]
    UPSERTED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    FROM_SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    VECTOR_REUSED_FIELD_NUMBER: _ClassVar[int]
    read: int
    unchanged: int
    changed: int
    new: int
    embedded: int
    upserted: int
    failed: int
    missing: int
    deleted: int
    from_snapshot: int
    vector_reused: int
    def __init__(self, read: _Optional[int] = ..., unchanged: _Optional[int] = ..., changed: _Optional[int] = ..., new: _Optional[int] = ..., embedded: _Optional[int] = ..., upserted: _Optional[int] = ..., failed: _Optional[int] = ..., missing: _Optional[int] = ..., deleted: _Optional[int] = ..., from_snapshot: _Optional[int] = ..., vector_reused: _Optional[int] = ...) -> None: ...

class SyncProgress(_message.Message):
    __slots__ = ("counts", "elapsed_ms", "rate_per_s", "bytes_read", "bytes_total", "phase")
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    RATE_PER_S_FIELD_NUMBER: _ClassVar[int]
    BYTES_READ_FIELD_NUMBER: _ClassVar[int]
    BYTES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    counts: SyncCounts
    elapsed_ms: int
    rate_per_s: float
    bytes_read: int
    bytes_total: int
    phase: SyncPhase
    def __init__(self, counts: _Optional[_Union[SyncCounts, _Mapping]] = ..., elapsed_ms: _Optional[int] = ..., rate_per_s: _Optional[float] = ..., bytes_read: _Optional[int] = ..., bytes_total: _Optional[int] = ..., phase: _Optional[_Union[SyncPhase, str]] = ...) -> None: ...

class SyncFailure(_message.Message):
    __slots__ = ("line_number", "record_id", "reason")
    LINE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    line_number: int
    record_id: str
    reason: str
    def __init__(self, line_number: _Optional[int] = ..., record_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class SyncSummary(_message.Message):
    __slots__ = ("counts", "elapsed_ms", "missing_ids_sample", "resumed", "warnings", "format", "embedders", "downloaded_bytes")
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    MISSING_IDS_SAMPLE_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    EMBEDDERS_FIELD_NUMBER: _ClassVar[int]
    DOWNLOADED_BYTES_FIELD_NUMBER: _ClassVar[int]
    counts: SyncCounts
    elapsed_ms: int
    missing_ids_sample: _containers.RepeatedScalarFieldContainer[str]
    resumed: bool
    warnings: _containers.RepeatedScalarFieldContainer[str]
    format: SourceFormat
    embedders: _containers.RepeatedCompositeFieldContainer[EmbedderUse]
    downloaded_bytes: int
    def __init__(self, counts: _Optional[_Union[SyncCounts, _Mapping]] = ..., elapsed_ms: _Optional[int] = ..., missing_ids_sample: _Optional[_Iterable[str]] = ..., resumed: _Optional[bool] = ..., warnings: _Optional[_Iterable[str]] = ..., format: _Optional[_Union[SourceFormat, str]] = ..., embedders: _Optional[_Iterable[_Union[EmbedderUse, _Mapping]]] = ..., downloaded_bytes: _Optional[int] = ...) -> None: ...

class EmbedderUse(_message.Message):
    __slots__ = ("addr", "calls", "texts")
    ADDR_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    addr: str
    calls: int
    texts: int
    def __init__(self, addr: _Optional[str] = ..., calls: _Optional[int] = ..., texts: _Optional[int] = ...) -> None: ...

class SyncResponse(_message.Message):
    __slots__ = ("progress", "failure", "summary")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    progress: SyncProgress
    failure: SyncFailure
    summary: SyncSummary
    def __init__(self, progress: _Optional[_Union[SyncProgress, _Mapping]] = ..., failure: _Optional[_Union[SyncFailure, _Mapping]] = ..., summary: _Optional[_Union[SyncSummary, _Mapping]] = ...) -> None: ...

class FitTopicsRequest(_message.Message):
    __slots__ = ("min_topic_size",)
    MIN_TOPIC_SIZE_FIELD_NUMBER: _ClassVar[int]
    min_topic_size: int
    def __init__(self, min_topic_size: _Optional[int] = ...) -> None: ...

class FitTopicsProgress(_message.Message):
    __slots__ = ("stage", "percent")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    PERCENT_FIELD_NUMBER: _ClassVar[int]
    stage: str
    percent: int
    def __init__(self, stage: _Optional[str] = ..., percent: _Optional[int] = ...) -> None: ...

class Topic(_message.Message):
    __slots__ = ("id", "top_words", "size")
    ID_FIELD_NUMBER: _ClassVar[int]
    TOP_WORDS_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    id: int
    top_words: _containers.RepeatedScalarFieldContainer[str]
    size: int
    def __init__(self, id: _Optional[int] = ..., top_words: _Optional[_Iterable[str]] = ..., size: _Optional[int] = ...) -> None: ...

class FitTopicsResult(_message.Message):
    __slots__ = ("topics", "papers_assigned")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    PAPERS_ASSIGNED_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[Topic]
    papers_assigned: int
    def __init__(self, topics: _Optional[_Iterable[_Union[Topic, _Mapping]]] = ..., papers_assigned: _Optional[int] = ...) -> None: ...

class FitTopicsResponse(_message.Message):
    __slots__ = ("progress", "result")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    progress: FitTopicsProgress
    result: FitTopicsResult
    def __init__(self, progress: _Optional[_Union[FitTopicsProgress, _Mapping]] = ..., result: _Optional[_Union[FitTopicsResult, _Mapping]] = ...) -> None: ...

class ListTopicsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTopicsResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[Topic]
    def __init__(self, topics: _Optional[_Iterable[_Union[Topic, _Mapping]]] = ...) -> None: ...
