"""What a PersistentTopic and the broker's policy task enforce of namespace policies:
backlog quotas (refusing producers, evicting), message TTL, deduplication on and off,
delayed delivery off and its maximum delay, publish and dispatch rates. Over a real ManagedLedger on in-memory
twins (the ``persistent_topic`` fixture) and an injected clock."""

from __future__ import annotations

import asyncio
import time

import pytest
from test_dispatch import Sink, settle
from test_managed_ledger_core import FakeLedgerClient, MemoryStore, open_ml

from magnetar.broker.config import BrokerConfig
from magnetar.broker.entry import Message, encode_entry
from magnetar.broker.namespace_policies import (
    BacklogQuota,
    DelayedDelivery,
    DispatchRate,
    NamespacePolicies,
    PublishRate,
    QuotaPolicy,
    QuotaType,
)
from magnetar.broker.policy_task import NamespacePolicyTask
from magnetar.broker.subscription_type import InitialPosition, SubscriptionType
from magnetar.broker.topic import PersistentTopic, PublishResult
from magnetar.common.errors import InvalidArgument, NamespaceNotFound, ProducerBlockedQuotaExceeded

pytestmark = pytest.mark.asyncio
TOPIC = "persistent://public/default/t"
PAYLOAD = b"x" * 90


def entry(seq: int = 0, publish_ms: int = 0, deliver_at_ms: int = 0) -> bytes:
    message = Message(payload=PAYLOAD, sequence_id=seq, deliver_at_ms=deliver_at_ms)
    return encode_entry("p", 0, publish_ms, False, [message])


async def send(topic: PersistentTopic, seq: int, publish_ms: int = 0, producer: str = "p", **kw: int) -> PublishResult:
    return await topic.publish(producer, entry(seq, publish_ms, **kw), 1, seq, seq)


def quota(limit_size: int = -1, limit_time: int = -1, policy: QuotaPolicy = QuotaPolicy.PRODUCER_EXCEPTION) -> BacklogQuota:
    return BacklogQuota(limit_size, limit_time, policy)


class Policies:
    """The policy source of the task: one namespace's policies."""

    def __init__(self, policies: NamespacePolicies) -> None:
        self.policies = policies

    async def get(self, namespace: str) -> NamespacePolicies:
        if namespace != "public/default":
            raise NamespaceNotFound(namespace)
        return self.policies


def task(topic: PersistentTopic, policies: NamespacePolicies, now_s: float = 0.0) -> NamespacePolicyTask:
    return NamespacePolicyTask({topic.name: topic}, Policies(policies), 60.0, clock=lambda: now_s)


async def test_a_size_quota_refuses_sends_and_producers_while_the_backlog_is_over_it(persistent_topic):
    topic = persistent_topic
    await topic.load()
    sub = await topic.subscribe("s", SubscriptionType.Shared, InitialPosition.Earliest)
    entry_size = len(entry(1))
    topic.apply_policies(NamespacePolicies(backlog_quotas={QuotaType.DESTINATION_STORAGE: quota(3 * entry_size)}))
    for seq in range(3):
        await send(topic, seq)
    await send(topic, 3)  # the backlog was exactly at the quota: not over it
    with pytest.raises(ProducerBlockedQuotaExceeded, match="over its namespace's backlog quota"):
        await send(topic, 4)
    with pytest.raises(ProducerBlockedQuotaExceeded):
        topic.add_producer("another")
    assert topic.ml.number_of_entries == 4  # the refused send stored nothing
    sub.clear_backlog()
    await send(topic, 4)
    assert topic.add_producer("another") == -1
    # Eviction never refuses.
    sub.clear_backlog()
    topic.apply_policies(NamespacePolicies(backlog_quotas={
        QuotaType.DESTINATION_STORAGE: quota(0, policy=QuotaPolicy.CONSUMER_BACKLOG_EVICTION),
    }))
    await send(topic, 10)
    await send(topic, 11)


