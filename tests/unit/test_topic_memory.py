"""What an idle loaded topic with a subscription, a consumer and a producer costs in
Python heap: the broker holds thousands of them (docs/performance.md, "Lean topics").
Over a real ManagedLedger, PersistentTopic, Subscription and dispatcher on the in-memory
twins of the ledger client and store."""

from __future__ import annotations

import gc
import tracemalloc

import pytest
from test_managed_ledger_core import FakeLedgerClient, MemoryStore

from magnetar.broker.config import BrokerConfig
from magnetar.broker.consumer import BrokerConsumer
from magnetar.broker.subscription_type import InitialPosition, SubscriptionType
from magnetar.broker.topic import PersistentTopic
from magnetar.managedledger.config import ManagedLedgerConfig
from magnetar.managedledger.ledger import ManagedLedger

pytestmark = pytest.mark.asyncio
CONFIG, ML_CONFIG = BrokerConfig(), ManagedLedgerConfig()  # one per broker
TOPICS = 200
IDLE_TOPIC_BUDGET = 20 * 1024
"""Bytes of Python heap per idle topic with its subscription, consumer and producer, over
these twins: 24.9 KiB before the per-topic events, deques and task sets were made lazy,
the topic classes got slots and the ledger's age timer stopped being a task; 15.8 KiB
after. The broker's RSS per idle topic adds its door's share (docs/performance.md)."""


async def idle_topic(client: FakeLedgerClient, store: MemoryStore, i: int, namespace: str = "default",
                     config: BrokerConfig = CONFIG) -> PersistentTopic:
    """A loaded topic ``t<i>`` over the in-memory twins with a Shared subscription, its
    consumer (1,000 permits) and a producer: the idle topic of docs/performance.md (also
    bench/metrics_scrape.py's)."""
    ml = await ManagedLedger.open("public", namespace, f"t{i}", client, store, ML_CONFIG)
    topic = PersistentTopic(f"persistent://public/{namespace}/t{i}", -1, ml, config)
    await topic.load()
    sub = await topic.subscribe("s", SubscriptionType.Shared, InitialPosition.Latest)
    consumer = BrokerConsumer("c", 0, lambda deliveries: None)
    sub.add_consumer(consumer, SubscriptionType.Shared)
    sub.flow(consumer, 1000)
    topic.add_producer("p")
    return topic


async def test_an_idle_topic_with_a_consumer_and_a_producer_stays_within_its_heap_budget():
    client, store = FakeLedgerClient(), MemoryStore()
    warm = [await idle_topic(client, store, -1)]  # first-use caches (interned names, code objects)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        topics = [await idle_topic(client, store, i) for i in range(TOPICS)]
        gc.collect()
        per_topic = (tracemalloc.get_traced_memory()[0] - before) / TOPICS
    finally:
        tracemalloc.stop()
    try:
        assert per_topic <= IDLE_TOPIC_BUDGET, f"{per_topic:.0f} bytes per idle topic"
    finally:
        for t in topics + warm:
            await t.close()
