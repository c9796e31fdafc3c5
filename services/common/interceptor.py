"""Maps domain errors to gRPC status codes; anything unexpected becomes INTERNAL with a log line."""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from grpc.aio import ServerInterceptor

from services.common.errors import CiteweaveError, RateLimited

log = logging.getLogger("citeweave.rpc")


async def _abort_for(exc: BaseException, context: grpc.aio.ServicerContext, method: str) -> None:
    if isinstance(exc, CiteweaveError):
        if isinstance(exc, RateLimited):
            context.set_trailing_metadata((("retry-after", str(math.ceil(exc.retry_after_s))),))
        log.info("rpc error", extra={"method": method, "code": exc.code.name, "detail": exc.message})
        await context.abort(exc.code, exc.message)
    log.exception("unexpected error", extra={"method": method})
    await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method}: {type(exc).__name__}")


def _passes_through(exc: BaseException) -> bool:
    # context.abort() raises AbortError to end the call; it already carries its status.
    return isinstance(exc, grpc.aio.AbortError)


def _wrap_unary(behavior: Callable[..., Awaitable[Any]], method: str):
    async def wrapper(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await behavior(request, context)
        except Exception as exc:  # noqa: BLE001 - the point of this interceptor
            if _passes_through(exc):
                raise
            await _abort_for(exc, context, method)

    return wrapper


def _wrap_stream(behavior: Callable[..., AsyncIterator[Any]], method: str):
    async def wrapper(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            async for item in behavior(request, context):
                yield item
        except Exception as exc:  # noqa: BLE001
            if _passes_through(exc):
                raise
            await _abort_for(exc, context, method)

    return wrapper


class ErrorInterceptor(ServerInterceptor):
    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                _wrap_unary(handler.unary_unary, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                _wrap_stream(handler.unary_stream, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_unary:
            return grpc.stream_unary_rpc_method_handler(
                _wrap_unary(handler.stream_unary, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return grpc.stream_stream_rpc_method_handler(
            _wrap_stream(handler.stream_stream, method),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
