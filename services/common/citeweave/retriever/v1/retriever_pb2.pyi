from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SelectionRule(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SELECTION_RULE_UNSPECIFIED: _ClassVar[SelectionRule]
    SELECTION_RULE_MMR: _ClassVar[SelectionRule]
    SELECTION_RULE_CITEGEIST_MIN: _ClassVar[SelectionRule]

class SearchMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_MODE_UNSPECIFIED: _ClassVar[SearchMode]
    SEARCH_MODE_DENSE: _ClassVar[SearchMode]
    SEARCH_MODE_LEXICAL: _ClassVar[SearchMode]
    SEARCH_MODE_HYBRID: _ClassVar[SearchMode]

class PageAggregation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PAGE_AGGREGATION_UNSPECIFIED: _ClassVar[PageAggregation]
    PAGE_AGGREGATION_SUM: _ClassVar[PageAggregation]
    PAGE_AGGREGATION_MAX: _ClassVar[PageAggregation]

class Fusion(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FUSION_UNSPECIFIED: _ClassVar[Fusion]
    FUSION_RRF: _ClassVar[Fusion]
    FUSION_WEIGHTED: _ClassVar[Fusion]
SELECTION_RULE_UNSPECIFIED: SelectionRule
SELECTION_RULE_MMR: SelectionRule
SELECTION_RULE_CITEGEIST_MIN: SelectionRule
SEARCH_MODE_UNSPECIFIED: SearchMode
SEARCH_MODE_DENSE: SearchMode
SEARCH_MODE_LEXICAL: SearchMode
SEARCH_MODE_HYBRID: SearchMode
PAGE_AGGREGATION_UNSPECIFIED: PageAggregation
PAGE_AGGREGATION_SUM: PageAggregation
PAGE_AGGREGATION_MAX: PageAggregation
FUSION_UNSPECIFIED: Fusion
FUSION_RRF: Fusion
FUSION_WEIGHTED: Fusion

class Paper(_message.Message):
    __slots__ = ("id", "title", "abstract", "authors", "year", "date", "categories", "topic", "sha256", "url")
    ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    ABSTRACT_FIELD_NUMBER: _ClassVar[int]
    AUTHORS_FIELD_NUMBER: _ClassVar[int]
    YEAR_FIELD_NUMBER: _ClassVar[int]
    DATE_FIELD_NUMBER: _ClassVar[int]
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    id: str
    title: str
    abstract: str
    authors: _containers.RepeatedScalarFieldContainer[str]
    year: int
    date: str
    categories: _containers.RepeatedScalarFieldContainer[str]
    topic: int
    sha256: str
    url: str
    def __init__(self, id: _Optional[str] = ..., title: _Optional[str] = ..., abstract: _Optional[str] = ..., authors: _Optional[_Iterable[str]] = ..., year: _Optional[int] = ..., date: _Optional[str] = ..., categories: _Optional[_Iterable[str]] = ..., topic: _Optional[int] = ..., sha256: _Optional[str] = ..., url: _Optional[str] = ...) -> None: ...

class PaperRecord(_message.Message):
    __slots__ = ("paper", "vector")
    PAPER_FIELD_NUMBER: _ClassVar[int]
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    paper: Paper
    vector: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, paper: _Optional[_Union[Paper, _Mapping]] = ..., vector: _Optional[_Iterable[float]] = ...) -> None: ...

class SearchFilter(_message.Message):
    __slots__ = ("categories", "topics", "date_from", "date_to")
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    DATE_FROM_FIELD_NUMBER: _ClassVar[int]
    DATE_TO_FIELD_NUMBER: _ClassVar[int]
    categories: _containers.RepeatedScalarFieldContainer[str]
    topics: _containers.RepeatedScalarFieldContainer[int]
    date_from: str
    date_to: str
    def __init__(self, categories: _Optional[_Iterable[str]] = ..., topics: _Optional[_Iterable[int]] = ..., date_from: _Optional[str] = ..., date_to: _Optional[str] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("query_vector", "breadth", "diversity", "rule", "filter", "include_vectors", "mode", "query_text", "fusion", "lexical_weight", "top_k", "query_vectors", "page_aggregation")
    QUERY_VECTOR_FIELD_NUMBER: _ClassVar[int]
    BREADTH_FIELD_NUMBER: _ClassVar[int]
    DIVERSITY_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_VECTORS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    QUERY_TEXT_FIELD_NUMBER: _ClassVar[int]
    FUSION_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    QUERY_VECTORS_FIELD_NUMBER: _ClassVar[int]
    PAGE_AGGREGATION_FIELD_NUMBER: _ClassVar[int]
    query_vector: _containers.RepeatedScalarFieldContainer[float]
    breadth: int
    diversity: float
    rule: SelectionRule
    filter: SearchFilter
    include_vectors: bool
    mode: SearchMode
    query_text: str
    fusion: Fusion
    lexical_weight: float
    top_k: int
    query_vectors: _containers.RepeatedCompositeFieldContainer[CandidateVector]
    page_aggregation: PageAggregation
    def __init__(self, query_vector: _Optional[_Iterable[float]] = ..., breadth: _Optional[int] = ..., diversity: _Optional[float] = ..., rule: _Optional[_Union[SelectionRule, str]] = ..., filter: _Optional[_Union[SearchFilter, _Mapping]] = ..., include_vectors: _Optional[bool] = ..., mode: _Optional[_Union[SearchMode, str]] = ..., query_text: _Optional[str] = ..., fusion: _Optional[_Union[Fusion, str]] = ..., lexical_weight: _Optional[float] = ..., top_k: _Optional[int] = ..., query_vectors: _Optional[_Iterable[_Union[CandidateVector, _Mapping]]] = ..., page_aggregation: _Optional[_Union[PageAggregation, str]] = ...) -> None: ...

class ScoredPaper(_message.Message):
    __slots__ = ("paper", "similarity", "selection_score", "rank", "candidate_rank", "reason", "vector", "max_similarity_to_selected", "lexical_score", "relevance", "query_similarities")
    PAPER_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    SELECTION_SCORE_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_RANK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    MAX_SIMILARITY_TO_SELECTED_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_SCORE_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    QUERY_SIMILARITIES_FIELD_NUMBER: _ClassVar[int]
    paper: Paper
    similarity: float
    selection_score: float
    rank: int
    candidate_rank: int
    reason: str
    vector: _containers.RepeatedScalarFieldContainer[float]
    max_similarity_to_selected: float
    lexical_score: float
    relevance: float
    query_similarities: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, paper: _Optional[_Union[Paper, _Mapping]] = ..., similarity: _Optional[float] = ..., selection_score: _Optional[float] = ..., rank: _Optional[int] = ..., candidate_rank: _Optional[int] = ..., reason: _Optional[str] = ..., vector: _Optional[_Iterable[float]] = ..., max_similarity_to_selected: _Optional[float] = ..., lexical_score: _Optional[float] = ..., relevance: _Optional[float] = ..., query_similarities: _Optional[_Iterable[float]] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("papers", "candidates_considered", "rule", "breadth", "diversity", "search_ms", "selection_ms", "mode", "fusion", "lexical_weight", "lexical_ms", "query_count", "page_aggregation")
    PAPERS_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_CONSIDERED_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    BREADTH_FIELD_NUMBER: _ClassVar[int]
    DIVERSITY_FIELD_NUMBER: _ClassVar[int]
    SEARCH_MS_FIELD_NUMBER: _ClassVar[int]
    SELECTION_MS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    FUSION_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_MS_FIELD_NUMBER: _ClassVar[int]
    QUERY_COUNT_FIELD_NUMBER: _ClassVar[int]
    PAGE_AGGREGATION_FIELD_NUMBER: _ClassVar[int]
    papers: _containers.RepeatedCompositeFieldContainer[ScoredPaper]
    candidates_considered: int
    rule: SelectionRule
    breadth: int
    diversity: float
    search_ms: float
    selection_ms: float
    mode: SearchMode
    fusion: Fusion
    lexical_weight: float
    lexical_ms: float
    query_count: int
    page_aggregation: PageAggregation
    def __init__(self, papers: _Optional[_Iterable[_Union[ScoredPaper, _Mapping]]] = ..., candidates_considered: _Optional[int] = ..., rule: _Optional[_Union[SelectionRule, str]] = ..., breadth: _Optional[int] = ..., diversity: _Optional[float] = ..., search_ms: _Optional[float] = ..., selection_ms: _Optional[float] = ..., mode: _Optional[_Union[SearchMode, str]] = ..., fusion: _Optional[_Union[Fusion, str]] = ..., lexical_weight: _Optional[float] = ..., lexical_ms: _Optional[float] = ..., query_count: _Optional[int] = ..., page_aggregation: _Optional[_Union[PageAggregation, str]] = ...) -> None: ...

class CandidateVector(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, values: _Optional[_Iterable[float]] = ...) -> None: ...

class SelectPassagesRequest(_message.Message):
    __slots__ = ("query_vector", "candidates", "k", "diversity", "rule", "query_vectors", "aggregation")
    QUERY_VECTOR_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    DIVERSITY_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    QUERY_VECTORS_FIELD_NUMBER: _ClassVar[int]
    AGGREGATION_FIELD_NUMBER: _ClassVar[int]
    query_vector: _containers.RepeatedScalarFieldContainer[float]
    candidates: _containers.RepeatedCompositeFieldContainer[CandidateVector]
    k: int
    diversity: float
    rule: SelectionRule
    query_vectors: _containers.RepeatedCompositeFieldContainer[CandidateVector]
    aggregation: PageAggregation
    def __init__(self, query_vector: _Optional[_Iterable[float]] = ..., candidates: _Optional[_Iterable[_Union[CandidateVector, _Mapping]]] = ..., k: _Optional[int] = ..., diversity: _Optional[float] = ..., rule: _Optional[_Union[SelectionRule, str]] = ..., query_vectors: _Optional[_Iterable[_Union[CandidateVector, _Mapping]]] = ..., aggregation: _Optional[_Union[PageAggregation, str]] = ...) -> None: ...

class Selection(_message.Message):
    __slots__ = ("index", "similarity", "selection_score", "reason")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    SELECTION_SCORE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    index: int
    similarity: float
    selection_score: float
    reason: str
    def __init__(self, index: _Optional[int] = ..., similarity: _Optional[float] = ..., selection_score: _Optional[float] = ..., reason: _Optional[str] = ...) -> None: ...

class SelectPassagesResponse(_message.Message):
    __slots__ = ("selections",)
    SELECTIONS_FIELD_NUMBER: _ClassVar[int]
    selections: _containers.RepeatedCompositeFieldContainer[Selection]
    def __init__(self, selections: _Optional[_Iterable[_Union[Selection, _Mapping]]] = ...) -> None: ...

class UpsertRequest(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[PaperRecord]
    def __init__(self, records: _Optional[_Iterable[_Union[PaperRecord, _Mapping]]] = ...) -> None: ...

class UpsertResponse(_message.Message):
    __slots__ = ("upserted_count",)
    UPSERTED_COUNT_FIELD_NUMBER: _ClassVar[int]
    upserted_count: int
    def __init__(self, upserted_count: _Optional[int] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ("deleted_count",)
    DELETED_COUNT_FIELD_NUMBER: _ClassVar[int]
    deleted_count: int
    def __init__(self, deleted_count: _Optional[int] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("ids", "include_vectors")
    IDS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_VECTORS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    include_vectors: bool
    def __init__(self, ids: _Optional[_Iterable[str]] = ..., include_vectors: _Optional[bool] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("records", "missing_ids")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    MISSING_IDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[PaperRecord]
    missing_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, records: _Optional[_Iterable[_Union[PaperRecord, _Mapping]]] = ..., missing_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ListHashesRequest(_message.Message):
    __slots__ = ("page_size",)
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    def __init__(self, page_size: _Optional[int] = ...) -> None: ...

class IdHash(_message.Message):
    __slots__ = ("id", "sha256")
    ID_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    id: str
    sha256: str
    def __init__(self, id: _Optional[str] = ..., sha256: _Optional[str] = ...) -> None: ...

class ListHashesResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[IdHash]
    def __init__(self, entries: _Optional[_Iterable[_Union[IdHash, _Mapping]]] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("paper_count", "dimension", "collection", "store_kind", "index_type", "metric_type", "lexical_documents", "lexical_stale", "lexical_enabled")
    PAPER_COUNT_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    STORE_KIND_FIELD_NUMBER: _ClassVar[int]
    INDEX_TYPE_FIELD_NUMBER: _ClassVar[int]
    METRIC_TYPE_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_STALE_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_ENABLED_FIELD_NUMBER: _ClassVar[int]
    paper_count: int
    dimension: int
    collection: str
    store_kind: str
    index_type: str
    metric_type: str
    lexical_documents: int
    lexical_stale: bool
    lexical_enabled: bool
    def __init__(self, paper_count: _Optional[int] = ..., dimension: _Optional[int] = ..., collection: _Optional[str] = ..., store_kind: _Optional[str] = ..., index_type: _Optional[str] = ..., metric_type: _Optional[str] = ..., lexical_documents: _Optional[int] = ..., lexical_stale: _Optional[bool] = ..., lexical_enabled: _Optional[bool] = ...) -> None: ...
