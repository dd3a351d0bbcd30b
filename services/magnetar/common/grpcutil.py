"""gRPC boundary helpers: MagnetarError ⇄ gRPC status, shared by every server and client.

Servers report a MagnetarError as its ``grpc_status`` with the message, and put the
stable error code in the trailing metadata key ``magnetar-error-code``; clients turn
any ``grpc.RpcError`` back into the typed error with :func:`from_rpc_error`.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from magnetar.common.errors import (
    AuthenticationError,
    AuthorizationError,
    InvalidArgument,
    MagnetarError,
    NotConnected,
    NotGrpcServer,
    ServiceClosed,
    Timeout,
    TlsHandshakeFailed,
    from_code,
)
from magnetar.common.tls import is_handshake_refused

log = logging.getLogger(__name__)

_NOT_HTTP2 = ("failed parsing http/2", "trying to connect an http1.x server")
"""What gRPC's core says of a peer that answered, but not in HTTP/2 (a Pulsar protocol
port answers a preface with its ERROR frame; an HTTP/1 server with a status line)."""

ERROR_CODE_KEY = "magnetar-error-code"
T = TypeVar("T")

# Large entries travel in batches: allow messages well above one max-size entry.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
MESSAGE_SIZE_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]
# Each channel has its own connections. gRPC's default shares them process-wide by
# address: a channel to a server that came back on a port another channel had failed to
# reach (a restarted bookie or broker, or a new server on a reused port) inherited that
# old failure and its reconnect backoff, and failed at once with the old error.
CHANNEL_OPTIONS = [
    *MESSAGE_SIZE_OPTIONS,
    ("grpc.use_local_subchannel_pool", 1),
]

KEEPALIVE_TIME_MS = 2000
KEEPALIVE_TIMEOUT_MS = 3000
# A client's streams last for ever and may carry nothing for long (an idle consumer): a
# broker that stopped answering (SIGSTOP, a VM stall, a partition that drops packets)
# is only noticed by HTTP/2 pings. Unanswered for KEEPALIVE_TIMEOUT_MS, the connection
# and every call on it fail with UNAVAILABLE, and the SDK looks the topic up again.
CLIENT_CHANNEL_OPTIONS = [
    *CHANNEL_OPTIONS,
    ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
    ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]
# Servers the SDK talks to accept those pings (gRPC's default would answer pings more
# often than every 5 minutes with GOAWAY "too_many_pings").
# SO_REUSEPORT off: gRPC sets it by default, and then a second server bound to a port in
# use (a service restarted on its port while something else had taken it) shared the
# port silently, each getting part of the connections, instead of failing to listen.
SERVER_OPTIONS = [
    *MESSAGE_SIZE_OPTIONS,
    ("grpc.so_reuseport", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", KEEPALIVE_TIME_MS // 2),
    ("grpc.http2.max_ping_strikes", 0),
]


async def abort(context: grpc.aio.ServicerContext, exc: MagnetarError) -> None:
    """End the RPC with the error's status, message and code. Never returns."""
    context.set_trailing_metadata(((ERROR_CODE_KEY, exc.code),))
    await context.abort(grpc.StatusCode[exc.grpc_status], exc.message)


