"""The consumer of one topic or one partition: a ``Consume`` stream feeding a receive queue.

Flow control: after (re)subscribing the consumer grants ``receiver_queue_size``
permits; as the application takes messages it grants them back in halves of the
queue, as Pulsar does. One writer task sends permits, grouped acks and redelivery
requests. On reconnect the messages still queued from this partition are dropped
(the broker redelivers everything unacked) and the full queue is granted again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import grpc

from magnetar.common.errors import (
    ConsumerBusy,
    MagnetarError,
    NotConnected,
    ServiceClosed,
    from_code,
)
from magnetar.common.grpcutil import from_rpc_error
from magnetar.common.message_id import MessageId
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.proto.v1 import broker_pb2_grpc as pb_grpc

from .acks import AckTracker, Position
from .connection import ConnectionPool
from .handler import ConnectionHandler, open_stream
from .message import Message, unpack_entry
from .options import ConsumerConfig
from .receive_queue import ReceiveQueue

log = logging.getLogger(__name__)

Queued = tuple["PartitionConsumer", Message]


class PartitionConsumer(ConnectionHandler):
    kind = "consumer"

    def __init__(
        self,
        pool: ConnectionPool,
        topic: str,
        partition: int,
        conf: ConsumerConfig,
        consumer_name: str,
        queue: ReceiveQueue[Queued],
        skip: Callable[[MessageId], bool] | None = None,
    ) -> None:
        super().__init__(pool, topic)
        self.partition = partition
        self.conf = conf
        self.consumer_name = consumer_name
        self.queue_size = max(1, conf.receiver_queue_size)
        self.acks = AckTracker()
        self.last_taken: MessageId | None = None
        self._queue = queue
        self._skip = skip
        self._taken = 0  # messages taken by the application since the last Flow
        self._flow = 0  # permits to grant
        self._redeliver: list[Position] = []
        self._redeliver_all = False
        self._nack_due: dict[Position, float] = {}
        self._wakeup = asyncio.Event()
        self._write_lock = asyncio.Lock()
        self._writer: asyncio.Task[None] | None = None

    # -- stream ---------------------------------------------------------------------
    async def _open(self, stub: pb_grpc.BrokerStub, target: str) -> grpc.aio.StreamStreamCall:
        call = stub.Consume()
        subscribe = pb.Subscribe(
            topic=self.topic,
            subscription=self.conf.subscription_name,
            type=int(self.conf.consumer_type),  # type: ignore[arg-type]
            consumer_name=self.consumer_name,
            priority_level=self.conf.priority_level,
            initial_position=int(self.conf.initial_position),  # type: ignore[arg-type]
            receiver_queue_size=self.queue_size,
        )
        resp = await open_stream(call, pb.ConsumeRequest(subscribe=subscribe), self.pool.operation_timeout_s, target)
        if resp.HasField("error"):  # type: ignore[attr-defined]
            call.cancel()
            raise from_code(resp.error.code, resp.error.message)  # type: ignore[attr-defined]
        if not resp.HasField("subscribed"):  # type: ignore[attr-defined]
            call.cancel()
            raise MagnetarError(f"{target} answered the subscribe with {resp}")
        self.consumer_name = resp.subscribed.consumer_name or self.consumer_name  # type: ignore[attr-defined]
        return call

    def _connected(self) -> None:
        self._queue.remove_if(lambda item: item[0] is self)  # the broker redelivers them
        self._taken = 0
        self._flow = self.queue_size
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_loop(), name=f"consumer-writer:{self.topic}")
        self._wakeup.set()

    def _retry_on_reconnect(self, exc: MagnetarError) -> bool:
        # After a broker failover the old consumer may still hold the subscription.
        return exc.retriable or isinstance(exc, ConsumerBusy)

    async def _read(self, call: grpc.aio.StreamStreamCall) -> MagnetarError:
        try:
            while True:
                resp = await call.read()
                if resp is grpc.aio.EOF:
                    return NotConnected(f"broker {self.broker_address} closed the consume stream")
                if resp.HasField("deliveries"):
                    for delivery in resp.deliveries.deliveries:
                        self._on_delivery(delivery)
                elif resp.HasField("error"):
                    return from_code(resp.error.code, resp.error.message)
        except grpc.RpcError as exc:
            return from_rpc_error(exc, f"broker {self.broker_address}")

    def _on_delivery(self, delivery: pb.Delivery) -> None:
        try:
            messages, batched = unpack_entry(self.topic, self.partition, delivery)
        except MagnetarError:
            log.exception("consumer on %s: dropping an undecodable entry", self.topic)
            self._taken += 1
            return
        pos = (delivery.message_id.ledger_id, delivery.message_id.entry_id)
        track = bool(self.conf.unacked_messages_timeout_ms)
        self.acks.on_delivery(pos, len(messages), batched, time.monotonic(), track)
        skipped = 0
        for msg in messages:
            mid = msg.message_id()
            if self.acks.is_acked(mid) or (self._skip is not None and self._skip(mid)):
                skipped += 1
            else:
                self._queue.put((self, msg))
        if skipped:
            self._grant(skipped)

    # -- flow ------------------------------------------------------------------------
    def message_taken(self, msg: Message) -> None:
        """The application took ``msg`` from the queue: its permit may go back."""
        self.last_taken = msg.message_id()
        self._grant(1)

    def _grant(self, n: int) -> None:
        self._taken += n
        if self._taken >= max(1, self.queue_size // 2):
            self._flow += self._taken
            self._taken = 0
            self._wakeup.set()

    # -- acks ------------------------------------------------------------------------
    def ack(self, mid: MessageId) -> None:
        self._nack_due.pop((mid.ledger_id, mid.entry_id), None)
        self.acks.ack(mid)
        self._maybe_flush()

    def ack_cumulative(self, mid: MessageId) -> None:
        self.acks.ack_cumulative(mid)
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        if self.acks.pending >= self.conf.ack_group_max_size or self.conf.ack_group_time_ms <= 0:
            self._wakeup.set()

    def nack(self, mid: MessageId) -> None:
        pos = (mid.ledger_id, mid.entry_id)
        self.acks.forget_unacked(pos)
        self._nack_due[pos] = time.monotonic() + self.conf.negative_ack_redelivery_delay_ms / 1000
        if self.conf.negative_ack_redelivery_delay_ms <= 0:
            self._wakeup.set()

    def redeliver_all(self) -> None:
        """Ask for every unacked message again (the queued ones are dropped and re-granted)."""
        dropped = self._queue.remove_if(lambda item: item[0] is self)
        self._redeliver_all = True
        self._flow += dropped
        self._wakeup.set()

    def _due_redeliveries(self) -> list[Position]:
        now = time.monotonic()
        due = [p for p, t in self._nack_due.items() if t <= now]
        for p in due:
            del self._nack_due[p]
        if self.conf.unacked_messages_timeout_ms:
            due.extend(self.acks.expired(now, self.conf.unacked_messages_timeout_ms / 1000))
        return due

    # -- the one writer ---------------------------------------------------------------
    async def _write_loop(self) -> None:
        period = max(0.001, self.conf.ack_group_time_ms / 1000)
        while not self._closed:
            try:
                await asyncio.wait_for(self._wakeup.wait(), period)
            except TimeoutError:
                pass
            self._wakeup.clear()
            try:
                await self.write_pending()
            except Exception:  # a writer that dies would hang the consumer: log and go on
                log.exception("consumer on %s: sending acks/permits failed", self.topic)

    async def write_pending(self) -> None:
        async with self._write_lock:
            call = self._call
            self._redeliver.extend(self._due_redeliveries())
            if call is None:
                return  # everything stays queued until the stream is back
            requests: list[pb.ConsumeRequest] = []
            individual, cumulative = self.acks.take()
            if cumulative is not None:
                ack = pb.Ack(type=pb.CUMULATIVE, message_ids=[_entry_id(cumulative, self.partition)])
                requests.append(pb.ConsumeRequest(ack=ack))
            for i in range(0, len(individual), 1000):
                ids = [_entry_id(p, self.partition) for p in individual[i : i + 1000]]
                requests.append(pb.ConsumeRequest(ack=pb.Ack(type=pb.INDIVIDUAL, message_ids=ids)))
            redeliver, self._redeliver = self._redeliver, []
            if self._redeliver_all:
                self._redeliver_all = False
                requests.append(pb.ConsumeRequest(redeliver=pb.RedeliverUnacknowledged()))
            elif redeliver:
                ids = [_entry_id(p, self.partition) for p in dict.fromkeys(redeliver)]
                requests.append(pb.ConsumeRequest(redeliver=pb.RedeliverUnacknowledged(message_ids=ids)))
            flow, self._flow = self._flow, 0
            if flow:
                requests.append(pb.ConsumeRequest(flow=pb.Flow(permits=flow)))
            try:
                for req in requests:
                    await call.write(req)
            except Exception as exc:  # the stream broke: keep the acks for the next stream
                log.debug("consumer on %s: write failed: %r", self.topic, exc)
                self.acks.restore(individual, cumulative)
                self._redeliver.extend(redeliver)

    def _fail(self, exc: MagnetarError) -> None:
        self.failed = exc
        self._closed = True
        log.warning("consumer %s on %s failed: %s", self.consumer_name, self.topic, exc)
        self._queue.fail(exc)

    async def close(self) -> None:
        if self._released:
            return
        if self.connected:
            try:
                await asyncio.wait_for(self.write_pending(), self.pool.operation_timeout_s)
            except (TimeoutError, MagnetarError):
                pass
        await self._stop()
        if self._writer is not None:
            self._writer.cancel()
            await asyncio.gather(self._writer, return_exceptions=True)
        self._queue.remove_if(lambda item: item[0] is self)
        self.failed = self.failed or ServiceClosed(f"consumer on {self.topic} closed")


def _entry_id(pos: Position, partition: int) -> pb.MessageIdData:
    return pb.MessageIdData(ledger_id=pos[0], entry_id=pos[1], partition=partition, batch_index=-1)
