"""A subscription: its cursor, its consumers and its dispatcher (see docs/subscriptions.md).

Acks, negative acks and redeliveries arrive here from the consumers; what a consumer
failed (nack, ack timeout, redeliver-all) is counted as a redelivery in the cursor and
sent again by the dispatcher once the count is stored; what a departing consumer held
is sent again flagged, its count unchanged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from magnetar.broker.consumer import BrokerConsumer
from magnetar.broker.deadletter import MovePublisher, SubscriptionMoves
from magnetar.broker.dispatch.base import Dispatcher, EntrySource
from magnetar.broker.dispatch.key_shared import KeySharedDispatcher, check_joining
from magnetar.broker.dispatch.shared import SharedDispatcher
from magnetar.broker.dispatch.single_active import SingleActiveConsumerDispatcher
from magnetar.broker.entry import check_batch_size
from magnetar.broker.rates import Meter
from magnetar.broker.stats import ConsumerStats, SubscriptionStats
from magnetar.broker.subscription_type import SubscriptionType
from magnetar.common import masks
from magnetar.common.errors import ConsumerBusy, InvalidArgument, MagnetarError, ServiceClosed
from magnetar.common.tasks import BackgroundTasks
from magnetar.managedledger.position import Position
from magnetar.managedledger.stats import estimated_size

if TYPE_CHECKING:
    from magnetar.broker.compaction.reader import CompactedEntries
    from magnetar.broker.config import BrokerConfig
    from magnetar.broker.deadletter import DeadLetterPolicy
    from magnetar.broker.entry import Entry
    from magnetar.broker.ratelimit import RateLimiter

log = logging.getLogger(__name__)

TYPE_NAMES: dict[SubscriptionType, str] = {t: t.name for t in SubscriptionType}
TYPES_BY_NAME = {name: t for t, name in TYPE_NAMES.items()}
TYPE_PROPERTY = "__subscription_type"
"""The cursor property that keeps the subscription's type, so a broker that loads the
subscription after a failover shows (and dispatches as) the type its consumers use."""
PROPERTIES_PROPERTY = "__subscription_properties"
"""The cursor property that keeps the subscription's properties (Pulsar's
subscriptionProperties, stored with the cursor as Pulsar stores them), a JSON object of
strings: they survive restarts and hand-overs with the cursor."""


def check_subscription_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """Subscription properties as a dict, checked.

    Raises:
        InvalidArgument: a key that is not a non-empty string, or a value not a string.
    """
    for k, v in properties.items():
        if not isinstance(k, str) or not k or not isinstance(v, str):
            raise InvalidArgument(f"subscription properties map non-empty strings to strings, not {k!r}: {v!r}")
    return dict(properties)


def check_consumer_type(name: str, topic: str, current: SubscriptionType, attached: bool, wanted: SubscriptionType) -> None:
    """Whether a consumer of type ``wanted`` may join subscription ``name`` (of type
    ``current``, with consumers ``attached`` or not), persistent or not.

    Raises: ConsumerBusy: another type is in use, or Exclusive and a consumer is attached.
    """
    if attached and wanted != current:
        raise ConsumerBusy(
            f"subscription {name!r} on {topic} is {TYPE_NAMES[current]}, cannot attach a {TYPE_NAMES[wanted]} consumer")
    if attached and wanted == SubscriptionType.Exclusive:
        raise ConsumerBusy(f"exclusive subscription {name!r} on {topic} already has a consumer")


_DISPATCHERS: dict[SubscriptionType, Callable[[Subscription], Dispatcher]] = {
    SubscriptionType.Exclusive: SingleActiveConsumerDispatcher,
    SubscriptionType.Failover: SingleActiveConsumerDispatcher,
    SubscriptionType.Shared: SharedDispatcher,
    SubscriptionType.Key_Shared: KeySharedDispatcher,
}


class SubscriptionTopic(Protocol):
    """What a subscription and its moves use of their topic (``PersistentTopic`` is one;
    a test can hand any other)."""

    @property
    def name(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def ml(self) -> EntrySource:
        """The managed ledger: the entries the dispatcher and the moves read."""

    @property
    def compacted(self) -> CompactedEntries | None:
        """What ``read_compacted`` consumers read (None: the topic cannot be compacted)."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def mover(self) -> MovePublisher | None:
        """Publishes retry and dead-letter copies (None: this broker cannot)."""

    @property
    def delayed_delivery_enabled(self) -> bool:
        """False: delayed messages go out at once (the namespace's delayedDelivery policy)."""

    @property
    def dispatch_limiter(self) -> RateLimiter | None:
        """The namespace's dispatchRate, shared by the topic's subscriptions (None: no limit)."""

    @property
    def terminated_position(self) -> Position | None:
        """The last entry of a terminated topic (None: not terminated)."""

    def count_out(self, messages: int, size: int = 0) -> None:
        """``messages`` (in entries of ``size`` bytes) went out to consumers."""

    def consumer_limit_reached(self) -> bool:
        """The topic has as many consumers as its maxConsumers (its namespace's
        maxConsumersPerTopic) allows: one more is refused."""


