"""Readers: read a topic from a position without managing acknowledgements.

Limits (the wire has no non-durable subscription and no start position yet):
a reader is an Exclusive subscription named ``reader-<random>``, which stays on the
broker after the reader closes. It starts at the earliest or latest message; for any
other start id it subscribes from the earliest and skips, client-side, every message
up to the start id (exclusive unless ``start_message_id_inclusive``), which reads the
topic from its beginning. The reader acks what it reads cumulatively, so the leftover
subscription holds no backlog.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable

from magnetar.common.errors import InvalidArgument
from magnetar.common.message_id import MessageId

from .connection import ConnectionPool
from .consumer import Consumer
from .message import Message
from .options import ConsumerConfig, ConsumerType, InitialPosition


def _skip_before(start: MessageId, inclusive: bool) -> Callable[[MessageId], bool]:
    def skip(mid: MessageId) -> bool:
        if (mid.ledger_id, mid.entry_id) != (start.ledger_id, start.entry_id):
            return (mid.ledger_id, mid.entry_id) < (start.ledger_id, start.entry_id)
        if start.batch_index < 0 or mid.batch_index < 0:
            return not inclusive
        return mid.batch_index < start.batch_index or (mid.batch_index == start.batch_index and not inclusive)

    return skip


class Reader:
    def __init__(self, pool: ConnectionPool, consumer: Consumer, baselines: list[tuple[int, int]]) -> None:
        self._pool = pool
        self._consumer = consumer
        self._read_upto = baselines  # per partition: (ledger, entry) read so far

    @classmethod
    async def create(
        cls,
        pool: ConnectionPool,
        topic: str,
        start_message_id: MessageId,
        reader_name: str | None = None,
        receiver_queue_size: int = 1000,
        subscription_role_prefix: str | None = None,
        start_message_id_inclusive: bool = False,
    ) -> Reader:
        if not isinstance(start_message_id, MessageId):
            raise TypeError(f"start_message_id must be a MessageId, not {type(start_message_id).__name__}")
        prefix = subscription_role_prefix or "reader"
        conf = ConsumerConfig(
            subscription_name=f"{prefix}-{secrets.token_hex(5)}",
            consumer_type=ConsumerType.Exclusive,
            consumer_name=reader_name,
            receiver_queue_size=receiver_queue_size,
        )
        skip = None
        if start_message_id == MessageId.latest:
            conf.initial_position = InitialPosition.Latest
        else:
            conf.initial_position = InitialPosition.Earliest
            if start_message_id != MessageId.earliest:
                skip = _skip_before(start_message_id, start_message_id_inclusive)
        consumer = await Consumer.create(pool, topic, conf, skip)
        if skip is not None and len(consumer.partitions) > 1:
            await consumer.close()
            raise InvalidArgument("a reader of a partitioned topic starts at MessageId.earliest or MessageId.latest")
        if start_message_id == MessageId.latest:
            ids = await asyncio.gather(*(pool.last_message_id(p.topic) for p in consumer.partitions))
            baselines = [(m.ledger_id, m.entry_id) for m in ids]
        elif start_message_id == MessageId.earliest:
            baselines = [(-1, -1)] * len(consumer.partitions)
        else:
            back = 0 if start_message_id_inclusive else 1
            baselines = [(start_message_id.ledger_id, start_message_id.entry_id - back)]
        return cls(pool, consumer, baselines)

    def topic(self) -> str:
        return self._consumer.topic()

    async def read_next(self, timeout_millis: int | None = None) -> Message:
        """The next message.

        Raises:
            Timeout: none within ``timeout_millis``.
        """
        msg = await self._consumer.receive(timeout_millis)
        mid = msg.message_id()
        index = max(0, mid.partition) if len(self._read_upto) > 1 else 0
        self._read_upto[index] = max(self._read_upto[index], (mid.ledger_id, mid.entry_id))
        await self._consumer.acknowledge_cumulative(mid)
        return msg

    async def has_message_available(self) -> bool:
        """True when a message is queued or the topic has one after the last read.

        Asks the broker for each partition's last message id (``GetLastMessageId``).
        """
        if self._consumer.queued():
            return True
        for i, p in enumerate(self._consumer.partitions):
            last = await self._pool.last_message_id(p.topic)
            if last.entry_id >= 0 and (last.ledger_id, last.entry_id) > self._read_upto[i]:
                return True
        return False

    def is_connected(self) -> bool:
        return self._consumer.is_connected()

    async def close(self) -> None:
        await self._consumer.close()
