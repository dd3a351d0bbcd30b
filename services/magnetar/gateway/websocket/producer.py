"""A producer socket: publish frames in, acks out, over one SDK producer.

Frames are pipelined: each is handed to the producer (``send_async``) as it is read, and
the acks are written in the order the frames came, each once its send has an outcome.
At most ``max_pending`` frames are between being read and having their ack written;
while that many are, no frame is read (the socket's TCP window then fills, and the
client slows down), so a client that sends fast or reads its acks slowly never makes
the gateway hold more than ``max_pending`` messages.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Mapping
from datetime import timedelta
from typing import Protocol

from magnetar.client.producer import SendCallback
from magnetar.common.errors import MagnetarError
from magnetar.common.message_id import MessageId
from magnetar.gateway.websocket import ids
from magnetar.gateway.websocket.frames import (
    FrameError,
    WebSocketError,
    ack_error,
    ack_ok,
    error_of,
    parse_publish,
)
from magnetar.gateway.websocket.socket import Socket, SocketClosed, close_reason

log = logging.getLogger(__name__)


class SendingProducer(Protocol):
    """What the session uses of :class:`magnetar.client.producer.Producer`."""

    def send_async(
        self, content: bytes, callback: SendCallback | None, *, properties: Mapping[str, str] | None,
        partition_key: str | None, ordering_key: bytes | None, sequence_id: int | None, event_timestamp: int | None,
        deliver_at: int | None, deliver_after: timedelta | None,
    ) -> asyncio.Future[MessageId]: ...


class _Pending:
    """One frame between being read and having its ack written."""

    __slots__ = ("future", "context", "ack")

    def __init__(self, future: asyncio.Future[MessageId] | None, context: str | None, ack: str | None) -> None:
        self.future = future
        self.context = context
        self.ack = ack  # written as is (a frame refused before it was sent)


class ProducerSession:
    def __init__(
        self, socket: Socket, producer: SendingProducer, max_pending: int, initial_sequence_id: int | None = None
    ) -> None:
        self.socket = socket
        self.producer = producer
        self.max_pending = max(1, max_pending)
        self._room = asyncio.Semaphore(self.max_pending)
        self._pending: deque[_Pending] = deque()
        self._more = asyncio.Event()
        self._next_sequence = None if initial_sequence_id is None else initial_sequence_id + 1

    @property
    def pending(self) -> int:
        """Frames read whose ack is not written yet."""
        return len(self._pending)

    async def run(self) -> None:
        """Serve the socket until the client goes; the producer is the caller's to close."""
        writer = asyncio.create_task(self._write_acks(), name="ws-producer-acks")
        try:
            while True:
                await self._room.acquire()
                if writer.done():
                    return  # the socket broke under the writer
                frame = await self.socket.receive()
                if frame is None:
                    return
                self._pending.append(self._publish(frame))
                self._more.set()
        finally:
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)

    def _publish(self, frame: str | bytes) -> _Pending:
        try:
            msg = parse_publish(frame)
        except FrameError as exc:
            return _Pending(None, exc.context, ack_error(exc.error, exc.message, exc.context))
        try:
            future = self.producer.send_async(
                msg.payload, None, properties=msg.properties, partition_key=msg.key, ordering_key=msg.ordering_key,
                sequence_id=self._next_sequence,
                event_timestamp=msg.event_time_ms, deliver_at=msg.deliver_at_ms,
                deliver_after=None if msg.deliver_after_ms is None else timedelta(milliseconds=msg.deliver_after_ms),
            )
        except (MagnetarError, TypeError, ValueError) as exc:
            return _Pending(None, msg.context, ack_error(WebSocketError.UnknownError, str(exc), msg.context))
        if self._next_sequence is not None:
            self._next_sequence += 1
        return _Pending(future, msg.context, None)

    async def _write_acks(self) -> None:
        pending = self._pending
        try:
            while True:
                if not pending:
                    self._more.clear()
                    await self._more.wait()
                    continue
                head = pending[0]
                ack = head.ack
                if ack is None:
                    future = head.future
                    assert future is not None
                    if not future.done():
                        await asyncio.wait((future,))  # not wait_for: cancelling us leaves it be
                    ack = _ack_of(future, head.context)
                pending.popleft()
                await self.socket.send(ack)
                self._room.release()
        except SocketClosed:
            pass
        except Exception as exc:
            log.exception("writing acks to a producer socket failed")
            await self.socket.close(WebSocketError.UnknownError.close_code, close_reason(WebSocketError.UnknownError, repr(exc)))
        finally:
            self._room.release()  # wakes the reader, which sees that the writer is done


def _ack_of(future: asyncio.Future[MessageId], context: str | None) -> str:
    if future.cancelled():
        return ack_error(WebSocketError.UnknownError, "send cancelled", context)
    exc = future.exception()
    if exc is not None:
        message = exc.message if isinstance(exc, MagnetarError) else str(exc)
        return ack_error(error_of(exc), message, context)
    return ack_ok(ids.encode(future.result()), context)