class Subscription:
    # One per loaded topic (thousands per broker): attributes in slots; the __dict__ is made
    # only when something else is set on an instance (tests replace methods).
    __slots__ = (
        "topic", "name", "sub_type", "cursor", "durable", "consumers", "dispatcher", "_on_empty",
        "dead_letter", "moves", "_flushing", "meter_out", "_retired", "closed", "reads_compacted",
        "__dict__",
    )

    def __init__(
        self, topic: SubscriptionTopic, name: str, sub_type: SubscriptionType, cursor: Any, durable: bool = True,
        on_empty: Callable[[Subscription], None] | None = None,
    ) -> None:
        """Args:
            on_empty: called when the last consumer of a non-durable subscription left.
        """
        self.topic = topic
        self.name = name
        self.sub_type = SubscriptionType(sub_type)
        self.cursor = cursor
        self.durable = durable
        self.consumers: list[BrokerConsumer] = []
        self.dispatcher: Dispatcher = _DISPATCHERS[self.sub_type](self)
        self._on_empty = on_empty
        self.dead_letter: DeadLetterPolicy | None = None
        """The retry/dead-letter policy of the consumer that attached last with one."""
        self.moves = SubscriptionMoves(self)
        self._flushing: asyncio.Task[None] | None = None
        self.meter_out = Meter()
        """The messages and bytes delivered to its consumers (stats)."""
        self._retired = BackgroundTasks(f"subscription {name} on {topic.name}")
        self.closed = False
        """Set when its topic starts closing: no consumer attaches any more."""
        self.reads_compacted: CompactedEntries | None = None
        """The compacted view its dispatcher reads, when the consumer that started it
        asked for ``read_compacted`` (None: the topic's entries)."""

    # -- what its dispatcher sees (dispatch.base.DispatchContext) -----------------------
    @property
    def topic_name(self) -> str:
        return self.topic.name

    @property
    def partition(self) -> int:
        return self.topic.partition

    @property
    def entries(self) -> EntrySource:
        return self.reads_compacted or self.topic.ml

    @property
    def settings(self) -> BrokerConfig:
        return self.topic.config

    @property
    def delayed_delivery(self) -> bool:
        return self.topic.delayed_delivery_enabled

    @property
    def dispatch_limiter(self) -> RateLimiter | None:
        return self.topic.dispatch_limiter

    @property
    def terminated_position(self) -> Position | None:
        return self.topic.terminated_position

    def count_out(self, messages: int, size: int = 0) -> None:
        self.meter_out.add(messages, size)
        self.topic.count_out(messages, size)
        limiter = self.topic.dispatch_limiter
        if limiter is not None:
            limiter.consume(messages, size)

    def divert(self, position: Position, batch: Entry, n: int, mask: int) -> bool:
        return self.moves.divert(position, batch, n, mask)

    # -- consumers --------------------------------------------------------------------
    def add_consumer(self, consumer: BrokerConsumer, sub_type: SubscriptionType) -> None:
        """Attach a consumer.

        Raises:
            ConsumerBusy: Exclusive and a consumer is attached, or another type is in use
                (or, on Key_Shared, another mode).
            ConsumerAssignError: a Key_Shared STICKY consumer whose hash ranges overlap
                another consumer's.
            InvalidArgument: an unknown subscription type.
            ServiceClosed: the topic is closing (the client subscribes again).
        """
        if self.closed:
            # The topic closed while the consumer subscribed (the Consume door awaits
            # between the subscribe and the attach): it ended the streams it knew of.
            raise ServiceClosed(f"topic {self.topic.name} is closing")
        if sub_type not in _DISPATCHERS:
            raise InvalidArgument(f"unknown subscription type {sub_type}")
        sub_type = SubscriptionType(sub_type)
        check_consumer_type(self.name, self.topic.name, self.sub_type, bool(self.consumers), sub_type)
        if self.topic.consumer_limit_reached():
            raise ConsumerBusy("Topic reached max consumers limit")  # Pulsar's reason
        if sub_type == SubscriptionType.Key_Shared:
            check_joining(self.consumers, consumer)
        if consumer.read_compacted:
            check_read_compacted(sub_type, self.topic)
        if not self.consumers:
            # A fresh start: a new dispatcher of the requested type reads again from the
            # first unacknowledged entry (nobody holds anything now).
            old = self.dispatcher
            old.stop()
            self.sub_type = sub_type
            self.cursor.set_property(TYPE_PROPERTY, TYPE_NAMES[sub_type])
            self.dispatcher = _DISPATCHERS[sub_type](self)
            self.reads_compacted = self.topic.compacted if consumer.read_compacted else None
            if self.reads_compacted is not None:
                self.dispatcher.compacted_out = self.reads_compacted.compacted_out
            self._retired.spawn(old.close(), name=f"retire-dispatcher:{self.name}")
            self.cursor.rewind()
        self.consumers.append(consumer)
        if consumer.dead_letter is not None:
            self.dead_letter = consumer.dead_letter
        self.dispatcher.consumers_changed()
        self.dispatcher.start()

    def remove_consumer(self, consumer: BrokerConsumer) -> None:
        consumer.closed = True
        if consumer not in self.consumers:
            return
        self.consumers.remove(consumer)
        self.send_back(consumer, None, failed=False)
        self.dispatcher.consumers_changed()
        if not self.consumers:
            if not self.durable and self._on_empty is not None:
                self._on_empty(self)
            elif self._flushing is None or self._flushing.done():
                # The last consumer left: store its acks now rather than at the next interval.
                self._flushing = asyncio.get_running_loop().create_task(self._flush_cursor())

    async def _flush_cursor(self) -> None:
        try:
            await self.cursor.flush()
        except MagnetarError as exc:
            log.warning("subscription %s on %s: cursor flush failed: %s", self.name, self.topic.name, exc.message)

    def flow(self, consumer: BrokerConsumer, permits: int) -> None:
        consumer.permits += permits
        self.dispatcher.wake()

    # -- acks ---------------------------------------------------------------------------
    def ack(self, consumer: BrokerConsumer, positions: Iterable[Position], cumulative: bool) -> None:
        """Acknowledge whole entries (in Key_Shared: the messages of them the consumer holds).

        Raises:
            InvalidArgument: cumulative on Shared/Key_Shared, or a position that is not an
                entry (nothing changed).
        """
        positions = list(positions)
        if not positions:
            return
        if cumulative:
            if self.sub_type in (SubscriptionType.Shared, SubscriptionType.Key_Shared):
                raise InvalidArgument(f"cumulative acknowledgement is not allowed on {TYPE_NAMES[self.sub_type]} subscriptions")
            last = max(positions)
            self.cursor.ack_cumulative(last)
            self._release_through(last, acknowledged=True)
        elif self.sub_type == SubscriptionType.Key_Shared:
            for p in positions:
                held = consumer.pending.get(p)
                size = self.dispatcher.entry_size(p) if held else 0
                if held and size:
                    self.cursor.ack_batch(p, size, held)
                    self.dispatcher.released(consumer, p, consumer.acknowledged(p))
        else:
            self.cursor.ack(positions)
            for p in positions:
                released = consumer.acknowledged(p)
                if released:
                    self.dispatcher.released(consumer, p, released)
        self.dispatcher.wake()

    def ack_batch(self, consumer: BrokerConsumer, acks: Iterable[tuple[Position, int, int]]) -> None:
        """Acknowledge single messages of entries: ``(position, batch size, mask)``.

        A batch size is checked against what an entry can hold before anything is acked:
        the masks are as wide as the sizes, so a size near 2^32 would build (and store in
        the cursor) integers of 512 MB.

        Raises:
            InvalidArgument: a size over what an entry can hold (nothing changed); a bad
                position, size or mask (earlier items stay acked).
        """
        acks = list(acks)
        for position, size, _ in acks:
            check_batch_size(position, size, self.topic.config.max_message_bytes)
        for position, size, mask in acks:
            self.cursor.ack_batch(position, size, mask)
            released = consumer.acknowledged(position, mask)
            if released:
                self.dispatcher.released(consumer, position, released)
        self.dispatcher.wake()

    def _release_through(self, last: Position, *, acknowledged: bool) -> None:
        """Every consumer forgets what it holds up to ``last``; ``acknowledged``: a
        consumer's cumulative ack (counted in each one's ack rate), not an expiry."""
        for c in self.consumers:
            for p in [p for p in c.pending if p <= last]:
                self.dispatcher.released(c, p, c.acknowledged(p) if acknowledged else c.release(p))

    def acknowledge_through(self, last: Position) -> int:
        """Acknowledge every entry up to ``last`` (a stored entry), whoever holds it: message
        expiry and backlog eviction. Returns how many entries that took off the backlog.

        Raises:
            InvalidArgument: ``last`` is not a stored entry (nothing changed).
        """
        before = self.cursor.backlog()
        self.cursor.ack_cumulative(last)
        self._release_through(last, acknowledged=False)
        self.dispatcher.wake()
        return before - self.cursor.backlog()

    # -- redelivery -----------------------------------------------------------------------
    def send_back(self, consumer: BrokerConsumer, positions: Iterable[Position] | None, *, failed: bool = True) -> None:
        """What ``consumer`` holds of ``positions`` (None: everything) is delivered again.

        ``failed``: the consumer failed them (a nack or an ack timeout: positions; a
        redeliver-all request: None), so each counts as a redelivery, toward the dead letter
        policy's ``max_redeliver_count``. Not failed (a departure, a lost Failover
        activation): sent again flagged as possibly seen, the count unchanged, as Pulsar
        does; so a broker or network fault never dead-letters a message.
        """
        if positions is None:
            held = consumer.release_all()
        else:
            held = {}
            for p in positions:
                mask = consumer.release(p)
                if mask:
                    held[p] = mask
        if not held:
            return
        if failed:
            self.cursor.add_redeliveries(held)
            consumer.meter_redeliver.add(sum(masks.count(m) for m in held.values()), 0)
        else:
            self.cursor.add_given_back(held)
        self.dispatcher.add_replay(held)  # first: Key_Shared keeps the entries' keys while live
        for p, mask in held.items():
            self.dispatcher.released(consumer, p, mask)

    def notify_new_entries(self) -> None:
        self.dispatcher.wake()

    # -- moving the cursor ------------------------------------------------------------
    async def reset_cursor(self, position: Position) -> None:
        """Move the subscription to ``position`` (seek / reset-cursor): everything before it
        acknowledged, nothing after; every consumer is told to drop what it has queued."""
        self.dispatcher.reset()
        for c in self.consumers:
            for p, mask in c.release_all().items():
                self.dispatcher.released(c, p, mask)
            c.permits = 0
            c.told_end_of_topic = False  # moved back: it reaches the end again later
            if c.on_reset is not None:
                c.on_reset()
        self.cursor.reset_to(position)
        if self.durable:
            await self.cursor.persist()
        self.dispatcher.wake()

    def skip(self, count: int) -> int:
        """Acknowledge the next ``count`` unacknowledged entries; returns how many."""
        if count < 0:
            raise InvalidArgument(f"cannot skip a negative number of messages ({count})")
        skipped = self.cursor.skip_entries(count)
        self.dispatcher.wake()
        return skipped

    def clear_backlog(self) -> int:
        """Acknowledge everything stored; returns the entries acknowledged."""
        skipped = self.cursor.clear_backlog()
        self.dispatcher.wake()
        return skipped

    def expire_before(self, position: Position) -> int:
        """Acknowledge every entry before ``position`` (messages past their time to live);
        returns the entries acknowledged. What consumers hold of them they ack in vain."""
        expired = self.cursor.ack_before(position)
        self.dispatcher.wake()
        return expired

    # -- stats ---------------------------------------------------------------------------
    def unacked_count(self) -> int:
        return sum(c.unacked for c in self.consumers)

    def meters(self) -> list[Meter]:
        out = [self.meter_out]
        for c in self.consumers:
            out += (c.meter_out, c.meter_ack, c.meter_redeliver)
        return out

    def backlog_size(self) -> int:
        """Estimated bytes of the entries after the mark-delete position."""
        ml = self.cursor.ledger
        return estimated_size(ml.layout, ml.next_position(self.cursor.mark_delete_position), ml.last_confirmed_position)

    def stats(self) -> SubscriptionStats:
        active: BrokerConsumer | None = getattr(self.dispatcher, "active", None)  # Exclusive, Failover
        return SubscriptionStats(
            name=self.name, type=self.sub_type,
            backlog=self.cursor.backlog(), consumers=len(self.consumers), unacked=self.unacked_count(),
            mark_delete_position=str(self.cursor.mark_delete_position), durable=self.durable,
            blocked_consumers=sum(1 for c in self.consumers if c.blocked),
            consumer_stats=[_consumer_stats(c) for c in self.consumers],
            msg_out_counter=self.meter_out.messages, bytes_out_counter=self.meter_out.bytes,
            msg_rate_out=self.meter_out.msg_rate, msg_throughput_out=self.meter_out.byte_rate,
            msg_rate_redeliver=sum(c.meter_redeliver.msg_rate for c in self.consumers),
            message_ack_rate=sum(c.meter_ack.msg_rate for c in self.consumers),
            backlog_size=self.backlog_size(), active_consumer=active.name if active is not None else "",
            dispatch_throttled_time_ms=int(self.dispatcher.throttled_s * 1000),
            dispatch_throttled_msg_events=self.dispatcher.throttled_msg_events,
            dispatch_throttled_bytes_events=self.dispatcher.throttled_byte_events,
            subscription_properties=self.properties,
        )

    @property
    def properties(self) -> dict[str, str]:
        """The subscription's properties (a copy)."""
        return dict(self.cursor.properties.get(PROPERTIES_PROPERTY) or {})

    async def set_properties(self, properties: Mapping[str, str]) -> None:
        """Replace the subscription's properties and store them with the cursor now (a
        reader's, never stored, only in memory).

        Raises:
            InvalidArgument: bad properties (nothing changed).
            MetadataVersionConflict, MetadataError: not stored (the old ones are kept).
        """
        new = check_subscription_properties(properties)
        old = self.cursor.properties.get(PROPERTIES_PROPERTY)
        self.cursor.set_property(PROPERTIES_PROPERTY, new)
        try:
            await self.cursor.persist()
        except BaseException:
            self.cursor.set_property(PROPERTIES_PROPERTY, old)
            raise

    async def close(self) -> None:
        self.closed = True
        if self._flushing is not None:
            await asyncio.gather(self._flushing, return_exceptions=True)
        await self._retired.wait()
        await self.moves.close()
        await self.dispatcher.close()
        await self.cursor.close()


def _consumer_stats(c: BrokerConsumer) -> ConsumerStats:
    return ConsumerStats(
        consumer_name=c.name, available_permits=max(c.permits, 0), unacked_messages=c.unacked, blocked=c.blocked,
        msg_out_counter=c.meter_out.messages, bytes_out_counter=c.meter_out.bytes,
        msg_rate_out=c.meter_out.msg_rate, msg_throughput_out=c.meter_out.byte_rate,
        connected_since_ms=c.connected_since_ms,
        msg_rate_redeliver=c.meter_redeliver.msg_rate, message_ack_rate=c.meter_ack.msg_rate,
    )


def check_read_compacted(sub_type: SubscriptionType, topic: SubscriptionTopic) -> None:
    """Refuse a ``read_compacted`` consumer where Pulsar does: on Shared and Key_Shared
    subscriptions, and on a topic that cannot be compacted.

    Raises:
        InvalidArgument: as said.
    """
    if sub_type not in (SubscriptionType.Exclusive, SubscriptionType.Failover):
        raise InvalidArgument("readCompacted only allowed on failover or exclusive subscriptions")
    if topic.compacted is None:
        raise InvalidArgument(f"topic {topic.name} has no compacted view to read")
