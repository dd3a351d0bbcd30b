"""The public consumer: one partition consumer per partition, merged into one queue."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable

from magnetar.common.errors import InvalidArgument, MagnetarError, ServiceClosed
from magnetar.common.message_id import MessageId
from magnetar.common.names import TopicName

from .connection import ConnectionPool
from .message import Message
from .options import ConsumerConfig, ConsumerType
from .partition_consumer import PartitionConsumer, Queued
from .receive_queue import ReceiveQueue

MessageOrId = Message | MessageId


def _id_of(msg: MessageOrId) -> MessageId:
    if isinstance(msg, Message):
        return msg.message_id()
    if isinstance(msg, MessageId):
        return msg
    raise TypeError(f"expected a Message or a MessageId, not {type(msg).__name__}")


class Consumer:
    """Receives the messages of one subscription of one topic (all its partitions)."""

    def __init__(
        self, topic: str, conf: ConsumerConfig, partitions: list[PartitionConsumer], queue: ReceiveQueue[Queued]
    ) -> None:
        self._topic = topic
        self._conf = conf
        self._partitions = partitions
        self._queue = queue
        self._closed = False

    @classmethod
    async def create(
        cls,
        pool: ConnectionPool,
        topic: str,
        conf: ConsumerConfig,
        skip: Callable[[MessageId], bool] | None = None,
    ) -> Consumer:
        name = TopicName.parse(topic)
        count = await pool.partitions(str(name))
        queue: ReceiveQueue[Queued] = ReceiveQueue()
        consumer_name = conf.consumer_name or secrets.token_hex(4)
        topics = [(str(name), -1)] if count == 0 else [(str(name.partition(i)), i) for i in range(count)]
        partitions = [PartitionConsumer(pool, t, i, conf, consumer_name, queue, skip) for t, i in topics]
        try:
            await asyncio.gather(*(p.start() for p in partitions))
        except BaseException:
            await asyncio.gather(*(p.close() for p in partitions), return_exceptions=True)
            raise
        return cls(str(name), conf, partitions, queue)

    # -- Pulsar's accessors ------------------------------------------------------------
    def topic(self) -> str:
        return self._topic

    def subscription_name(self) -> str:
        return self._conf.subscription_name

    def consumer_name(self) -> str:
        return self._partitions[0].consumer_name

    def is_connected(self) -> bool:
        return all(p.connected for p in self._partitions)

    @property
    def partitions(self) -> list[PartitionConsumer]:
        return self._partitions

    def queued(self) -> int:
        """How many received messages wait in the receive queue."""
        return len(self._queue)

    def _partition_of(self, mid: MessageId) -> PartitionConsumer:
        if len(self._partitions) == 1:
            return self._partitions[0]
        if not 0 <= mid.partition < len(self._partitions):
            raise InvalidArgument(f"message id {mid} names no partition of {self._topic}")
        return self._partitions[mid.partition]

    def _check_open(self) -> None:
        if self._closed:
            raise ServiceClosed(f"consumer on {self._topic} is closed")

    # -- receiving -----------------------------------------------------------------------
    async def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message.

        Raises:
            Timeout: no message within ``timeout_millis`` (None: wait for ever).
        """
        self._check_open()
        owner, msg = await self._queue.get(None if timeout_millis is None else timeout_millis / 1000)
        owner.message_taken(msg)
        return msg

    def take_blocking(self, timeout_millis: int | None = None) -> Queued:
        """The next queued (partition, message), waited for in the calling thread.

        For the blocking client: call from any thread but the loop's, and have the loop
        run ``partition.message_taken(message)`` afterwards (it grants the permit back).
        """
        self._check_open()
        return self._queue.get_blocking(None if timeout_millis is None else timeout_millis / 1000)

    def target_of(self, message: MessageOrId) -> tuple[PartitionConsumer, MessageId]:
        """The partition consumer that owns ``message`` and its id (checks both; pure)."""
        self._check_open()
        mid = _id_of(message)
        return self._partition_of(mid), mid

    async def acknowledge(self, message: MessageOrId) -> None:
        """Acknowledge one message (an entry is acked once all its messages are)."""
        self._check_open()
        mid = _id_of(message)
        self._partition_of(mid).ack(mid)

    async def acknowledge_cumulative(self, message: MessageOrId) -> None:
        """Acknowledge this message and every earlier one of its partition."""
        self._check_open()
        if self._conf.consumer_type in (ConsumerType.Shared, ConsumerType.KeyShared):
            raise InvalidArgument("cumulative acknowledgement is not allowed on Shared and KeyShared subscriptions")
        mid = _id_of(message)
        self._partition_of(mid).ack_cumulative(mid)

    async def negative_acknowledge(self, message: MessageOrId) -> None:
        """Have the message (its whole entry) redelivered after the negative-ack delay."""
        self._check_open()
        mid = _id_of(message)
        self._partition_of(mid).nack(mid)

    async def redeliver_unacknowledged_messages(self) -> None:
        self._check_open()
        for p in self._partitions:
            p.redeliver_all()

    async def unsubscribe(self) -> None:
        """Not supported yet: the broker protocol has no Unsubscribe request."""
        raise MagnetarError(
            "unsubscribe is not supported yet: the broker protocol (broker.proto) has no Unsubscribe request"
        )

    async def close(self) -> None:
        """Send pending acks and close every partition's stream."""
        if self._closed:
            return
        self._closed = True
        await asyncio.gather(*(p.close() for p in self._partitions))
        self._queue.fail(ServiceClosed(f"consumer on {self._topic} is closed"))
