"""The broker's /metrics collector (broker/metrics.py): a scrape on another thread, as
the metrics HTTP server makes it, reads the topics' stats on the event loop and
names them as Pulsar does. Over real topics on the in-memory twins."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families
from test_managed_ledger_core import FakeLedgerClient, MemoryStore

from magnetar.broker.config import BrokerConfig
from magnetar.broker.consumer import BrokerConsumer
from magnetar.broker.lease import SessionLease
from magnetar.broker.metrics import BrokerMetrics
from magnetar.broker.subscription_type import InitialPosition, SubscriptionType
from magnetar.broker.topic import PersistentTopic
from magnetar.managedledger.config import ManagedLedgerConfig
from magnetar.managedledger.ledger import ManagedLedger
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol import stored


async def _topic(client: FakeLedgerClient, store: MemoryStore, name: str, published: int) -> PersistentTopic:
    ns, local = name.split("/")[-2:]
    ml = await ManagedLedger.open("public", ns, local, client, store, ManagedLedgerConfig(write_quorum=2))
    topic = PersistentTopic(f"persistent://public/{ns}/{local}", -1, ml, BrokerConfig())
    await topic.load()
    sub = await topic.subscribe("s", SubscriptionType.Shared, InitialPosition.Latest)
    sub.add_consumer(BrokerConsumer("c", 0, lambda deliveries: None), SubscriptionType.Shared)  # no permits: nothing sent
    topic.add_producer("p")
    for seq in range(published):
        meta = pb.MessageMetadata(producer_name="p", sequence_id=seq, publish_time=1)
        await topic.publish("p", stored.stored_entry(meta.SerializeToString(), b"payload"), 1, seq, seq)
    return topic


def _scrape(metrics: BrokerMetrics) -> dict[tuple[str, frozenset], float]:
    text = metrics.exposition()
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}  # fmt: skip


async def test_a_scrape_from_another_thread_reads_the_topics_on_the_loop():
    client, store = FakeLedgerClient(), MemoryStore()
    topics = {t.name: t for t in [await _topic(client, store, "a/one", 5), await _topic(client, store, "a/two", 2)]}
    lease = SessionLease(10.0)
    lease.renewed(lease.clock())
    service = SimpleNamespace(topics=topics, nonpersistent={}, lease=lease, lease_held=True, lease_lapses=3,
                              config=BrokerConfig(cluster_name="east"))  # fmt: skip
    metrics = BrokerMetrics(service, asyncio.get_running_loop(), topic_level=True)  # type: ignore[arg-type]
    try:
        samples = await asyncio.to_thread(_scrape, metrics)
        one = frozenset({"cluster": "east", "namespace": "public/a", "topic": "persistent://public/a/one"}.items())
        assert samples[("pulsar_in_messages_total", one)] == 5
        assert samples[("pulsar_msg_backlog", one)] == 5
        assert samples[("pulsar_subscription_back_log", one | {("subscription", "s")})] == 5
        assert samples[("pulsar_producers_count", one)] == 1
        assert samples[("pulsar_consumers_count", one)] == 1
        logical = samples[("pulsar_storage_logical_size", one)]
        assert logical == topics["persistent://public/a/one"].stats().storage_size > 0
        assert samples[("pulsar_storage_size", one)] == 2 * logical
        c = frozenset({("cluster", "east")})
        assert samples[("pulsar_broker_topics_count", c)] == 2
        assert samples[("pulsar_broker_msg_backlog", c)] == 7
        assert samples[("pulsar_broker_lease_valid", c)] == 1
        assert samples[("pulsar_broker_lease_lost_total", c)] == 3
        assert 0 < samples[("pulsar_broker_lease_remaining_seconds", c)] <= lease.term_s
    finally:
        for t in topics.values():
            await t.close()


async def test_a_scrape_while_the_loop_is_gone_has_no_topic_figures():
    loop = asyncio.new_event_loop()
    loop.close()
    service = SimpleNamespace(config=BrokerConfig())
    metrics = BrokerMetrics(service, loop, topic_level=True)  # type: ignore[arg-type]
    assert await asyncio.to_thread(_scrape, metrics) == {}
