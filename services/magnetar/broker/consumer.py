"""A consumer attached to a subscription, as the broker sees it: permits, unacked entries,
and where its deliveries go (the gRPC stream, or any other adapter)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

_ids = itertools.count(1)


class BrokerConsumer:
    def __init__(self, name: str, priority: int, sink: Callable[[list[Any]], None]) -> None:
        """Args:
            sink: takes a list of deliveries (``broker_pb2.Delivery``); must not block.
        """
        self.consumer_id = next(_ids)
        self.name = name
        self.priority = priority
        self.sink = sink
        self.permits = 0
        self.unacked: dict[Any, int] = {}  # Position -> messages in that entry
        self.closed = False

    @property
    def sort_key(self) -> tuple[int, str]:
        return (self.priority, self.name)

    def __repr__(self) -> str:
        return f"BrokerConsumer({self.name!r}, permits={self.permits}, unacked={len(self.unacked)})"
