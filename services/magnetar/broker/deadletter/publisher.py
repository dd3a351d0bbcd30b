"""The broker core's :class:`~.moves.MovePublisher`: stores retry and dead-letter copies
(:mod:`.copies`) on the target topic directly when this broker serves it, and hands the
move to a remote publisher (a network adapter, given by whoever builds the broker) when
another broker does.

A copy is stored as the SDK would send it: one unbatched entry, under the producer name
``Move.producer_name`` and the copy's sequence id, so the target's deduplication drops a
repeated move (a crash between publishing the copy and acknowledging the original). The
copy of a chunk is published as a chunk (``chunk=``): deduplicated by the last one.

Before the first copy goes to a topic, the subscription that must keep it is created
(from the earliest message; an existing one is left as is): on a retry topic the
consumer's own subscription, on a dead letter topic the policy's initial subscription.
So retention never drops a copy nobody has read yet.

A missing target is created as a producer would create it: a plain topic, or, where its
namespace's autoTopicCreation says partitioned, a partitioned topic (then the remote
publisher routes the copy to a partition).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from magnetar.broker.entry import Message, encode_entry
from magnetar.common.errors import (
    AlreadyExists,
    InvalidTopicName,
    NotOwner,
    ServiceClosed,
    TopicNotFound,
)
from magnetar.common.names import check_subscription_name

if TYPE_CHECKING:
    from magnetar.broker.deadletter.copies import Move
    from magnetar.broker.deadletter.moves import MovePublisher
    from magnetar.broker.topic import PersistentTopic

log = logging.getLogger(__name__)

_ATTEMPTS = 2
"""Tries on a topic closing under the move (unloaded): the second opens it again or
finds its new owner."""


class MoveTargets(Protocol):
    """What the publisher needs of the broker service."""

    async def get_topic(self, topic: str, create: bool = True, explicit: bool = False) -> PersistentTopic: ...

    async def partitions(self, topic: str) -> int: ...

    async def client_partitions(self, topic: str) -> int: ...


def move_entry(move: Move, publish_time_ms: int) -> bytes:
    """The entry the SDK sends for ``move``'s copy: one unbatched message with the copy's
    payload, properties, key, ordering key (kept, as Pulsar's dead-letter and retry
    producers keep it), event time and delivery time, and its sequence id.

    The copy carries no schema version: a version names a schema of the topic it was
    given on, and the move registers none on the target. The copy of a chunk carries the
    chunk fields the move gave it (``Move.chunk``)."""
    src = move.message
    msg = Message(
        payload=src.payload, properties=src.properties, partition_key=src.partition_key,
        has_partition_key=src.has_partition_key, event_time_ms=src.event_time_ms, sequence_id=move.sequence_id,
        deliver_at_ms=src.deliver_at_ms, ordering_key=src.ordering_key,
    )
    return encode_entry(move.producer_name, move.sequence_id, publish_time_ms, False, [msg], chunk=move.chunk)


def move_chunk(move: Move) -> tuple[int, int] | None:
    """(chunk id, number of chunks) of a chunk's copy, as the publish path takes a chunk
    (its entry may exceed the max message size by the chunk metadata room, and only the
    last chunk is deduplicated); None for a whole message."""
    return (move.chunk.chunk_id, move.chunk.num_chunks_from_msg) if move.chunk is not None else None


class ServiceMovePublisher:
    """Publishes moves through the broker service; ``remote`` takes those for topics
    another broker serves (and for partitioned targets, which it routes to a partition)."""

    def __init__(
        self, targets: MoveTargets, remote: MovePublisher | None = None,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._targets = targets
        self._remote = remote
        self._clock_ms = clock_ms
        self._kept: set[tuple[str, str]] = set()
        self._keeping = asyncio.Lock()
        self._locks: dict[str, asyncio.Lock] = {}

    async def publish(self, move: Move, keep_for: str) -> None:
        """See :meth:`MovePublisher.publish`.

        Raises:
            NotOwner: another broker serves the target and there is no remote publisher.
            MagnetarError: the copy could not be stored (the caller leaves the original
                unacknowledged, so it comes back and the move is tried again).
        """
        # One move of a given message at a time, as one producer of that name would.
        lock = self._locks.setdefault(move.producer_name, asyncio.Lock())
        try:
            async with lock:
                stored = await self._publish_here(move, keep_for)
        finally:
            if not lock.locked() and self._locks.get(move.producer_name) is lock:
                del self._locks[move.producer_name]
        if not stored:
            await self._publish_remote(move, keep_for)

    async def _publish_here(self, move: Move, keep_for: str) -> bool:
        """Store the copy when this broker serves the target; False when it does not (or
        the target is partitioned)."""
        for attempt in range(_ATTEMPTS):
            try:
                topic = await self._targets.get_topic(move.target, create=True)
                await self._keep(topic, keep_for)
                entry = move_entry(move, self._clock_ms())
                await topic.publish(move.producer_name, entry, 1, move.sequence_id, move.sequence_id, chunk=move_chunk(move))
                return True
            except NotOwner:
                return False
            except TopicNotFound:
                # Missing, and its namespace auto-creates partitioned topics (or none):
                # asked as a producer asks (Pulsar's DLQ and retry producers do), it is
                # created partitioned, and the remote publisher routes to a partition.
                if await self._targets.client_partitions(move.target) > 0:
                    return False
                raise
            except InvalidTopicName:
                if await self._targets.partitions(move.target) > 0:
                    return False
                raise
            except ServiceClosed:
                if attempt + 1 == _ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _publish_remote(self, move: Move, keep_for: str) -> None:
        if self._remote is None:
            raise NotOwner(f"topic {move.target} is served by another broker and this one cannot publish there")
        await self._remote.publish(move, keep_for)

    async def _keep(self, topic: PersistentTopic, subscription: str) -> None:
        key = (topic.name, subscription)
        if key in self._kept:
            return
        # One at a time: a burst of moves to a new target asks once, not once per move.
        async with self._keeping:
            if key in self._kept:
                return
            check_subscription_name(subscription)
            if subscription not in topic.subscriptions:
                try:
                    await topic.create_subscription(subscription, "earliest")
                except AlreadyExists:
                    pass
            self._kept.add(key)
        log.info("subscription %s on %s keeps the moved messages", subscription, topic.name)

    async def close(self) -> None:
        if self._remote is not None:
            await self._remote.close()
