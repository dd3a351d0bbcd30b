"""Consumer and reader sockets: messages out, commands (acks, negative acks, permits,
unsubscribe, end of topic) in, over one SDK consumer or reader.

Flow control, as Pulsar's handlers: in push mode at most ``queue_size`` messages are
out on the socket and not acknowledged (nor negatively acknowledged); the next message
is taken from the SDK only when one of them is. In pull mode (consumers with
``pullMode=true``) a message goes out only against a permit the client granted. A
reader never acks to the broker: any frame but ``isEndOfTopic`` frees one slot. Each
message is written before the next is taken, and a write waits while the client reads
slowly, so the gateway holds at most the SDK's receiver queue and one message per
socket; the SDK's queue stops asking the broker for more while it is full.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from magnetar.client.message import Message
from magnetar.common.errors import InvalidArgument, MagnetarError, ServiceClosed
from magnetar.common.message_id import ChunkMessageId, MessageId
from magnetar.gateway.websocket import ids
from magnetar.gateway.websocket.frames import (
    Command,
    CommandType,
    FrameError,
    WebSocketError,
    end_of_topic_frame,
    error_of,
    message_frame,
    parse_command,
)
from magnetar.gateway.websocket.socket import NORMAL_CLOSURE, Socket, SocketClosed, close_reason

log = logging.getLogger(__name__)


class ReceivingConsumer(Protocol):
    """What the session uses of :class:`magnetar.client.consumer.Consumer`."""

    async def receive(self, timeout_millis: int | None = None) -> Message: ...

    async def acknowledge(self, message: MessageId) -> None: ...

    async def negative_acknowledge(self, message: MessageId) -> None: ...

    async def unsubscribe(self) -> None: ...

    def has_reached_end_of_topic(self) -> bool: ...


class ReadingReader(Protocol):
    """What the session uses of :class:`magnetar.client.reader.Reader`."""

    async def read_next(self, timeout_millis: int | None = None) -> Message: ...

    def has_reached_end_of_topic(self) -> bool: ...


class _DeliverySession:
    """Writes messages to the socket as flow control allows and serves the client's
    frames; subclasses say where messages come from and what frames do."""

    kind = "consumer"

    def __init__(self, socket: Socket, queue_size: int) -> None:
        self.socket = socket
        self.queue_size = max(1, queue_size)
        self._credit = asyncio.Event()
        self.delivered = 0
        """Messages written to the socket so far."""

    def may_deliver(self) -> bool:
        raise NotImplementedError

    def _on_delivered(self, mid: MessageId) -> None:
        raise NotImplementedError

    async def _next(self) -> Message:
        raise NotImplementedError

    async def _handle(self, command: Command) -> bool:
        """Serve one frame; False ends the session (the socket is closed)."""
        raise NotImplementedError

    def _wake(self) -> None:
        self._credit.set()

    def _reached_end(self) -> bool:
        """The topic was terminated and the broker sent every message of it."""
        raise NotImplementedError

    async def run(self) -> None:
        """Serve the socket until the client goes or the session closes it; the SDK handle
        is the caller's to close."""
        pump = asyncio.create_task(self._deliver(), name=f"ws-{self.kind}-deliver")
        try:
            while True:
                frame = await self.socket.receive()
                if frame is None:
                    return
                try:
                    command = parse_command(frame)
                except FrameError as exc:
                    await self._close(exc.error, exc.message)
                    return
                if not await self._handle(command):
                    return
        finally:
            pump.cancel()
            await asyncio.gather(pump, return_exceptions=True)

    async def _deliver(self) -> None:
        try:
            while True:
                while not self.may_deliver():
                    self._credit.clear()
                    await self._credit.wait()
                msg = await self._next()
                self._on_delivered(msg.message_id())
                await self.socket.send(message_frame(msg))
                self.delivered += 1
        except (SocketClosed, ServiceClosed):
            return
        except Exception as exc:
            error = error_of(exc)
            detail = exc.message if isinstance(exc, MagnetarError) else repr(exc)
            if error is WebSocketError.UnknownError:
                log.exception("delivering to a WebSocket %s failed", self.kind)
            else:
                log.warning("a broker refused a WebSocket %s: %s", self.kind, detail)
            await self._close(error, detail)

    async def _close(self, error: WebSocketError, detail: str) -> None:
        await self.socket.close(error.close_code, close_reason(error, detail))

    async def _end_of_topic(self) -> bool:
        # Pulsar's answer: the handle's hasReachedEndOfTopic.
        try:
            await self.socket.send(end_of_topic_frame(self._reached_end()))
        except SocketClosed:
            return False
        return True


