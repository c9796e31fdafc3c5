from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DropReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DROP_REASON_UNSPECIFIED: _ClassVar[DropReason]
    DROP_REASON_REFERENCES: _ClassVar[DropReason]
    DROP_REASON_APPENDIX: _ClassVar[DropReason]
    DROP_REASON_ACKNOWLEDGEMENTS: _ClassVar[DropReason]
    DROP_REASON_SUPPLEMENTARY: _ClassVar[DropReason]
    DROP_REASON_EMPTY: _ClassVar[DropReason]

class TextSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TEXT_SOURCE_UNSPECIFIED: _ClassVar[TextSource]
    TEXT_SOURCE_FULL_TEXT: _ClassVar[TextSource]
    TEXT_SOURCE_ABSTRACT_ONLY: _ClassVar[TextSource]

class FallbackCause(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FALLBACK_CAUSE_UNSPECIFIED: _ClassVar[FallbackCause]
    FALLBACK_CAUSE_NOT_FOUND: _ClassVar[FallbackCause]
    FALLBACK_CAUSE_TIMEOUT: _ClassVar[FallbackCause]
    FALLBACK_CAUSE_UNAVAILABLE: _ClassVar[FallbackCause]
    FALLBACK_CAUSE_NOT_PDF: _ClassVar[FallbackCause]
    FALLBACK_CAUSE_ENCRYPTED: _ClassVar[FallbackCause]
    FALLBACK_CAUSE_TOO_LARGE: _ClassVar[FallbackCause]
    FALLBACK_CAUSE_TOO_MANY_PAGES: _ClassVar[FallbackCause]
    FALLBACK_CAUSE_NO_TEXT: _ClassVar[FallbackCause]
    FALLBACK_CAUSE_UNREADABLE: _ClassVar[FallbackCause]
DROP_REASON_UNSPECIFIED: DropReason
DROP_REASON_REFERENCES: DropReason
DROP_REASON_APPENDIX: DropReason
DROP_REASON_ACKNOWLEDGEMENTS: DropReason
DROP_REASON_SUPPLEMENTARY: DropReason
DROP_REASON_EMPTY: DropReason
TEXT_SOURCE_UNSPECIFIED: TextSource
TEXT_SOURCE_FULL_TEXT: TextSource
TEXT_SOURCE_ABSTRACT_ONLY: TextSource
FALLBACK_CAUSE_UNSPECIFIED: FallbackCause
FALLBACK_CAUSE_NOT_FOUND: FallbackCause
FALLBACK_CAUSE_TIMEOUT: FallbackCause
FALLBACK_CAUSE_UNAVAILABLE: FallbackCause
FALLBACK_CAUSE_NOT_PDF: FallbackCause
FALLBACK_CAUSE_ENCRYPTED: FallbackCause
FALLBACK_CAUSE_TOO_LARGE: FallbackCause
FALLBACK_CAUSE_TOO_MANY_PAGES: FallbackCause
FALLBACK_CAUSE_NO_TEXT: FallbackCause
FALLBACK_CAUSE_UNREADABLE: FallbackCause

class FetchPaperRequest(_message.Message):
    __slots__ = ("id", "skip_metadata")
    ID_FIELD_NUMBER: _ClassVar[int]
    SKIP_METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    skip_metadata: bool
    def __init__(self, id: _Optional[str] = ..., skip_metadata: _Optional[bool] = ...) -> None: ...

class PaperMetadata(_message.Message):
    __slots__ = ("id", "title", "abstract", "authors", "year", "categories", "pdf_url")
    ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    ABSTRACT_FIELD_NUMBER: _ClassVar[int]
    AUTHORS_FIELD_NUMBER: _ClassVar[int]
    YEAR_FIELD_NUMBER: _ClassVar[int]
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    PDF_URL_FIELD_NUMBER: _ClassVar[int]
    id: str
    title: str
    abstract: str
    authors: _containers.RepeatedScalarFieldContainer[str]
    year: int
    categories: _containers.RepeatedScalarFieldContainer[str]
    pdf_url: str
    def __init__(self, id: _Optional[str] = ..., title: _Optional[str] = ..., abstract: _Optional[str] = ..., authors: _Optional[_Iterable[str]] = ..., year: _Optional[int] = ..., categories: _Optional[_Iterable[str]] = ..., pdf_url: _Optional[str] = ...) -> None: ...

class Page(_message.Message):
    __slots__ = ("number", "text", "partial")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    number: int
    text: str
    partial: bool
    def __init__(self, number: _Optional[int] = ..., text: _Optional[str] = ..., partial: _Optional[bool] = ...) -> None: ...

class DroppedPart(_message.Message):
    __slots__ = ("page_number", "reason", "heading", "dropped_chars")
    PAGE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    HEADING_FIELD_NUMBER: _ClassVar[int]
    DROPPED_CHARS_FIELD_NUMBER: _ClassVar[int]
    page_number: int
    reason: DropReason
    heading: str
    dropped_chars: int
    def __init__(self, page_number: _Optional[int] = ..., reason: _Optional[_Union[DropReason, str]] = ..., heading: _Optional[str] = ..., dropped_chars: _Optional[int] = ...) -> None: ...

class FetchPaperResponse(_message.Message):
    __slots__ = ("metadata", "pages", "dropped_parts", "text_source", "fallback_reason", "page_count", "from_cache", "fallback_cause", "pdf_bytes", "download_ms", "extract_ms")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PAGES_FIELD_NUMBER: _ClassVar[int]
    DROPPED_PARTS_FIELD_NUMBER: _ClassVar[int]
    TEXT_SOURCE_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_REASON_FIELD_NUMBER: _ClassVar[int]
    PAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    FROM_CACHE_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_CAUSE_FIELD_NUMBER: _ClassVar[int]
    PDF_BYTES_FIELD_NUMBER: _ClassVar[int]
    DOWNLOAD_MS_FIELD_NUMBER: _ClassVar[int]
    EXTRACT_MS_FIELD_NUMBER: _ClassVar[int]
    metadata: PaperMetadata
    pages: _containers.RepeatedCompositeFieldContainer[Page]
    dropped_parts: _containers.RepeatedCompositeFieldContainer[DroppedPart]
    text_source: TextSource
    fallback_reason: str
    page_count: int
    from_cache: bool
    fallback_cause: FallbackCause
    pdf_bytes: int
    download_ms: float
    extract_ms: float
    def __init__(self, metadata: _Optional[_Union[PaperMetadata, _Mapping]] = ..., pages: _Optional[_Iterable[_Union[Page, _Mapping]]] = ..., dropped_parts: _Optional[_Iterable[_Union[DroppedPart, _Mapping]]] = ..., text_source: _Optional[_Union[TextSource, str]] = ..., fallback_reason: _Optional[str] = ..., page_count: _Optional[int] = ..., from_cache: _Optional[bool] = ..., fallback_cause: _Optional[_Union[FallbackCause, str]] = ..., pdf_bytes: _Optional[int] = ..., download_ms: _Optional[float] = ..., extract_ms: _Optional[float] = ...) -> None: ...

class ExtractPdfRequest(_message.Message):
    __slots__ = ("pdf", "filename")
    PDF_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    pdf: bytes
    filename: str
    def __init__(self, pdf: _Optional[bytes] = ..., filename: _Optional[str] = ...) -> None: ...

class ExtractPdfResponse(_message.Message):
    __slots__ = ("pages", "dropped_parts", "page_count", "title", "extract_ms")
    PAGES_FIELD_NUMBER: _ClassVar[int]
    DROPPED_PARTS_FIELD_NUMBER: _ClassVar[int]
    PAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    EXTRACT_MS_FIELD_NUMBER: _ClassVar[int]
    pages: _containers.RepeatedCompositeFieldContainer[Page]
    dropped_parts: _containers.RepeatedCompositeFieldContainer[DroppedPart]
    page_count: int
    title: str
    extract_ms: float
    def __init__(self, pages: _Optional[_Iterable[_Union[Page, _Mapping]]] = ..., dropped_parts: _Optional[_Iterable[_Union[DroppedPart, _Mapping]]] = ..., page_count: _Optional[int] = ..., title: _Optional[str] = ..., extract_ms: _Optional[float] = ...) -> None: ...
