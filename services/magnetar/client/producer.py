"""The public producer: builds messages and routes them to partition producers.

On a partitioned topic it looks for new partitions every
``auto_update_partitions_interval_seconds`` (Pulsar's ``autoUpdatePartitions``) and adds
a partition producer for each; routing then spreads messages over all of them (keys
hash over the new count, as in Pulsar)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import random
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from magnetar.common.errors import (
    InvalidArgument,
    MagnetarError,
    MessageTooBig,
    ProducerQueueIsFull,
)
from magnetar.common.keyhash import partition_for_key
from magnetar.common.message_id import MessageId
from magnetar.common.names import TopicName
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.schema import BytesSchema, Schema

from .autoupdate import PartitionsAutoUpdate, check_interval
from .connection import ConnectionPool
from .options import PartitionsRoutingMode, ProducerConfig, Result, check_replication_clusters
from .partition_producer import PartitionProducer

log = logging.getLogger(__name__)

MAX_CHUNKED_MESSAGE_SIZE = 2**31 - 1
"""The largest message a producer with ``chunking_enabled`` sends (``total_chunk_msg_size``
is an int32, as in Pulsar)."""

SendCallback = Callable[[object, MessageId | None], None]


def build_message(
    content: bytes,
    properties: Mapping[str, str] | None,
    partition_key: str | None,
    event_timestamp: int | None,
    deliver_at: int | None,
    deliver_after: timedelta | None,
    max_size: int,
    ordering_key: bytes | str | None = None,
) -> pb.SingleMessage:
    if not isinstance(content, bytes | bytearray | memoryview):
        raise TypeError(f"message content must be bytes, not {type(content).__name__}")
    if type(content) is not bytes:
        content = bytes(content)  # a bytearray or memoryview: a copy the caller cannot change
    if len(content) > max_size:
        raise MessageTooBig(len(content), max_size)
    msg = pb.SingleMessage(payload=content)
    if properties:
        for k, v in properties.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise InvalidArgument(f"message properties must map str to str, got {k!r}: {v!r}")
        msg.properties.update(properties)
    if partition_key is not None:
        msg.partition_key = partition_key
        msg.has_partition_key = True
    if ordering_key:
        msg.ordering_key = _ordering_key(ordering_key)
    if event_timestamp:
        msg.event_time_ms = int(event_timestamp)
    if deliver_after is not None:
        # Rounded up: whole milliseconds, never before the delay has passed.
        msg.deliver_at_ms = math.ceil(time.time() * 1000 + deliver_after.total_seconds() * 1000)
    elif deliver_at is not None:
        msg.deliver_at_ms = int(deliver_at)
    return msg


def encode_value(schema: Schema, value: object) -> bytes:
    """``value`` encoded with the producer's schema, before anything is queued.

    Raises:
        TypeError, ValueError: the schema's own, as pulsar-client's (a value of another
            type, a record field out of range).
        InvalidArgument: any other failure of the schema's encoder.
    """
    try:
        return schema.encode(value)
    except (TypeError, ValueError):
        raise
    except Exception as exc:
        raise InvalidArgument(f"{schema} cannot encode {type(value).__name__} {value!r:.200}: {exc}") from exc


def _ordering_key(key: bytes | str) -> bytes:
    """Raises: TypeError: neither bytes nor str (a str is taken as its UTF-8 bytes, as
    pulsar-client takes one)."""
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, bytes | bytearray | memoryview):
        return bytes(key)
    raise TypeError(f"ordering_key must be bytes or str, not {type(key).__name__}")


class Producer:
    """Sends messages to one topic; on a partitioned topic, to one of its partitions."""

    def __init__(
        self, topic: str, conf: ProducerConfig, producers: list[PartitionProducer], pool: ConnectionPool | None = None,
    ) -> None:
        """Args: pool: given for a partitioned topic with ``auto_update_partitions``: new
        partitions are looked for (and this owns the task that looks)."""
        self._topic = topic
        self._conf = conf
        self._producers = producers
        self._rr = itertools.count(random.randrange(1 << 16))
        self._single = random.randrange(len(producers))
        self._pool = pool
        self._closed = False
        # None: bytes as given (BytesSchema); else the schema's encode.
        self._encode = None if isinstance(conf.schema, BytesSchema) else conf.schema
        self._auto_update: PartitionsAutoUpdate | None = None
        if pool is not None and conf.auto_update_partitions:
            self._auto_update = PartitionsAutoUpdate(
                f"producer on {topic}", conf.auto_update_partitions_interval_seconds, self._add_partitions
            )
            self._auto_update.start()

    @classmethod
    async def create(cls, pool: ConnectionPool, topic: str, conf: ProducerConfig) -> Producer:
        name = str(TopicName.parse(topic))
        if conf.auto_update_partitions:
            check_interval(conf.auto_update_partitions_interval_seconds)
        partitions = await pool.partitions(name, auto_create=True)
        if partitions == 0:
            first = PartitionProducer(pool, name, -1, conf)
            await first.start()
            return cls(name, conf, [first])
        base = TopicName.parse(name)
        producers = [PartitionProducer(pool, str(base.partition(i)), i, conf) for i in range(partitions)]
        try:
            # Partition 0 first: its (possibly broker-given) name is used on every partition.
            await producers[0].start()
            for p in producers[1:]:
                p.name = producers[0].name
            await asyncio.gather(*(p.start() for p in producers[1:]))
        except BaseException:
            await asyncio.gather(*(p.close() for p in producers), return_exceptions=True)
            raise
        return cls(name, conf, producers, pool)

    async def _add_partitions(self) -> None:
        """Open a partition producer on each partition the topic has beyond ours (under
        partition 0's name); they take messages once all are open."""
        assert self._pool is not None
        count = await self._pool.partitions(self._topic)
        have = len(self._producers)
        if count <= have or self._closed:
            return
        base = TopicName.parse(self._topic)
        added = [PartitionProducer(self._pool, str(base.partition(i)), i, self._conf) for i in range(have, count)]
        for p in added:
            p.name = self._producers[0].name
        try:
            await asyncio.gather(*(p.start() for p in added))
        except BaseException:
            await asyncio.gather(*(p.close() for p in added), return_exceptions=True)
            raise
        if self._closed:  # closed while they opened
            await asyncio.gather(*(p.close() for p in added), return_exceptions=True)
            return
        self._producers.extend(added)
        log.info("producer on %s: %d partitions now (was %d)", self._topic, count, have)

    # -- Pulsar's accessors -----------------------------------------------------
    def topic(self) -> str:
        return self._topic

    def producer_name(self) -> str:
        return self._producers[0].name

    def last_sequence_id(self) -> int:
        return max(p.last_sequence_id for p in self._producers)

    def is_connected(self) -> bool:
        return all(p.connected for p in self._producers)

    @property
    def partitions(self) -> list[PartitionProducer]:
        return self._producers

    # -- sending -----------------------------------------------------------------
    def _choose(self, msg: pb.SingleMessage) -> PartitionProducer:
        n = len(self._producers)
        if n == 1:
            return self._producers[0]
        if msg.has_partition_key:
            return self._producers[partition_for_key(msg.partition_key, n)]
        if self._conf.message_routing_mode is PartitionsRoutingMode.UseSinglePartition:
            return self._producers[self._single]
        if self._conf.batching_enabled:
            # As Pulsar: one partition per batching window, so batches stay full.
            window = int(time.monotonic() * 1000) // max(1, self._conf.batching_max_publish_delay_ms)
            return self._producers[(window + self._single) % n]
        return self._producers[next(self._rr) % n]

    def _route(
        self,
        content: Any,
        properties: Mapping[str, str] | None,
        partition_key: str | None,
        event_timestamp: int | None,
        deliver_at: int | None,
        deliver_after: timedelta | None,
        ordering_key: bytes | str | None = None,
    ) -> tuple[PartitionProducer, pb.SingleMessage, bool]:
        if self._encode is not None:
            content = encode_value(self._encode, content)
        # With chunking, a message over max_message_size goes as chunks of that size.
        max_size = MAX_CHUNKED_MESSAGE_SIZE if self._conf.chunking_enabled else self._conf.max_message_size
        msg = build_message(
            content, properties, partition_key, event_timestamp, deliver_at, deliver_after, max_size, ordering_key,
        )
        delayed = deliver_at is not None or deliver_after is not None
        return self._choose(msg), msg, delayed

    async def send(
        self,
        content: Any,
        properties: Mapping[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: bytes | str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: timedelta | None = None,
    ) -> MessageId:
        """Send one message and wait until the broker stored it.

        ``content``: bytes with ``BytesSchema`` (the default), else a value the producer's
        ``schema`` encodes (a str for ``StringSchema``, a ``Record`` for JSON and Avro, ...);
        :func:`encode_value` says what a value it cannot encode raises.

        ``ordering_key``: Pulsar's ordering key (bytes; a str is taken as its UTF-8
        bytes, as pulsar-client takes one): a Key_Shared subscription routes by it
        before the partition key, and every door hands it out
        (:meth:`Message.ordering_key <magnetar.client.message.Message.ordering_key>`).

        Raises:
            MessageTooBig: the content is larger than the maximum message size.
            ProducerQueueIsFull: ``max_pending_messages`` sends are pending and
                ``block_if_queue_full`` is off (with it, this waits for room).
            Timeout: not confirmed within ``send_timeout_millis``.
            InvalidArgument: ``replication_clusters`` given (there is no geo-replication;
                nothing is sent).
        """
        check_replication_clusters(replication_clusters)
        fut = await self.enqueue(
            content, None, properties, partition_key, sequence_id, event_timestamp, deliver_at, deliver_after,
            ordering_key,
        )
        return await fut

    def send_async(
        self,
        content: Any,
        callback: SendCallback | None,
        properties: Mapping[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: bytes | str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: timedelta | None = None,
    ) -> asyncio.Future[MessageId]:
        """Queue one message without waiting; bad input raises at once.

        ``callback(Result.Ok, msg_id)`` or ``callback(error, None)`` runs on the event
        loop once the outcome is known, and the returned future completes with the id
        or fails with the error.

        A full queue (``max_pending_messages`` sends pending) does not raise, as in
        Pulsar: nothing is sent, ``callback(ProducerQueueIsFull, None)`` runs on the
        event loop (the error ``== Result.ProducerQueueIsFull``) and the returned future
        fails with :class:`~magnetar.ProducerQueueIsFull`. This method never waits, so
        that holds even with ``block_if_queue_full`` (which :meth:`send` and the sync
        client honour by waiting for room).

        Raises:
            MessageTooBig, InvalidArgument, TypeError: bad input, or ``replication_clusters``
                given (nothing is sent).
            ServiceClosed: the producer is closed (or the error that failed it).
        """
        check_replication_clusters(replication_clusters)
        target, msg, delayed = self._route(
            content, properties, partition_key, event_timestamp, deliver_at, deliver_after, ordering_key
        )
        return self._submit(target, msg, delayed, sequence_id, callback)

    async def enqueue(
        self,
        content: Any,
        callback: SendCallback | None = None,
        properties: Mapping[str, str] | None = None,
        partition_key: str | None = None,
        sequence_id: int | None = None,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: timedelta | None = None,
        ordering_key: bytes | str | None = None,
    ) -> asyncio.Future[MessageId]:
        """Like :meth:`send_async`, but first waits for room when ``block_if_queue_full``."""
        target, msg, delayed = self._route(
            content, properties, partition_key, event_timestamp, deliver_at, deliver_after, ordering_key
        )
        if self._conf.block_if_queue_full and target.queue_full():  # no coroutine per message
            await target.wait_for_room()
        return self._submit(target, msg, delayed, sequence_id, callback)

    @staticmethod
    def _submit(
        target: PartitionProducer,
        msg: pb.SingleMessage,
        delayed: bool,
        sequence_id: int | None,
        callback: SendCallback | None,
    ) -> asyncio.Future[MessageId]:
        try:
            fut = target.send_message(msg, sequence_id=sequence_id, alone=delayed)
        except ProducerQueueIsFull as exc:
            # Pulsar's sendAsync reports a full queue as the send's outcome, not by raising.
            fut = asyncio.get_running_loop().create_future()
            fut.set_exception(exc)
        if callback is not None:
            fut.add_done_callback(lambda f: _run_callback(callback, f))
        return fut

    async def flush(self) -> None:
        """Send every gathered batch and wait for every pending send's outcome."""
        await asyncio.gather(*(p.flush() for p in self._producers))

    async def close(self) -> None:
        """Send what is pending, then close (see :meth:`PartitionProducer.close`)."""
        await self._close(flush=True)

    async def _close(self, flush: bool) -> None:
        self._closed = True
        if self._auto_update is not None:
            await self._auto_update.close()
        await asyncio.gather(*(p.close(flush) for p in self._producers))


def _run_callback(callback: SendCallback, fut: asyncio.Future[MessageId]) -> None:
    if fut.cancelled():
        res: object = MagnetarError("send cancelled")
        mid = None
    elif fut.exception() is not None:
        res, mid = fut.exception(), None
    else:
        res, mid = Result.Ok, fut.result()
    try:
        callback(res, mid)
    except Exception:
        log.exception("send_async callback failed")
