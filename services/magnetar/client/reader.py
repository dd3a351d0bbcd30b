"""Readers: read a topic from a position without managing acknowledgements.

A reader is an Exclusive subscription with a non-durable cursor (never stored, removed
when the reader leaves, holds no data back) named ``reader-<random hex>``
(``<subscription_role_prefix>-<random hex>`` when a prefix is given). The broker starts
it at ``start_message_id`` (``MessageId.earliest``, ``MessageId.latest`` or an id; the
id itself only with ``start_message_id_inclusive``). A reader does not ack: its cursor
needs none.

A reader of a missing topic creates it as a consumer would (its partitioned-metadata
question carries ``auto_create``, as Pulsar's readers'): partitioned when its
namespace's autoTopicCreation says so.

Limits: on a partitioned topic a reader starts at earliest or latest only.
``has_message_available`` compares the broker's last message id with the last entry
read; after a seek to a time it cannot know where the time falls, so it counts every
stored entry until a message is read.
"""

from __future__ import annotations

import asyncio
import secrets

from magnetar.common.errors import InvalidArgument
from magnetar.common.message_id import MessageId
from magnetar.common.names import TopicName
from magnetar.schema import BytesSchema, Schema

from .connection import ConnectionPool
from .consumer import Consumer, SeekTarget
from .listener import Listener
from .message import Message
from .options import ConsumerConfig, ConsumerType, InitialPosition

_NOTHING_READ = (-1, -1)


