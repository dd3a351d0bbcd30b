"""A twin of the topic as its subscriptions see it (``subscription.SubscriptionTopic``):
a real ManagedLedger on the in-memory ledger client and store of
test_managed_ledger_core, plus the ``subscribe``, ``publish`` and ``close`` the dispatch
tests drive it with. No producers, deduplication, stats or moves."""

from __future__ import annotations

import asyncio

from test_managed_ledger_core import MemoryStore

from magnetar.broker.compaction.reader import CompactedEntries
from magnetar.broker.config import BrokerConfig
from magnetar.broker.deadletter import MovePublisher
from magnetar.broker.ratelimit import RateLimiter
from magnetar.broker.subscription import Subscription
from magnetar.broker.subscription_type import InitialPosition
from magnetar.managedledger.ledger import ManagedLedger
from magnetar.managedledger.position import Position


class TopicTwin:
    def __init__(self, name: str, ml: ManagedLedger, store: MemoryStore, config: BrokerConfig) -> None:
        self.name = name
        self.partition = -1
        self.ml = ml
        self.store = store
        """The managed ledger's metadata store: what the cursors stored."""
        self.config = config
        self.mover: MovePublisher | None = None
        self.compacted: CompactedEntries | None = None
        self.delayed_delivery_enabled = True
        self.dispatch_limiter: RateLimiter | None = None
        self.terminated_position: Position | None = None
        self.msg_out = 0
        self.subscriptions: dict[str, Subscription] = {}

    def count_out(self, messages: int, size: int = 0) -> None:
        self.msg_out += messages

    def consumer_limit_reached(self) -> bool:
        return False

    async def subscribe(self, name: str, sub_type: int, initial_position: int) -> Subscription:
        """The durable subscription ``name``, created at ``initial_position`` when new."""
        sub = self.subscriptions.get(name)
        if sub is None:
            start = "earliest" if initial_position == InitialPosition.Earliest else "latest"
            sub = Subscription(self, name, sub_type, await self.ml.open_cursor(name, start))
            self.subscriptions[name] = sub
        return sub

    def publish(
        self, producer_name: str, entry: bytes, num_messages: int, lowest_seq: int, highest_seq: int,
        chunk: tuple[int, int] | None = None,
    ) -> asyncio.Future[Position]:
        """Store ``entry`` and wake the subscriptions once it is stored. The arguments are
        PersistentTopic.publish's, so one test helper can publish to either; only
        ``entry`` is used."""
        added = self.ml.add_entry(entry)
        added.add_done_callback(self._stored)
        return added

    def _stored(self, added: asyncio.Future[Position]) -> None:
        if not added.cancelled() and added.exception() is None:
            for sub in self.subscriptions.values():
                sub.notify_new_entries()

    async def close(self) -> None:
        for sub in self.subscriptions.values():
            await sub.close()
        await self.ml.close()
