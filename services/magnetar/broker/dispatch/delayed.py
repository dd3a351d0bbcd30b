"""Delayed and scheduled delivery: which entries wait, and until when.

A delayed message is stored like any other (its ``SingleMessage.deliver_at_ms`` set, and
never batched: the producer sends it alone). The dispatcher of a Shared or Key_Shared
subscription, reading new entries, puts an entry that is not due yet in this index
instead of delivering it, and hands it back once due. Exclusive and Failover deliver
delayed messages at once (as Pulsar does).

The index is rebuilt from the topic itself: a dispatcher that starts (a broker restart,
a failover, the first consumer) reads again from the first unacknowledged entry, so
every waiting message is found again and nothing is delivered early or lost.

Clamping: a delivery time more than 10 days (864,000 s) after the message was published
is moved to publish time + 10 days; a time in the past means at once.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable

from magnetar.broker.managedledger.position import Position

MAX_DELAY_MS = 864_000 * 1000


def effective_deliver_at(deliver_at_ms: int, publish_time_ms: int) -> int:
    """When a message may go out (0: at once): ``deliver_at_ms`` clamped to 10 days after
    publishing."""
    if deliver_at_ms <= 0:
        return 0
    return min(deliver_at_ms, publish_time_ms + MAX_DELAY_MS)


class DelayedIndex:
    """Entries waiting for their time, earliest first."""

    def __init__(self, clock_ms: Callable[[], float] = lambda: time.time() * 1000) -> None:
        self.clock_ms = clock_ms
        self._heap: list[tuple[int, Position]] = []
        self._waiting: set[Position] = set()

    def __len__(self) -> int:
        return len(self._waiting)

    def __contains__(self, position: object) -> bool:
        return position in self._waiting

    def add(self, position: Position, due_ms: int) -> None:
        if position not in self._waiting:
            self._waiting.add(position)
            heapq.heappush(self._heap, (due_ms, position))

    def next_due_ms(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def pop_due(self) -> list[Position]:
        """Entries whose time has come (removed from the index), in time order."""
        now = self.clock_ms()
        out = []
        while self._heap and self._heap[0][0] <= now:
            _, position = heapq.heappop(self._heap)
            self._waiting.discard(position)
            out.append(position)
        return out

    def clear(self) -> None:
        self._heap.clear()
        self._waiting.clear()
