"""The public consumer: one partition consumer per partition, merged into one queue."""

from __future__ import annotations

import asyncio
import secrets

from magnetar.common.errors import InvalidArgument, ServiceClosed
from magnetar.common.message_id import MessageId
from magnetar.common.names import TopicName

from .connection import ConnectionPool
from .message import Message
from .options import ConsumerConfig, ConsumerType
from .partition_consumer import PartitionConsumer, Queued
from .receive_queue import ReceiveQueue

MessageOrId = Message | MessageId
SeekTarget = MessageId | int  # a message id, or a publish time in ms since the epoch


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
    ) -> Consumer:
        name = TopicName.parse(topic)
        count = await pool.partitions(str(name))
        queue: ReceiveQueue[Queued] = ReceiveQueue()
        consumer_name = conf.consumer_name or secrets.token_hex(4)
        topics = [(str(name), -1)] if count == 0 else [(str(name.partition(i)), i) for i in range(count)]
        partitions = [PartitionConsumer(pool, t, i, conf, consumer_name, queue) for t, i in topics]
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

    async def seek(self, message_id_or_timestamp: SeekTarget) -> None:
        """Move the subscription: to a message id, or to the first message published at
        or after a time (an int, ms since the epoch).

        Every consumer of the subscription drops what it had received and not taken
        and starts again from there. On a partitioned topic a time,
        ``MessageId.earliest`` and ``MessageId.latest`` move every partition; another id
        moves the partition it names.

        Raises:
            InvalidArgument: a negative time, or an id that names no partition.
            MagnetarError: the broker's refusal (typed), NotConnected, Timeout.
        """
        self._check_open()
        await seek_partitions(self._topic, self._partitions, message_id_or_timestamp)

    async def unsubscribe(self) -> None:
        """Delete the subscription (every partition's) and close this consumer.

        Raises:
            MagnetarError: the broker's refusal (typed; e.g. other consumers are still
                attached), NotConnected, Timeout. When no partition was unsubscribed
                the consumer stays open; otherwise it is closed.
        """
        self._check_open()
        results = await asyncio.gather(*(p.unsubscribe() for p in self._partitions), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if len(errors) < len(results):
            await self.close()
        if errors:
            raise errors[0]

    async def close(self) -> None:
        """Send pending acks and close every partition's stream."""
        if self._closed:
            return
        self._closed = True
        await asyncio.gather(*(p.close() for p in self._partitions))
        self._queue.fail(ServiceClosed(f"consumer on {self._topic} is closed"))


async def seek_partitions(topic: str, partitions: list[PartitionConsumer], target: SeekTarget) -> None:
    """Seek the partitions ``target`` concerns (see :meth:`Consumer.seek`)."""
    if isinstance(target, MessageId):
        if target in (MessageId.earliest, MessageId.latest) or len(partitions) == 1:
            chosen, mid, ts = partitions, target, None
        elif 0 <= target.partition < len(partitions):
            chosen, mid, ts = [partitions[target.partition]], target, None
        else:
            raise InvalidArgument(f"message id {target} names no partition of {topic}")
    elif isinstance(target, int) and not isinstance(target, bool):
        if target < 0:
            raise InvalidArgument(f"a seek time is ms since the epoch, not {target}")
        chosen, mid, ts = partitions, None, target
    else:
        raise TypeError(f"seek takes a MessageId or a timestamp in ms (int), not {type(target).__name__}")
    results = await asyncio.gather(*(p.seek(mid, ts) for p in chosen), return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
