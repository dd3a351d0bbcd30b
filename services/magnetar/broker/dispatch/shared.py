"""Shared: each entry to one consumer, round robin over the consumers that have permits
(so a consumer granting more permits gets more). Any number of consumers."""

from __future__ import annotations

from magnetar.broker.dispatch.base import Dispatcher
from magnetar.broker.entry import Entry
from magnetar.managedledger.position import Position


class SharedDispatcher(Dispatcher):
    delays_messages = True
    delivers_due_at_once = True
    _next = 0

    def route(self, position: Position, data: bytes, batch: Entry, n: int, mask: int, from_replay: bool) -> int:
        consumers = self.sub.consumers
        k = len(consumers)
        for j in range(k):
            i = (self._next + j) % k
            consumer = consumers[i]
            if consumer.available:
                self.deliver(consumer, position, data, n, mask)
                self._next = i + 1
                return 0
        return mask