def rpc_errors(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Decorate a unary servicer method: MagnetarError → its status; anything else →
    INTERNAL with a short message (the traceback goes to the log, not the caller)."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> T:
        try:
            return await fn(self, request, context)
        except MagnetarError as exc:
            await abort(context, exc)
        except (grpc.aio.AbortError, grpc.aio.UsageError):
            raise
        except Exception as exc:
            log.exception("%s failed", fn.__name__)
            await abort(context, MagnetarError(f"internal error in {fn.__name__}: {type(exc).__name__}: {exc}"))
        raise AssertionError("unreachable")

    return wrapper


class _Malformed:
    """What the guarded deserializer hands on for bytes that do not parse."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _guarded(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserialize is None:
        return None

    def parse(raw: bytes) -> Any:
        try:
            return deserialize(raw)
        except Exception as exc:  # DecodeError, or a message nested too deep
            return _Malformed(f"{type(exc).__name__}: {exc}")

    return parse


class _StreamCheck:
    """Reads a request stream for the servicer; it ends at a message that does not parse,
    which the handler then reports (from its own task: a status set from the servicer's
    reader task could race the one the handler sends)."""

    __slots__ = ("malformed",)

    def __init__(self) -> None:
        self.malformed: _Malformed | None = None

    async def read(self, requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for request in requests:
            if isinstance(request, _Malformed):
                self.malformed = request
                return
            yield request


def guard_handler(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """``handler`` with a request deserializer that never raises: a request that is not
    valid protobuf ends the call with INVALID_ARGUMENT instead of grpc's UNKNOWN and a
    logged traceback, and never reaches the servicer. In a request stream, the servicer
    sees the stream end before the malformed message; the call then ends with
    INVALID_ARGUMENT (unless the servicer ended it with a status of its own)."""
    streaming_in, streaming_out = handler.request_streaming, handler.response_streaming
    behavior = (
        handler.stream_stream if streaming_in and streaming_out else handler.stream_unary if streaming_in
        else handler.unary_stream if streaming_out else handler.unary_unary
    )

    async def refuse_if_malformed(request: Any, check: _StreamCheck, context: grpc.aio.ServicerContext) -> None:
        bad = check.malformed if streaming_in else request if isinstance(request, _Malformed) else None
        if bad is not None:
            await abort(context, InvalidArgument(f"malformed request: {bad.reason}"))

    if streaming_out and inspect.isasyncgenfunction(behavior):
        async def wrapped_gen(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            check = _StreamCheck()
            if not streaming_in:
                await refuse_if_malformed(request, check, context)
            async for reply in behavior(check.read(request) if streaming_in else request, context):
                yield reply
            await refuse_if_malformed(request, check, context)

        wrapped: Callable[..., Any] = wrapped_gen
    else:
        async def wrapped_call(request: Any, context: grpc.aio.ServicerContext) -> Any:
            check = _StreamCheck()
            if not streaming_in:
                await refuse_if_malformed(request, check, context)
            result = behavior(check.read(request) if streaming_in else request, context)
            reply = await result if inspect.isawaitable(result) else result
            await refuse_if_malformed(request, check, context)
            return reply

        wrapped = wrapped_call
    kwargs = {
        "request_deserializer": _guarded(handler.request_deserializer),
        "response_serializer": handler.response_serializer,
    }
    if streaming_in and streaming_out:
        return grpc.stream_stream_rpc_method_handler(wrapped, **kwargs)
    if streaming_in:
        return grpc.stream_unary_rpc_method_handler(wrapped, **kwargs)
    if streaming_out:
        return grpc.unary_stream_rpc_method_handler(wrapped, **kwargs)
    return grpc.unary_unary_rpc_method_handler(wrapped, **kwargs)


class MalformedRequestGuard(grpc.aio.ServerInterceptor):
    """Put first in every server's interceptors: see :func:`guard_handler`."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        cached = self._cache.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        guarded = guard_handler(handler)
        if cached is None:  # the servicer's own handler; another interceptor's refusals vary
            self._cache[method] = (handler, guarded)
        return guarded


def cancels_this_task() -> bool:
    """Whether a CancelledError out of a stream operation cancels the current task.

    grpc.aio raises CancelledError in every operation in flight on a call that is
    cancelled, also in tasks nobody cancelled: the SDK's handlers cancel a broken
    stream's call from its reader task while the writer task may be mid-write. That is
    a broken stream (call it NotConnected), not a cancellation of the writer: taken for
    one, it ended the producer's and the consumer's writer tasks for good, after which
    every send timed out and no ack or permit went out again (the stuck producer of the
    chaos runs). The CancelledError stands only when the current task itself is being
    cancelled (``Task.cancelling()``).
    """
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def from_rpc_error(exc: grpc.RpcError, target: str = "") -> MagnetarError:
    """The typed MagnetarError for a failed call."""
    where = f" {target}" if target else ""
    code = exc.code() if hasattr(exc, "code") else None
    details = (exc.details() if hasattr(exc, "details") else None) or str(exc)
    trailing = exc.trailing_metadata() if hasattr(exc, "trailing_metadata") else None
    for key, value in trailing or ():
        if key == ERROR_CODE_KEY:
            return from_code(str(value), details)
    if code == grpc.StatusCode.UNAVAILABLE and is_handshake_refused(details):
        return TlsHandshakeFailed(f"TLS handshake with{where or ' the server'} refused: {details}")
    if code == grpc.StatusCode.UNAVAILABLE and any(mark in details.lower() for mark in _NOT_HTTP2):
        return NotGrpcServer(
            f"{(where or ' the server').strip()} does not speak gRPC: the Magnetar SDK talks to a broker's gRPC "
            f"port (magnetar://host:6660); pulsar://host:6650 is Pulsar's binary protocol, for pulsar-client ({details})"
        )
    if code == grpc.StatusCode.UNAVAILABLE:
        return NotConnected(f"cannot reach{where or ' the server'}: {details}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return Timeout(f"call to{where or ' the server'} timed out")
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidArgument(details)
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return AuthenticationError(details)
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return AuthorizationError(details)
    if code == grpc.StatusCode.CANCELLED:
        return ServiceClosed(f"call to{where or ' the server'} cancelled: {details}")
    return MagnetarError(f"{code.name if code else 'error'} from{where or ' the server'}: {details}")


def stream_rpc_error(exc: grpc.RpcError, target: str) -> MagnetarError:
    """The typed error of a stream that ended with ``exc``.

    A bare INTERNAL (no Magnetar error code) was made on this side: grpc's client reports
    a write on a dead connection ("Internal error from Core", a failed send batch) that
    way. Brokers always name their errors, and an unexpected one in a stream handler
    arrives as UNKNOWN, so it is a lost connection: NotConnected, and the handle
    reconnects instead of failing for good.
    """
    named = any(key == ERROR_CODE_KEY for key, _ in (exc.trailing_metadata() or ()))
    if exc.code() == grpc.StatusCode.INTERNAL and not named:
        return NotConnected(f"the stream to {target} broke ({exc.details()})")
    return from_rpc_error(exc, target)
