"""A subscription of a non-persistent topic: its consumers and the dispatcher that picks
one per message at publish time. It keeps no cursor: acknowledgements are accepted and
ignored, nothing is redelivered, a seek is refused (as Pulsar's ``NonPersistentSubscription``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from magnetar.broker.consumer import BrokerConsumer, Delivery
from magnetar.broker.dispatch.key_shared import check_joining
from magnetar.broker.nonpersistent.dispatcher import NonPersistentDispatcher
from magnetar.broker.rates import Meter
from magnetar.broker.stats import ConsumerStats, SubscriptionStats
from magnetar.broker.subscription import (
    check_consumer_type,
    check_read_compacted,
    check_subscription_properties,
)
from magnetar.broker.subscription_type import SubscriptionType
from magnetar.common.errors import ConsumerBusy, InvalidArgument, NotAllowedError, ServiceClosed
from magnetar.managedledger.position import Position


class SubscribedTopic(Protocol):
    """What a subscription needs of its topic (``NonPersistentTopic``)."""

    name: str
    partition: int

    def count_out(self, messages: int, size: int = 0) -> None: ...

    def consumer_limit_reached(self) -> bool: ...

NON_PERSISTENT_POSITION = Position(0, 0)
"""The message id of every message of a non-persistent topic (Pulsar's broker answers
a send with ledger 0, entry 0 and dispatches each message as entry 0:0)."""


def seek_refused() -> NotAllowedError:
    return NotAllowedError("Seek command on non-persistent topic is not allowed")


class NoCursor:
    """What the doors read of a subscription's cursor: nothing is kept."""

    mark_delete_position = (-1, -1)


class NoMoves:
    """Retry and dead-letter moves: none (nothing is kept to move)."""

    async def reconsume_later(self, consumer: Any, message_id: Any, delay_ms: int) -> None:
        raise NotAllowedError("reconsumeLater is not supported on a non-persistent topic (nothing is stored to move)")


