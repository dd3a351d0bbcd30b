"""One active consumer gets everything (Exclusive; Failover).

Failover: consumers of the best (lowest) priority level are eligible, sorted by name.
On a non-partitioned topic the first is active; on partition i of a partitioned topic
eligible consumer ``i % n`` is, so partitions spread over consumers. When the active
consumer changes, what the old one held goes back (a redelivery) and the new one gets it
first, then everything after, in order. Each consumer with an ``on_active`` is told
whether it is the active one when it attaches and whenever that changes.
"""

from __future__ import annotations

from magnetar.broker.consumer import BrokerConsumer
from magnetar.broker.dispatch.base import Dispatcher
from magnetar.broker.entry import Entry
from magnetar.managedledger.position import Position


def choose_active(consumers: list[BrokerConsumer], partition: int) -> BrokerConsumer | None:
    """The active consumer of an Exclusive or Failover subscription (None: no consumer):
    of the best priority level, sorted by name, the first (``partition`` i >= 0: the
    ``i % n``-th). Non-persistent subscriptions choose by the same rule."""
    if not consumers:
        return None
    best = min(c.priority for c in consumers)
    eligible = sorted((c for c in consumers if c.priority == best), key=lambda c: (c.name, c.consumer_id))
    return eligible[partition % len(eligible)] if partition >= 0 else eligible[0]


class SingleActiveConsumerDispatcher(Dispatcher):
    active: BrokerConsumer | None = None
    _told: dict[int, bool] | None = None
    """Consumer id -> what it was last told (active or not)."""

    def choose_active(self) -> BrokerConsumer | None:
        return choose_active(self.sub.consumers, self.sub.partition)

    def consumers_changed(self) -> None:
        new = self.choose_active()
        old = self.active
        if new is not old:
            self.active = new
            if old is not None and not old.closed and old in self.sub.consumers:
                self.sub.send_back(old, None, failed=False)  # the new active consumer gets them, in order
        self._tell_active(new)
        self.wake()

    def _tell_active(self, active: BrokerConsumer | None) -> None:
        told = self._told if self._told is not None else {}
        now: dict[int, bool] = {}
        for c in self.sub.consumers:
            state = now[c.consumer_id] = c is active
            if c.on_active is not None and told.get(c.consumer_id) != state:
                c.on_active(state)
        self._told = now

    def route(self, position: Position, data: bytes, batch: Entry, n: int, mask: int, from_replay: bool) -> int:
        consumer = self.active
        if consumer is None or not consumer.available:
            return mask
        self.deliver(consumer, position, data, n, mask)
        return 0

    def _any_available(self) -> bool:
        return self.active is not None and self.active.available