async def test_a_hold_quota_holds_the_producer_until_the_backlog_is_back_under_it(persistent_topic):
    topic = persistent_topic
    await topic.load()
    sub = await topic.subscribe("s", SubscriptionType.Shared, InitialPosition.Earliest)
    topic.add_producer("p")
    topic.apply_policies(NamespacePolicies(backlog_quotas={
        QuotaType.DESTINATION_STORAGE: quota(len(entry(1)), policy=QuotaPolicy.PRODUCER_REQUEST_HOLD),
    }))
    await send(topic, 1)
    await topic.hold_while_over_quota("p")  # at the quota, not over it: no wait
    await send(topic, 2)  # over it now, yet neither the send nor a new producer is refused
    assert topic.add_producer("another") == -1
    held = asyncio.create_task(topic.hold_while_over_quota("p", check_s=0.01))
    await asyncio.sleep(0.1)
    assert not held.done()  # the door reads nothing more from the producer
    sub.clear_backlog()
    await asyncio.wait_for(held, 1.0)
    assert topic.producers["p"].throttled_s >= 0.09
    assert topic.ml.number_of_entries == 2


async def test_eviction_moves_the_slowest_subscriptions_until_the_backlog_fits(persistent_topic):
    topic = persistent_topic
    await topic.load()
    slow = await topic.subscribe("slow", SubscriptionType.Shared, InitialPosition.Earliest)
    fast = await topic.subscribe("fast", SubscriptionType.Shared, InitialPosition.Earliest)
    for seq in range(1, 11):  # entries of one size
        await send(topic, seq)
    fast.skip(8)
    limit = 3 * len(entry(1))
    evicting = NamespacePolicies(backlog_quotas={QuotaType.DESTINATION_STORAGE: quota(limit, policy=QuotaPolicy.CONSUMER_BACKLOG_EVICTION)})
    done = await task(topic, evicting).run_once()
    assert done == {TOPIC: 7}
    assert slow.cursor.backlog() == 3 and fast.cursor.backlog() == 2  # the fast one was not moved
    assert topic.backlog_bytes() <= limit
    assert await task(topic, evicting).run_once() == {}  # within quota now


async def test_message_ttl_acknowledges_what_was_published_before_it_on_every_subscription(persistent_topic):
    topic = persistent_topic
    await topic.load()
    first = await topic.subscribe("a", SubscriptionType.Shared, InitialPosition.Earliest)
    second = await topic.subscribe("b", SubscriptionType.Exclusive, InitialPosition.Earliest)
    consumer = Sink(first, "c1")
    for seq, published in enumerate([1_000, 2_000, 3_000, 4_000]):
        await send(topic, seq, publish_ms=published)
    await settle()
    assert len(consumer.consumer.pending) == 4
    ttl = NamespacePolicies(message_ttl_s=2)
    assert await task(topic, ttl, now_s=4.5).run_once() == {TOPIC: 4}  # 1 000 and 2 000 ms, on both
    assert first.cursor.backlog() == 2 and second.cursor.backlog() == 2
    assert len(consumer.consumer.pending) == 2  # what it held of them no longer counts as unacked
    assert await task(topic, NamespacePolicies(message_ttl_s=0), now_s=100).run_once() == {}  # 0: never
    assert await task(topic, ttl, now_s=100).run_once() == {TOPIC: 4}


async def test_a_message_age_quota_blocks_producers_or_evicts(persistent_topic):
    topic = persistent_topic
    await topic.load()
    sub = await topic.subscribe("s", SubscriptionType.Shared, InitialPosition.Earliest)
    await send(topic, 0, publish_ms=1_000)
    await send(topic, 1, publish_ms=9_000)
    blocking = NamespacePolicies(backlog_quotas={QuotaType.MESSAGE_AGE: quota(limit_time=5)})
    await task(topic, blocking, now_s=10).run_once()
    with pytest.raises(ProducerBlockedQuotaExceeded, match="9 s old"):
        await send(topic, 2, publish_ms=10_000)
    sub.skip(1)
    await task(topic, blocking, now_s=10).run_once()
    await send(topic, 2, publish_ms=10_000)
    evicting = NamespacePolicies(backlog_quotas={
        QuotaType.MESSAGE_AGE: quota(limit_time=5, policy=QuotaPolicy.CONSUMER_BACKLOG_EVICTION),
    })
    assert await task(topic, evicting, now_s=14.5).run_once() == {TOPIC: 1}  # 9 000 ms is over 5 s old
    assert sub.cursor.backlog() == 1
    await task(topic, blocking, now_s=100).run_once()
    with pytest.raises(ProducerBlockedQuotaExceeded):
        await send(topic, 3)
    topic.apply_policies(NamespacePolicies())
    await send(topic, 3)  # nothing blocks once the quota is gone