class NonPersistentSubscription:
    def __init__(
        self, topic: SubscribedTopic, name: str, sub_type: SubscriptionType, durable: bool = True,
        on_empty: Callable[[NonPersistentSubscription], None] | None = None,
    ) -> None:
        """Args: on_empty: called when the last consumer of a non-durable subscription left."""
        self.topic = topic
        self.name = name
        self.sub_type = SubscriptionType(sub_type)
        self.durable = durable
        self.consumers: list[BrokerConsumer] = []
        self.dispatcher = NonPersistentDispatcher(self.sub_type, topic.partition)
        self.cursor = NoCursor()
        self.moves = NoMoves()
        self.meter_out = Meter()
        self.meter_drop = Meter()
        """Messages dropped: no consumer with permits when they were published."""
        self.closed = False
        self.properties: dict[str, str] = {}
        """The subscription's properties (in memory: nothing of a non-persistent topic is stored)."""
        self._on_empty = on_empty
        self._told: dict[int, bool] = {}

    # -- consumers ------------------------------------------------------------------
    def add_consumer(self, consumer: BrokerConsumer, sub_type: SubscriptionType) -> None:
        """Attach a consumer (the same checks as a persistent subscription's).

        Raises:
            ConsumerBusy, ConsumerAssignError, InvalidArgument, ServiceClosed.
        """
        if self.closed:
            raise ServiceClosed(f"topic {self.topic.name} is closing")
        try:
            sub_type = SubscriptionType(sub_type)
        except ValueError:
            raise InvalidArgument(f"unknown subscription type {sub_type}") from None
        check_consumer_type(self.name, self.topic.name, self.sub_type, bool(self.consumers), sub_type)
        if self.topic.consumer_limit_reached():
            raise ConsumerBusy("Topic reached max consumers limit")  # Pulsar's reason
        if sub_type == SubscriptionType.Key_Shared:
            check_joining(self.consumers, consumer)
        if consumer.read_compacted:  # refused: nothing is kept to compact (compacted is None)
            check_read_compacted(sub_type, self.topic)  # type: ignore[arg-type]
        if not self.consumers and sub_type != self.sub_type:
            self.sub_type = sub_type
            self.dispatcher = NonPersistentDispatcher(sub_type, self.topic.partition)
        self.consumers.append(consumer)
        self._changed()

    def remove_consumer(self, consumer: BrokerConsumer) -> None:
        consumer.closed = True
        if consumer not in self.consumers:
            return
        self.consumers.remove(consumer)
        self._changed()
        if not self.consumers and not self.durable and self._on_empty is not None:
            self._on_empty(self)

    def _changed(self) -> None:
        self.dispatcher.consumers_changed(self.consumers)
        if self.sub_type not in (SubscriptionType.Exclusive, SubscriptionType.Failover):
            return
        active = self.dispatcher.active  # each consumer told when it becomes, or stops being, the active one
        now = {c.consumer_id: c is active for c in self.consumers}
        for c in self.consumers:
            if c.on_active is not None and self._told.get(c.consumer_id) != now[c.consumer_id]:
                c.on_active(now[c.consumer_id])
        self._told = now

    def flow(self, consumer: BrokerConsumer, permits: int) -> None:
        consumer.permits += permits

    # -- dispatch (called by the topic on every publish) --------------------------------
    def dispatch(self, data: bytes, messages: int, key: str | bytes) -> bool:
        """Send one published entry of ``messages`` messages to the consumer chosen now;
        returns False when it was dropped (no consumer with permits)."""
        consumer = self.dispatcher.choose(key)
        if consumer is None:
            self.meter_drop.add(messages, len(data))
            return False
        consumer.permits -= messages
        consumer.meter_out.add(messages, len(data))
        self.meter_out.add(messages, len(data))
        self.topic.count_out(messages, len(data))
        consumer.sink([Delivery(NON_PERSISTENT_POSITION, data, 0, messages=messages)])
        return True

    # -- acks: accepted and ignored (nothing is kept) --------------------------------------
    def ack(self, consumer: BrokerConsumer, positions: Iterable[Position], cumulative: bool) -> None:
        pass

    def ack_batch(self, consumer: BrokerConsumer, acks: Iterable[tuple[Position, int, int]]) -> None:
        pass

    def send_back(self, consumer: BrokerConsumer, positions: Iterable[Position] | None) -> None:
        """A negative ack or redelivery request: nothing is kept, nothing comes again."""

    async def reset_cursor(self, position: Position) -> None:
        raise seek_refused()

    # -- stats ----------------------------------------------------------------------------
    def meters(self) -> list[Meter]:
        return [self.meter_out, self.meter_drop, *(c.meter_out for c in self.consumers)]

    def stats(self) -> SubscriptionStats:
        active = self.dispatcher.active
        return SubscriptionStats(
            name=self.name, type=self.sub_type, backlog=0, consumers=len(self.consumers), unacked=0,
            mark_delete_position="", durable=self.durable, blocked_consumers=0,
            consumer_stats=[_consumer_stats(c) for c in self.consumers],
            msg_out_counter=self.meter_out.messages, bytes_out_counter=self.meter_out.bytes,
            msg_rate_out=self.meter_out.msg_rate, msg_throughput_out=self.meter_out.byte_rate,
            backlog_size=0, active_consumer=active.name if active is not None else "",
            dispatch_throttled_time_ms=0, dispatch_throttled_msg_events=0, dispatch_throttled_bytes_events=0,
            msg_drop_counter=self.meter_drop.messages, msg_drop_rate=self.meter_drop.msg_rate,
            subscription_properties=dict(self.properties),
        )

    async def set_properties(self, properties: Mapping[str, str]) -> None:
        """Replace the subscription's properties. Raises: InvalidArgument (nothing changed)."""
        self.properties = check_subscription_properties(properties)

    def close(self, reason: Any) -> None:
        """End every consumer's stream with ``reason``."""
        self.closed = True
        for c in list(self.consumers):
            if c.on_close is not None:
                c.on_close(reason)


def _consumer_stats(c: BrokerConsumer) -> ConsumerStats:
    return ConsumerStats(
        c.name, c.permits, 0, False, c.meter_out.messages, c.meter_out.bytes, c.meter_out.msg_rate,
        c.meter_out.byte_rate, c.connected_since_ms,
    )