class ConsumerSession(_DeliverySession):
    """A consumer socket (``/ws/v2/consumer/...``)."""

    def __init__(self, socket: Socket, consumer: ReceivingConsumer, queue_size: int, pull_mode: bool = False) -> None:
        super().__init__(socket, queue_size)
        self.consumer = consumer
        self.pull_mode = pull_mode
        self.permits = 0
        self.outstanding: set[MessageId] = set()
        """Ids written to the socket and neither acked nor nacked yet (push mode)."""
        self.chunked: dict[MessageId, MessageId] = {}
        """Chunked messages' ids written and not acked or nacked yet: the id a client
        sends back names the first and last chunk, these every chunk (all are acked)."""

    def may_deliver(self) -> bool:
        if self.pull_mode:
            return self.permits > 0
        return len(self.outstanding) < self.queue_size

    def _on_delivered(self, mid: MessageId) -> None:
        if isinstance(mid, ChunkMessageId):
            self.chunked[mid] = mid
        if self.pull_mode:
            self.permits -= 1
        else:
            self.outstanding.add(mid)

    async def _next(self) -> Message:
        return await self.consumer.receive()

    def _reached_end(self) -> bool:
        return self.consumer.has_reached_end_of_topic()

    async def _handle(self, command: Command) -> bool:
        kind = command.type
        if kind is CommandType.PERMIT:
            if self.pull_mode and command.permit_messages and command.permit_messages > 0:
                self.permits += command.permit_messages
                self._wake()
            return True
        if kind is CommandType.END_OF_TOPIC:
            return await self._end_of_topic()
        if kind is CommandType.UNSUBSCRIBE:
            return await self._unsubscribe()
        if command.message_id is None:
            await self._close(WebSocketError.FailedToDeserializeFromJSON, "messageId is missing")
            return False
        try:
            mid = ids.decode(command.message_id)
            mid = self.chunked.pop(mid, mid) if self.chunked else mid
            if kind is CommandType.NEGATIVE_ACK:
                await self.consumer.negative_acknowledge(mid)
            else:
                await self.consumer.acknowledge(mid)
        except InvalidArgument as exc:
            await self._close(WebSocketError.FailedToDeserializeFromJSON, exc.message)
            return False
        except ServiceClosed:
            return True  # unsubscribed meanwhile
        if mid in self.outstanding:
            self.outstanding.discard(mid)
            self._wake()
        return True

    async def _unsubscribe(self) -> bool:
        try:
            await self.consumer.unsubscribe()
        except MagnetarError as exc:
            # As Pulsar: the refusal is logged and the socket stays open.
            log.warning("WebSocket consumer could not unsubscribe: %s", exc.message)
            return True
        await self.socket.close(NORMAL_CLOSURE, "Unsubscribed")
        return False


class ReaderSession(_DeliverySession):
    """A reader socket (``/ws/v2/reader/...``)."""

    kind = "reader"

    def __init__(self, socket: Socket, reader: ReadingReader, queue_size: int) -> None:
        super().__init__(socket, queue_size)
        self.reader = reader
        self.unconfirmed = 0
        """Messages written and not yet answered by a frame of the client."""

    def may_deliver(self) -> bool:
        return self.unconfirmed < self.queue_size

    def _on_delivered(self, mid: MessageId) -> None:
        self.unconfirmed += 1

    async def _next(self) -> Message:
        return await self.reader.read_next()

    def _reached_end(self) -> bool:
        return self.reader.has_reached_end_of_topic()

    async def _handle(self, command: Command) -> bool:
        if command.type is CommandType.END_OF_TOPIC:
            return await self._end_of_topic()
        if self.unconfirmed > 0:
            self.unconfirmed -= 1
            self._wake()
        return True