async def test_deduplication_switched_off_stores_resends_and_on_again_drops_them(persistent_topic):
    topic = persistent_topic
    await topic.load()
    assert (await send(topic, 0)).position is not None
    assert (await send(topic, 0)).duplicate  # the broker's default: on
    topic.apply_policies(NamespacePolicies(deduplication=False))
    assert not (await send(topic, 0)).duplicate
    assert (await send(topic, 1)).position is not None
    topic.apply_policies(NamespacePolicies(deduplication=True))
    assert (await send(topic, 1)).duplicate  # what was stored while off is known
    assert topic.ml.number_of_entries == 3


async def test_deduplication_switched_on_for_a_topic_loaded_without_it_scans_first():
    config = BrokerConfig(deduplication_enabled=False, cursor_persist_interval_s=0.01)
    ml = await open_ml(FakeLedgerClient(), MemoryStore())
    topic = PersistentTopic(TOPIC, -1, ml, config)
    await topic.load()
    await send(topic, 5)
    assert not (await send(topic, 5)).duplicate  # off
    topic.apply_policies(NamespacePolicies(deduplication=True))
    for _ in range(100):
        if topic._dedup_complete:
            break
        await asyncio.sleep(0.01)
    assert (await send(topic, 5)).duplicate and (await send(topic, 4)).duplicate
    assert topic.add_producer("p") == 5
    await topic.close()


async def test_delayed_delivery_off_delivers_delayed_messages_at_once(persistent_topic):
    topic = persistent_topic
    await topic.load()
    sub = await topic.subscribe("s", SubscriptionType.Shared, InitialPosition.Earliest)
    consumer = Sink(sub, "c")
    now_ms = int(time.time() * 1000)
    await send(topic, 0, publish_ms=now_ms, deliver_at_ms=now_ms + 60_000)
    await settle()
    assert consumer.payloads() == []  # held until due
    topic.apply_policies(NamespacePolicies(delayed_delivery=DelayedDelivery(active=False)))
    await send(topic, 1, publish_ms=now_ms, deliver_at_ms=now_ms + 60_000)
    await settle()
    assert consumer.payloads() == [PAYLOAD]  # the new one went at once; the held one waits


async def test_a_delay_over_the_namespace_maximum_is_refused(persistent_topic):
    topic = persistent_topic
    await topic.load()
    topic.apply_policies(NamespacePolicies(delayed_delivery=DelayedDelivery(max_delivery_delay_ms=1_000)))
    await send(topic, 0, publish_ms=5_000, deliver_at_ms=6_000)
    with pytest.raises(InvalidArgument, match="Exceeds max allowed delivery delay of 1000 milliseconds"):
        await send(topic, 1, publish_ms=5_000, deliver_at_ms=6_001)
    topic.apply_policies(NamespacePolicies(delayed_delivery=DelayedDelivery(active=False, max_delivery_delay_ms=1_000)))
    await send(topic, 1, publish_ms=5_000, deliver_at_ms=60_000)  # not delayed at all: nothing to refuse


async def test_a_round_skips_a_namespace_it_cannot_read_and_goes_on():
    config = BrokerConfig(cursor_persist_interval_s=0.01)
    other = PersistentTopic("persistent://other/ns/t", -1, await open_ml(FakeLedgerClient(), MemoryStore()), config)
    mine = PersistentTopic(TOPIC, -1, await open_ml(FakeLedgerClient(), MemoryStore()), config)
    for t in (other, mine):
        await t.load()
    sub = await mine.subscribe("s", SubscriptionType.Shared, InitialPosition.Earliest)
    await send(mine, 0, publish_ms=1)
    round_ = NamespacePolicyTask({other.name: other, mine.name: mine}, Policies(NamespacePolicies(message_ttl_s=1)), 60.0,
                                 clock=lambda: 10.0)
    assert await round_.run_once() == {TOPIC: 1}
    assert sub.cursor.backlog() == 0
    round_.start()
    await round_.close()
    for t in (other, mine):
        await t.close()


