"""A durable subscription: its cursor, its consumers and its dispatcher."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from magnetar.broker.consumer import BrokerConsumer
from magnetar.broker.dispatch.single_active import SingleActiveConsumerDispatcher
from magnetar.common.errors import ConsumerBusy, InvalidArgument, MagnetarError
from magnetar.proto.v1 import broker_pb2 as pb

if TYPE_CHECKING:
    from magnetar.broker.topic import PersistentTopic

log = logging.getLogger(__name__)

_TYPE_NAMES: dict[int, str] = {pb.EXCLUSIVE: "Exclusive", pb.SHARED: "Shared", pb.FAILOVER: "Failover", pb.KEY_SHARED: "Key_Shared"}
SUPPORTED_TYPES = {pb.EXCLUSIVE}


class Subscription:
    def __init__(self, topic: PersistentTopic, name: str, sub_type: int, cursor: Any) -> None:
        self.topic = topic
        self.name = name
        self.sub_type = sub_type
        self.cursor = cursor
        self.consumers: list[BrokerConsumer] = []
        self.dispatcher = SingleActiveConsumerDispatcher(self)
        self._flushing: asyncio.Task[None] | None = None

    def add_consumer(self, consumer: BrokerConsumer, sub_type: int) -> None:
        """Attach a consumer.

        Raises:
            ConsumerBusy: Exclusive and a consumer is attached, or another type is in use.
            InvalidArgument: a subscription type not supported yet.
        """
        if sub_type not in SUPPORTED_TYPES:
            raise InvalidArgument(f"subscription type {_TYPE_NAMES.get(sub_type, sub_type)} is not supported yet")
        if self.consumers and sub_type != self.sub_type:
            raise ConsumerBusy(
                f"subscription {self.name!r} on {self.topic.name} is {_TYPE_NAMES[self.sub_type]}, "
                f"cannot attach a {_TYPE_NAMES[sub_type]} consumer"
            )
        if self.consumers and sub_type == pb.EXCLUSIVE:
            raise ConsumerBusy(f"exclusive subscription {self.name!r} on {self.topic.name} already has a consumer")
        self.sub_type = sub_type
        self.consumers.append(consumer)
        self.dispatcher.consumers_changed()

    def remove_consumer(self, consumer: BrokerConsumer) -> None:
        consumer.closed = True
        if consumer in self.consumers:
            self.consumers.remove(consumer)
            self.dispatcher.consumers_changed()
        if not self.consumers and (self._flushing is None or self._flushing.done()):
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

    def ack(self, consumer: BrokerConsumer, positions: Iterable[Any], cumulative: bool) -> None:
        positions = list(positions)
        if not positions:
            return
        if cumulative:
            last = max(positions)
            self.cursor.ack_cumulative(last)
            for p in [p for p in consumer.unacked if p <= last]:
                del consumer.unacked[p]
        else:
            self.cursor.ack(positions)
            for p in positions:
                consumer.unacked.pop(p, None)

    def redeliver_unacknowledged(self, consumer: BrokerConsumer) -> None:
        consumer.unacked.clear()
        self.dispatcher.rewind()

    def notify_new_entries(self) -> None:
        self.dispatcher.wake()

    def unacked_count(self) -> int:
        return sum(sum(c.unacked.values()) for c in self.consumers)

    async def close(self) -> None:
        if self._flushing is not None:
            await asyncio.gather(self._flushing, return_exceptions=True)
        await self.dispatcher.close()
        await self.cursor.close()