class Reader:
    def __init__(self, pool: ConnectionPool, consumer: Consumer, baselines: list[tuple[int, int]]) -> None:
        self._pool = pool
        self._consumer = consumer
        self._read_upto = baselines  # per partition: (ledger, entry) read (or skipped) so far

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
        schema: Schema | None = None,
        is_read_compacted: bool = False,
    ) -> Reader:
        if not isinstance(start_message_id, MessageId):
            raise TypeError(f"start_message_id must be a MessageId, not {type(start_message_id).__name__}")
        specific = start_message_id not in (MessageId.earliest, MessageId.latest)
        # Asked as a consumer asks (auto_create, as Pulsar's readers): a missing topic of a
        # namespace that auto-creates partitioned topics is partitioned from here on.
        if specific and await pool.partitions(str(TopicName.parse(topic)), auto_create=True) > 0:
            raise InvalidArgument("a reader of a partitioned topic starts at MessageId.earliest or MessageId.latest")
        prefix = subscription_role_prefix or "reader"
        conf = ConsumerConfig(
            subscription_name=f"{prefix}-{secrets.token_hex(5)}",
            consumer_type=ConsumerType.Exclusive,
            consumer_name=reader_name,
            receiver_queue_size=receiver_queue_size,
            initial_position=(
                InitialPosition.Latest if start_message_id == MessageId.latest else InitialPosition.Earliest
            ),
            start_message_id=start_message_id,
            start_message_id_inclusive=start_message_id_inclusive,
            non_durable=True,
            is_read_compacted=is_read_compacted,
            schema=schema if schema is not None else BytesSchema(),
        )
        consumer = await Consumer.create(pool, topic, conf)
        reader = cls(pool, consumer, [_NOTHING_READ] * len(consumer.partitions))
        try:
            await reader._set_baselines(start_message_id, start_message_id_inclusive)
        except BaseException:
            await consumer.close()
            raise
        return reader

    def incomplete_chunked_message_start(self) -> MessageId | None:
        """The first chunk's id of the oldest chunked message this reader has read in part
        and holds (None: none): a reader of a range of entries (the Spark source) reads on
        past its end until the messages that started in it are whole."""
        starts = [s for s in (p.chunks.oldest_first_chunk() for p in self._consumer.partitions) if s is not None]
        return min(starts) if starts else None

    async def _set_baselines(self, start: MessageId, inclusive: bool) -> None:
        """What counts as read already, for :meth:`has_message_available`."""
        partitions = self._consumer.partitions
        if start == MessageId.latest and self.topic().startswith("non-persistent://"):
            # Nothing is kept there (no last message id to ask): latest is earliest.
            self._read_upto = [_NOTHING_READ] * len(partitions)
        elif start == MessageId.latest:
            ids = await asyncio.gather(*(self._pool.last_message_id(p.topic, self._consumer.reads_compacted) for p in partitions))
            back = 1 if inclusive else 0  # inclusive: the last message is still to read
            self._read_upto = [(m.ledger_id, m.entry_id - back) for m in ids]
        elif start == MessageId.earliest:
            self._read_upto = [_NOTHING_READ] * len(partitions)
        else:
            # Inclusive: the start entry itself is still to read.
            back = 1 if inclusive else 0
            upto = (start.ledger_id(), start.entry_id() - back)
            index = start.partition() if len(partitions) > 1 else 0
            self._read_upto[index] = upto

    def topic(self) -> str:
        return self._consumer.topic()

    async def read_next(self, timeout_millis: int | None = None) -> Message:
        """The next message.

        Raises:
            Timeout: none within ``timeout_millis``.
            InvalidConfiguration: the reader has a ``reader_listener``.
        """
        self._consumer._check_receivable()
        return await self._next(timeout_millis)

    def listen(self, fn: Listener, handle: object) -> None:
        """Call ``fn(handle, message)`` on the loop for each message (pulsar-client's
        ``reader_listener``; see :mod:`magnetar.client.listener`); ``read_next`` is then
        refused. Close ends it."""
        self._consumer.listen(fn, handle, self._next)

    def reserve_for_listener(self) -> None:
        """A blocking client's listener thread reads (with ``_next``): ``read_next`` is refused."""
        self._consumer.reserve_for_listener()

    async def _next(self, timeout_millis: int | None = None) -> Message:
        msg = await self._consumer._receive(timeout_millis)
        mid = msg.message_id()
        index = max(0, mid.partition()) if len(self._read_upto) > 1 else 0
        self._read_upto[index] = max(self._read_upto[index], (mid.ledger_id(), mid.entry_id()))
        return msg

    async def has_message_available(self) -> bool:
        """True when a message is queued or the topic has one after the last read.

        Asks the broker for each partition's last message id (``GetLastMessageId``).
        """
        if self._consumer.queued():
            return True
        for i, p in enumerate(self._consumer.partitions):
            last = await self._pool.last_message_id(p.topic, self._consumer.reads_compacted)
            if last.entry_id >= 0 and (last.ledger_id, last.entry_id) > self._read_upto[i]:
                return True
        return False

    async def seek(self, message_id_or_timestamp: SeekTarget) -> None:
        """Move the reader: to a message id (the next message is the one after it, or
        that one with ``start_message_id_inclusive``, as pulsar-client's), or to the first
        message published at or after a time (an int, ms since the epoch). See
        :meth:`Consumer.seek <magnetar.client.consumer.Consumer.seek>`."""
        await self._consumer.seek(message_id_or_timestamp)
        target = message_id_or_timestamp
        if isinstance(target, MessageId) and target in (MessageId.earliest, MessageId.latest):
            await self._set_baselines(target, False)
        elif isinstance(target, MessageId):
            # The target's entry is still to read when the target itself is, or when it is
            # a message of a batch (the batch's later messages are).
            inclusive = self._consumer.partitions[0].conf.start_message_id_inclusive
            await self._set_baselines(target, inclusive or target.batch_index() >= 0)
        else:
            self._read_upto = [_NOTHING_READ] * len(self._consumer.partitions)

    def is_connected(self) -> bool:
        return self._consumer.is_connected()

    def has_reached_end_of_topic(self) -> bool:
        """True once the topic was terminated and every message of it was sent to this
        reader (Java's ``Reader.hasReachedEndOfTopic``)."""
        return self._consumer.has_reached_end_of_topic()

    async def close(self) -> None:
        await self._consumer.close()

    async def _close(self, flush: bool) -> None:
        await self._consumer._close(flush)