async def test_a_publish_rate_makes_the_door_wait_and_counts_the_producers_throttled_time(persistent_topic):
    topic = persistent_topic
    topic.apply_policies(NamespacePolicies(publish_rate=PublishRate(20, -1)))
    await topic.load()
    topic.add_producer("p")
    loop = asyncio.get_running_loop()
    started = loop.time()
    await topic.throttle_publish("p", 19, 1900)  # one token left: no wait
    assert loop.time() - started < 0.05
    await topic.throttle_publish("p", 10, 1000)  # 9 in debt: 0.5 s until one token is back
    waited = loop.time() - started
    assert 0.5 <= waited < 0.8
    assert topic.stats().publishers[0].throttled_time_ms >= 500
    # Same policy again (the policy task's round): the bucket keeps its debt.
    limiter = topic.publish_limiter
    topic.apply_policies(NamespacePolicies(publish_rate=PublishRate(20, -1)))
    assert topic.publish_limiter is limiter
    # Removing the policy ends a wait at its next check.
    topic.publish_limiter.consume(100, 0)
    waiting = asyncio.ensure_future(topic.throttle_publish("p", 1, 100))
    await asyncio.sleep(0.05)
    topic.apply_policies(NamespacePolicies())
    await asyncio.wait_for(waiting, 2.0)  # at most one 1 s check later
    assert topic.publish_limiter is None


async def test_a_dispatch_rate_slows_dispatch_and_loses_nothing(persistent_topic):
    topic = persistent_topic
    topic.apply_policies(NamespacePolicies(dispatch_rate=DispatchRate(10, -1)))
    await topic.load()
    sub = await topic.subscribe("s", SubscriptionType.Shared, InitialPosition.Earliest)
    for seq in range(25):
        await send(topic, seq)
    consumer = Sink(sub, "c")
    await settle()
    assert 10 <= len(consumer.payloads()) <= 12  # the full bucket, then a wait
    await asyncio.sleep(0.55)
    assert 15 <= len(consumer.payloads()) <= 18
    stats = topic.stats().subscriptions[0]
    assert stats.dispatch_throttled_msg_events >= 1 and stats.dispatch_throttled_bytes_events == 0
    topic.apply_policies(NamespacePolicies())  # removed: the rest goes at the next wake-up
    await asyncio.sleep(1.1)
    assert len(consumer.payloads()) == 25
    assert topic.stats().subscriptions[0].dispatch_throttled_time_ms >= 400


class CountingTopic:
    """A served topic that counts the policies applied to it (enough for policies with
    nothing timed: no TTL, quota or compaction threshold)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.policies = NamespacePolicies()
        self.applied: list[NamespacePolicies] = []

    def apply_policies(self, policies: NamespacePolicies) -> None:
        self.policies = policies
        self.applied.append(policies)

    def block_producers(self, reason: str | None) -> None:
        assert reason is None


class ReadPolicies:
    """Each read returns a new object, as a read from ZooKeeper does."""

    def __init__(self, **fields: object) -> None:
        self.fields = fields
        self.reads = 0

    async def get(self, namespace: str) -> NamespacePolicies:
        self.reads += 1
        return NamespacePolicies(**self.fields)  # type: ignore[arg-type]


async def test_a_round_with_nothing_changed_reads_once_per_namespace_and_touches_no_topic():
    topics = {f"persistent://public/default/t{i}": CountingTopic(f"persistent://public/default/t{i}") for i in range(200)}
    setter = "persistent://public/default/t7"
    own = {setter: NamespacePolicies(max_producers=2)}
    level_reads: list[str] = []

    async def topic_level(owner: str) -> NamespacePolicies:
        level_reads.append(owner)
        return own.get(owner, NamespacePolicies())

    async def setters(namespace: str) -> set[str]:
        assert namespace == "public/default"
        return set(own)

    source = ReadPolicies(max_consumers=5)
    round_ = NamespacePolicyTask(topics, source, 60.0, topic_level=topic_level, setters=setters)  # type: ignore[arg-type]
    await round_.run_once()
    assert all(len(t.applied) == 1 and t.policies.max_consumers == 5 for t in topics.values())
    assert topics[setter].policies.max_producers == 2 and level_reads == [setter]

    await round_.run_once()  # nothing changed: the namespace read again, no topic touched
    assert source.reads == 2 and level_reads == [setter, setter]
    assert [len(t.applied) for t in topics.values()] == [1] * len(topics)

    source.fields = {"max_consumers": 6}  # changed through another broker
    await round_.run_once()
    assert all(len(t.applied) == 2 and t.policies.max_consumers == 6 for t in topics.values())
    assert topics[setter].policies.max_producers == 2

    own[setter] = NamespacePolicies(max_producers=3)  # the topic's own, changed elsewhere
    await round_.run_once()
    assert topics[setter].policies.max_producers == 3 and topics[setter].policies.max_consumers == 6
    assert sum(len(t.applied) for t in topics.values()) == 2 * len(topics) + 1
