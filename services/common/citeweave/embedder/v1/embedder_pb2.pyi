from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EmbedRequest(_message.Message):
    __slots__ = ("texts",)
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, texts: _Optional[_Iterable[str]] = ...) -> None: ...

class Vector(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, values: _Optional[_Iterable[float]] = ...) -> None: ...

class EmbedResponse(_message.Message):
    __slots__ = ("vectors", "model_name", "dimension", "cached_count")
    VECTORS_FIELD_NUMBER: _ClassVar[int]
    MODEL_NAME_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    CACHED_COUNT_FIELD_NUMBER: _ClassVar[int]
    vectors: _containers.RepeatedCompositeFieldContainer[Vector]
    model_name: str
    dimension: int
    cached_count: int
    def __init__(self, vectors: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ..., model_name: _Optional[str] = ..., dimension: _Optional[int] = ..., cached_count: _Optional[int] = ...) -> None: ...

class GetModelInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetModelInfoResponse(_message.Message):
    __slots__ = ("model_name", "dimension", "backend", "max_inputs_per_request", "max_chars_per_text", "max_seq_length")
    MODEL_NAME_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    MAX_INPUTS_PER_REQUEST_FIELD_NUMBER: _ClassVar[int]
    MAX_CHARS_PER_TEXT_FIELD_NUMBER: _ClassVar[int]
    MAX_SEQ_LENGTH_FIELD_NUMBER: _ClassVar[int]
    model_name: str
    dimension: int
    backend: str
    max_inputs_per_request: int
    max_chars_per_text: int
    max_seq_length: int
    def __init__(self, model_name: _Optional[str] = ..., dimension: _Optional[int] = ..., backend: _Optional[str] = ..., max_inputs_per_request: _Optional[int] = ..., max_chars_per_text: _Optional[int] = ..., max_seq_length: _Optional[int] = ...) -> None: ...
