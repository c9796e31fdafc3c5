"""Domain errors. Service code raises these; the interceptor turns them into status codes."""

from __future__ import annotations

import grpc


class CiteweaveError(Exception):
    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InvalidArgument(CiteweaveError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(CiteweaveError):
    code = grpc.StatusCode.NOT_FOUND


class ResourceExhausted(CiteweaveError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unavailable(CiteweaveError):
    code = grpc.StatusCode.UNAVAILABLE


class FailedPrecondition(CiteweaveError):
    code = grpc.StatusCode.FAILED_PRECONDITION


def check_range(name: str, value: float, low: float, high: float) -> None:
    """INVALID_ARGUMENT naming the allowed range when value is outside [low, high]."""
    if not (low <= value <= high):
        raise InvalidArgument(f"{name} must be between {low:g} and {high:g}, got {value:g}")


class Aborted(CiteweaveError):
    """A conflicting operation is running (e.g. a second sync); retry when it has finished."""

    code = grpc.StatusCode.ABORTED


class Unauthenticated(CiteweaveError):
    code = grpc.StatusCode.UNAUTHENTICATED


class RateLimited(ResourceExhausted):
    """Over a rate or concurrency limit: `retry_after_s` says when a retry can succeed."""

    def __init__(self, message: str, retry_after_s: float):
        super().__init__(f"{message}; retry in {retry_after_s:.0f} s")
        self.retry_after_s = retry_after_s


class DeadlineExceeded(CiteweaveError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED
