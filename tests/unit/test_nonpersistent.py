"""Non-persistent topics' core (broker/nonpersistent/): a message goes to the consumer
its subscription's type chooses at publish time, or is dropped (and counted) when that
consumer has no permits; nothing is kept, acknowledged or redelivered."""

from __future__ import annotations

import pytest

from magnetar.broker.config import BrokerConfig
from magnetar.broker.consumer import BrokerConsumer, Delivery
from magnetar.broker.dispatch.key_shared import slot_of
from magnetar.broker.entry import Message, decode_entry, encode_entry
from magnetar.broker.nonpersistent.topic import NonPersistentTopic
from magnetar.broker.subscription_type import InitialPosition, KeySharedPolicy, SubscriptionType
from magnetar.common.errors import ConsumerBusy, NotAllowedError, NotOwner, SubscriptionNotFound
from magnetar.common.message_id import MessageId
from magnetar.managedledger.position import Position

T = SubscriptionType


def entry(text: str, key: str = "") -> bytes:
    return encode_entry("p", 0, 0, False, [Message(payload=text.encode(), partition_key=key, has_partition_key=bool(key))])


class Got:
    """A consumer's sink: the payloads it was sent."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self.closed_with: list[Exception] = []

    def __call__(self, out: list[Delivery]) -> None:
        self.deliveries.extend(out)

    @property
    def texts(self) -> list[str]:
        return [decode_entry(d.entry).messages[0].payload.decode() for d in self.deliveries]


def consumer(name: str, permits: int, got: Got, priority: int = 0, key_shared: KeySharedPolicy | None = None) -> BrokerConsumer:
    c = BrokerConsumer(name, priority, sink=got, on_close=got.closed_with.append, key_shared=key_shared)
    c.permits = permits
    return c


@pytest.fixture
def topic() -> NonPersistentTopic:
    return NonPersistentTopic("non-persistent://t/ns/np", -1, BrokerConfig())


async def publish(topic: NonPersistentTopic, *texts: str, key: str = "") -> list[Position | None]:
    return [(await topic.publish("p", entry(t, key), 1, 0, 0)).position for t in texts]


async def attach(topic: NonPersistentTopic, sub: str, sub_type: SubscriptionType, *consumers: BrokerConsumer):
    s = await topic.subscribe(sub, sub_type, InitialPosition.Earliest)
    for c in consumers:
        s.add_consumer(c, sub_type)
    return s


async def test_published_messages_are_answered_0_0_and_dropped_without_a_consumer_with_permits(topic):
    assert await publish(topic, "before") == [Position(0, 0)]  # no subscription: nothing to keep
    got = Got()
    c = consumer("c", 2, got)
    sub = await attach(topic, "s", T.Exclusive, c)
    assert await publish(topic, "a", "b", "c", "d") == [Position(0, 0)] * 4
    assert got.texts == ["a", "b"]  # two permits: the other two are dropped, not held
    assert [d.position for d in got.deliveries] == [Position(0, 0)] * 2
    sub.flow(c, 5)
    await publish(topic, "e")
    assert got.texts == ["a", "b", "e"]  # "c" and "d" never come: at most once
    stats = topic.stats()
    assert (stats.msg_in_counter, stats.msg_out_counter, stats.msg_drop_counter) == (6, 3, 2)
    assert (stats.subscriptions[0].msg_drop_counter, stats.entries, stats.storage_size, stats.backlog_size) == (2, 0, 0, 0)
    assert stats.subscriptions[0].consumer_stats[0].available_permits == 4


async def test_each_subscription_gets_its_own_copy_and_a_later_subscription_only_later_messages(topic):
    first, second = Got(), Got()
    await attach(topic, "one", T.Exclusive, consumer("c1", 10, first))
    await publish(topic, "a")
    await topic.subscribe("two", T.Exclusive, InitialPosition.Earliest, start=topic.position_of(MessageId.earliest))
    topic.subscriptions["two"].add_consumer(consumer("c2", 10, second), T.Exclusive)
    await publish(topic, "b")
    assert (first.texts, second.texts) == (["a", "b"], ["b"])


async def test_shared_spreads_round_robin_over_consumers_with_permits(topic):
    gots = [Got() for _ in range(3)]
    cs = [consumer(f"c{i}", 100, g) for i, g in enumerate(gots)]
    await attach(topic, "s", T.Shared, *cs)
    await publish(topic, *(str(i) for i in range(9)))
    assert [len(g.texts) for g in gots] == [3, 3, 3]
    assert sorted(t for g in gots for t in g.texts) == sorted(str(i) for i in range(9))
    cs[0].permits = 0  # one without permits is skipped, not dropped for
    await publish(topic, *(str(i) for i in range(9, 13)))
    assert [len(g.texts) for g in gots] == [3, 5, 5]
    assert topic.stats().msg_drop_counter == 0


async def test_shared_prefers_the_best_priority_level(topic):
    low, high = Got(), Got()
    await attach(topic, "s", T.Shared, consumer("low", 10, low, priority=1), consumer("high", 1, high, priority=0))
    await publish(topic, "a", "b", "c")
    assert (high.texts, low.texts) == (["a"], ["b", "c"])


async def test_failover_sends_to_the_active_consumer_only_and_drops_when_it_has_no_permits(topic):
    a, b = Got(), Got()
    ca, cb = consumer("a", 1, a), consumer("b", 100, b)
    sub = await attach(topic, "s", T.Failover, ca, cb)
    await publish(topic, "1", "2")
    assert (a.texts, b.texts) == (["1"], [])  # "a" is active (by name); "2" dropped, not given to "b"
    assert topic.stats().msg_drop_counter == 1
    sub.remove_consumer(ca)
    await publish(topic, "3")
    assert b.texts == ["3"]  # nothing "a" had comes again


async def test_exclusive_refuses_a_second_consumer(topic):
    await attach(topic, "s", T.Exclusive, consumer("a", 1, Got()))
    with pytest.raises(ConsumerBusy):
        topic.subscriptions["s"].add_consumer(consumer("b", 1, Got()), T.Exclusive)
    with pytest.raises(ConsumerBusy):
        topic.subscriptions["s"].add_consumer(consumer("b", 1, Got()), T.Shared)


async def test_key_shared_keeps_a_key_on_one_consumer_and_drops_when_it_has_no_permits(topic):
    gots = [Got(), Got()]
    cs = [consumer(f"c{i}", 1000, g) for i, g in enumerate(gots)]
    await attach(topic, "s", T.Key_Shared, *cs)
    keys = [f"k{i}" for i in range(20)]
    for k in keys:
        await publish(topic, f"{k}-1", f"{k}-2", key=k)
    owners = {}
    for i, g in enumerate(gots):
        for text in g.texts:
            owners.setdefault(text.split("-")[0], set()).add(i)
    assert set(owners) == set(keys) and all(len(o) == 1 for o in owners.values())
    assert all(gots[i].texts for i in range(2))  # both got keys
    key_of_0 = next(k for k, o in owners.items() if o == {0})
    cs[0].permits = 0
    before = len(gots[1].texts)
    await publish(topic, "x", key=key_of_0)
    assert len(gots[1].texts) == before  # not moved to the other consumer: dropped
    assert topic.stats().msg_drop_counter == 1


async def test_key_shared_sticky_ranges_route_by_declared_range(topic):
    low, high = Got(), Got()
    await attach(
        topic, "s", T.Key_Shared,
        consumer("low", 100, low, key_shared=KeySharedPolicy.of(1, [(0, 32767)], False)),
        consumer("high", 100, high, key_shared=KeySharedPolicy.of(1, [(32768, 65535)], False)),
    )
    await publish(topic, *(f"m{i}" for i in range(10)), key="")
    expect_low = slot_of("") <= 32767
    assert (len(low.texts), len(high.texts)) == ((10, 0) if expect_low else (0, 10))


async def test_acks_are_ignored_nothing_is_redelivered_and_seek_is_refused(topic):
    got = Got()
    c = consumer("c", 10, got)
    sub = await attach(topic, "s", T.Shared, c)
    await publish(topic, "a")
    sub.ack(c, [Position(0, 0)], cumulative=False)
    sub.send_back(c, None)  # a negative ack: nothing comes again
    await publish(topic, "b")
    assert got.texts == ["a", "b"]
    with pytest.raises(NotAllowedError, match="Seek"):
        await sub.reset_cursor(Position(0, 0))
    with pytest.raises(NotAllowedError):
        await topic.position_for_time(0)


async def test_non_durable_subscription_goes_with_its_last_consumer_and_close_ends_streams(topic):
    got = Got()
    c = consumer("c", 10, got)
    sub = await topic.subscribe("reader", T.Exclusive, InitialPosition.Latest, durable=False)
    sub.add_consumer(c, T.Exclusive)
    sub.remove_consumer(c)
    assert "reader" not in topic.subscriptions
    kept = Got()
    await attach(topic, "s", T.Exclusive, consumer("k", 1, kept))
    with pytest.raises(SubscriptionNotFound):
        await topic.delete_subscription("nope")
    await topic.close()
    assert [type(e) for e in kept.closed_with] == [NotOwner]


async def test_the_namespaces_producer_and_consumer_limits_hold_as_on_persistent_topics(topic):
    """maxProducersPerTopic / maxConsumersPerTopic: one too many is refused with Pulsar's
    reason (consumers counted over every subscription); 0 is no limit."""
    from magnetar.broker.namespace_policies import NamespacePolicies
    from magnetar.common.errors import ProducerBusy

    topic.apply_policies(NamespacePolicies(max_producers=1, max_consumers=1))
    await topic.open_producer("a")
    with pytest.raises(ProducerBusy, match="^Topic reached max producers limit$"):
        await topic.open_producer("b")
    await attach(topic, "s1", T.Shared, consumer("c1", 10, Got()))
    second = await topic.subscribe("s2", T.Shared, InitialPosition.Earliest)
    with pytest.raises(ConsumerBusy, match="^Topic reached max consumers limit$"):
        second.add_consumer(consumer("c2", 10, Got()), T.Shared)
    topic.apply_policies(NamespacePolicies(max_producers=0, max_consumers=0))
    await topic.open_producer("b")
    second.add_consumer(consumer("c2", 10, Got()), T.Shared)
    assert set(topic.producers) == {"a", "b"} and len(second.consumers) == 1
