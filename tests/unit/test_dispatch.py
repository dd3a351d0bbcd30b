"""Subscriptions and dispatchers over a real ManagedLedger on in-memory twins of the
ledger client and metadata store, with a twin of their topic (the ``topic`` fixture,
tests/unit/topic_twin.py; the integration tests run the same on real processes)."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict

import pytest

from magnetar.broker.consumer import BrokerConsumer, Delivery
from magnetar.broker.entry import Message, decode_entry, encode_entry, max_entry_messages
from magnetar.broker.subscription_type import InitialPosition, SubscriptionType
from magnetar.common.errors import ConsumerBusy, InvalidArgument
from magnetar.managedledger.position import Position

pytestmark = pytest.mark.asyncio


class Sink:
    """A consumer's stream, as a list: what was delivered, message by message."""

    def __init__(self, sub, name: str, priority: int = 0, permits: int = 1000, max_unacked: int = 0, sub_type: SubscriptionType = SubscriptionType.Shared, key_shared=None):
        self.deliveries: list[Delivery] = []
        self.resets = 0
        self.consumer = BrokerConsumer(
            name, priority, self.deliveries.extend, on_reset=self._reset, max_unacked=max_unacked, key_shared=key_shared
        )
        self.sub = sub
        sub.add_consumer(self.consumer, sub_type)
        sub.flow(self.consumer, permits)

    def _reset(self) -> None:
        self.resets += 1

    def messages(self) -> list[tuple[Position, int, str, int]]:
        """(entry, batch index, key, redelivery count) of every message delivered."""
        out = []
        for d in self.deliveries:
            batch = decode_entry(d.entry)
            for i, m in enumerate(batch.messages):
                if not d.skipped >> i & 1:
                    out.append((d.position, i, m.partition_key, d.redelivery_count))
        return out

    def payloads(self) -> list[bytes]:
        out = []
        for d in self.deliveries:
            batch = decode_entry(d.entry)
            out.extend(m.payload for i, m in enumerate(batch.messages) if not d.skipped >> i & 1)
        return out

    def ack_all(self) -> None:
        positions = sorted(self.consumer.pending)
        held = {p: self.consumer.pending[p] for p in positions}
        if self.sub.sub_type == SubscriptionType.Key_Shared:
            self.sub.ack(self.consumer, positions, cumulative=False)
        else:
            self.sub.ack(self.consumer, list(held), cumulative=False)

    def leave(self) -> None:
        self.sub.remove_consumer(self.consumer)


async def settle(rounds: int = 20) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0.005)


async def publish(topic, count: int, keys=None, per_entry: int = 1, start: int = 0) -> None:
    futures = []
    n = start
    for _ in range(count):
        msgs = []
        for _ in range(per_entry):
            key = keys(n) if keys else ""
            msgs.append(Message(payload=str(n).encode(), partition_key=key, has_partition_key=bool(key)))
            n += 1
        entry = encode_entry("p", 0, 0, per_entry > 1, msgs)
        futures.append(topic.publish("", entry, len(msgs), 0, 0))
    await asyncio.gather(*futures)
    await settle()


async def test_exclusive_refuses_a_second_consumer_and_a_different_type(topic):
    sub = await topic.subscribe("s", SubscriptionType.Exclusive, InitialPosition.Earliest)
    Sink(sub, "a", sub_type=SubscriptionType.Exclusive)
    with pytest.raises(ConsumerBusy, match="already has a consumer"):
        sub.add_consumer(BrokerConsumer("b", 0, lambda d: None), SubscriptionType.Exclusive)
    with pytest.raises(ConsumerBusy, match="is Exclusive"):
        sub.add_consumer(BrokerConsumer("c", 0, lambda d: None), SubscriptionType.Shared)


async def test_failover_active_is_first_by_priority_then_name_and_the_next_gets_unacked_then_new_in_order(topic):
    sub = await topic.subscribe("s", SubscriptionType.Failover, InitialPosition.Earliest)
    b = Sink(sub, "b", sub_type=SubscriptionType.Failover)
    a = Sink(sub, "a", sub_type=SubscriptionType.Failover)
    low = Sink(sub, "0-low-priority", priority=1, sub_type=SubscriptionType.Failover)
    await publish(topic, 10)
    assert [p for p in a.payloads()] == [str(i).encode() for i in range(10)]
    assert b.payloads() == [] and low.payloads() == []
    # a acks the first 4 then dies: b gets 4..9 first (counted as redelivered), then 10..14.
    sub.ack(a.consumer, [m[0] for m in a.messages()[:4]], cumulative=False)
    a.leave()
    await settle()
    await publish(topic, 5, start=10)
    assert b.payloads() == [str(i).encode() for i in range(4, 15)]
    assert [m[3] for m in b.messages()] == [1] * 6 + [0] * 5
    assert low.payloads() == []


async def test_failover_consumers_are_told_when_they_become_active_or_stop_being(topic):
    sub = await topic.subscribe("s", SubscriptionType.Failover, InitialPosition.Earliest)
    told: list[tuple[str, bool]] = []

    def attach(name: str) -> BrokerConsumer:
        c = BrokerConsumer(name, 0, lambda _: None, on_active=lambda active: told.append((name, active)))
        sub.add_consumer(c, SubscriptionType.Failover)
        return c

    b = attach("b")
    attach("c")  # not first by name: told it is not active, b hears nothing
    assert told == [("b", True), ("c", False)]
    told.clear()
    a = attach("a")  # first by name: a takes over
    assert sorted(told) == [("a", True), ("b", False)]
    told.clear()
    sub.remove_consumer(a)
    assert told == [("b", True)]
    told.clear()
    sub.remove_consumer(b)
    assert told == [("c", True)]


async def test_failover_spreads_partitions_over_consumers(topic):
    topic.partition = 3
    sub = await topic.subscribe("s", SubscriptionType.Failover, InitialPosition.Earliest)
    sinks = [Sink(sub, name, sub_type=SubscriptionType.Failover) for name in ("c0", "c1")]
    await publish(topic, 3)
    assert [len(s.payloads()) for s in sinks] == [0, 3]  # partition 3 % 2 consumers = c1


async def test_shared_round_robin_and_a_departed_consumers_unacked_go_to_the_others(topic):
    sub = await topic.subscribe("s", SubscriptionType.Shared, InitialPosition.Earliest)
    sinks = [Sink(sub, f"c{i}") for i in range(4)]
    await publish(topic, 400)
    counts = [len(s.payloads()) for s in sinks]
    assert sum(counts) == 400 and all(90 <= c <= 110 for c in counts), counts
    for s in sinks[1:]:
        s.ack_all()
    gone = set(sinks[0].payloads())
    sinks[0].leave()
    await settle()
    again = [m for s in sinks[1:] for m in s.messages() if m[3] == 1]
    assert len(again) == len(gone)
    assert {p for s in sinks[1:] for p in s.payloads()[-200:]} >= gone
    with pytest.raises(InvalidArgument, match="cumulative"):
        sub.ack(sinks[1].consumer, [Position(0, 0)], cumulative=True)


async def test_shared_with_200_consumers_delivers_each_message_once(topic):
    sub = await topic.subscribe("s", SubscriptionType.Shared, InitialPosition.Earliest)
    sinks = [Sink(sub, f"c{i}", permits=5) for i in range(200)]
    await publish(topic, 1000)
    got = Counter(p for s in sinks for p in s.payloads())
    assert len(got) == 1000 and set(got.values()) == {1}


async def test_max_unacked_blocks_a_consumer_until_it_acks_half(topic):
    sub = await topic.subscribe("s", SubscriptionType.Shared, InitialPosition.Earliest)
    sink = Sink(sub, "c", max_unacked=10)
    await publish(topic, 30)
    assert len(sink.payloads()) == 10 and sink.consumer.blocked
    assert sub.stats().blocked_consumers == 1
    held = sorted(sink.consumer.pending)
    sub.ack(sink.consumer, held[:4], cumulative=False)
    await settle()
    assert len(sink.payloads()) == 10  # 6 unacked: still above half
    sub.ack(sink.consumer, held[4:5], cumulative=False)
    await settle()
    assert len(sink.payloads()) == 15 and sink.consumer.blocked


async def test_key_shared_keeps_keys_on_one_consumer_and_splits_mixed_batches(topic):
    sub = await topic.subscribe("s", SubscriptionType.Key_Shared, InitialPosition.Earliest)
    sinks = [Sink(sub, f"c{i}", sub_type=SubscriptionType.Key_Shared) for i in range(3)]
    await publish(topic, 100, keys=lambda n: f"k{n % 20}", per_entry=5)
    owners = defaultdict(set)
    for i, s in enumerate(sinks):
        for _, _, key, _ in s.messages():
            owners[key].add(i)
    assert len(owners) == 20 and all(len(o) == 1 for o in owners.values())
    assert sum(len(s.payloads()) for s in sinks) == 500
    assert len({i for o in owners.values() for i in o}) == 3
    # Per-key order within each consumer.
    for s in sinks:
        by_key = defaultdict(list)
        for payload, (_, _, key, _) in zip(s.payloads(), s.messages(), strict=True):
            by_key[key].append(int(payload))
        assert all(v == sorted(v) for v in by_key.values())
    # Acks of Key_Shared entries are per consumer's messages: the entry is acked once all owners ack.
    for s in sinks:
        s.ack_all()
    assert sub.cursor.backlog() == 0


async def test_key_shared_routes_by_the_ordering_key_before_the_partition_key(topic):
    """As Pulsar's Key_Shared: a message's ordering key, when it has one, decides its
    consumer; its partition key only when it has none. Pulsar entries (as the Pulsar door
    stores them) and the core's own entries alike."""
    from magnetar.proto.pulsar import pulsar_api_pb2 as wire
    from magnetar.protocol import stored

    sub = await topic.subscribe("s", SubscriptionType.Key_Shared, InitialPosition.Earliest)
    sinks = [Sink(sub, f"c{i}", sub_type=SubscriptionType.Key_Shared) for i in range(3)]
    futures = []
    for n in range(60):  # one partition key for all, 12 ordering keys
        meta = wire.MessageMetadata(producer_name="p", sequence_id=n, publish_time=1, partition_key="same",
                                    ordering_key=f"o{n % 12}".encode())  # fmt: skip
        futures.append(topic.publish("", stored.stored_entry(meta.SerializeToString(), str(n).encode()), 1, 0, 0))
    for n in range(60, 80):  # 20 partition keys, one ordering key for all
        msg = Message(payload=str(n).encode(), partition_key=f"k{n}", has_partition_key=True, ordering_key=b"one")
        futures.append(topic.publish("", encode_entry("p", n, 0, False, [msg]), 1, 0, 0))
    await asyncio.gather(*futures)
    owners: dict[bytes, set[int]] = defaultdict(set)
    for i, s in enumerate(sinks):
        for d in s.deliveries:
            [m] = decode_entry(d.entry).messages
            owners[m.ordering_key].add(i)
    assert sum(len(s.payloads()) for s in sinks) == 80
    assert len(owners) == 13 and all(len(o) == 1 for o in owners.values()), owners
    assert len({i for o in owners.values() for i in o}) > 1  # one partition key, yet spread


async def test_key_shared_new_consumer_gets_a_moved_key_only_after_earlier_messages_are_acked(topic):
    sub = await topic.subscribe("s", SubscriptionType.Key_Shared, InitialPosition.Earliest)
    first = Sink(sub, "first", sub_type=SubscriptionType.Key_Shared)
    await publish(topic, 50, keys=lambda n: f"k{n % 50}")
    assert len(first.payloads()) == 50
    second = Sink(sub, "second", sub_type=SubscriptionType.Key_Shared)
    await publish(topic, 50, keys=lambda n: f"k{n % 50}", start=50)
    moved = {key for key in (f"k{i}" for i in range(50)) if sub.dispatcher.selector.pick(_slot(key)) is second.consumer}
    assert moved
    # Nothing of a moved key reaches the newcomer while the first consumer holds earlier ones.
    assert second.payloads() == []
    first.ack_all()
    await settle()
    assert sorted(k for _, _, k, _ in second.messages()) == sorted(moved)
    assert all(int(p) >= 50 for p in second.payloads())


def _slot(key: str) -> int:
    from magnetar.broker.dispatch.key_shared import slot_of

    return slot_of(key)


async def test_batch_index_acks_leave_acked_messages_out_of_a_redelivery(topic):
    sub = await topic.subscribe("s", SubscriptionType.Exclusive, InitialPosition.Earliest)
    sink = Sink(sub, "c", sub_type=SubscriptionType.Exclusive)
    await publish(topic, 1, per_entry=4)
    (pos,) = sink.consumer.pending
    sub.ack_batch(sink.consumer, [(pos, 4, 0b0101)])
    sub.send_back(sink.consumer, [pos])
    await settle()
    last = sink.deliveries[-1]
    assert last.skipped == 0b0101 and last.redelivery_count == 1
    assert sink.payloads()[-2:] == [b"1", b"3"]


@pytest.mark.parametrize("over", [1, 2**32 - 1], ids=["one-over", "uint32-max"])
async def test_a_batch_size_no_entry_can_hold_is_refused_before_anything_is_acked(topic, over):
    """A batch-index ack's masks are as wide as its batch size (``BatchIndexAck.batch_size``
    is a uint32 on the gRPC door): a size over what an entry can hold is refused, and the
    valid ack before it in the same call is not applied either."""
    sub = await topic.subscribe("s", SubscriptionType.Exclusive, InitialPosition.Earliest)
    sink = Sink(sub, "c", sub_type=SubscriptionType.Exclusive)
    await publish(topic, 2, per_entry=4)
    first, second = sorted(sink.consumer.pending)
    size = over if over > 1 else max_entry_messages(topic.config.max_message_bytes) + over
    with pytest.raises(InvalidArgument, match=f"a batch of {size} messages cannot be stored"):
        sub.ack_batch(sink.consumer, [(first, 4, 0b0001), (second, size, 0b0001)])
    assert sink.consumer.pending == {first: 0b1111, second: 0b1111}
    sub.send_back(sink.consumer, None)
    await settle()
    again = sink.deliveries[-2:]
    assert [(d.position, d.skipped) for d in again] == [(first, 0), (second, 0)]  # nothing was acked


async def test_a_redelivery_count_is_stored_before_the_message_goes_out_again(topic):
    sub = await topic.subscribe("s", SubscriptionType.Shared, InitialPosition.Earliest)
    stored_at_delivery = []

    def sink(deliveries):
        doc, _ = topic.store.cursors[("public", "default", "t", "s")]
        stored_at_delivery.append((deliveries[0].redelivery_count, {(c[0], c[1]): c[2] for c in doc.get("redelivery_counts", [])}))

    consumer = BrokerConsumer("c", 0, sink)
    sub.add_consumer(consumer, SubscriptionType.Shared)
    sub.flow(consumer, 100)
    await publish(topic, 1)
    await sub.cursor.persist()
    (pos,) = consumer.pending
    for n in (1, 2, 3):
        sub.send_back(consumer, [pos])
        await settle()
        count, stored = stored_at_delivery[-1]
        assert count == n and stored[tuple(pos)] == n


async def test_reset_cursor_tells_consumers_and_delivers_from_the_position(topic):
    sub = await topic.subscribe("s", SubscriptionType.Shared, InitialPosition.Earliest)
    sink = Sink(sub, "c")
    await publish(topic, 10)
    positions = [m[0] for m in sink.messages()]
    sink.ack_all()
    await sub.reset_cursor(positions[6])
    assert sink.resets == 1 and sink.consumer.permits == 0
    sub.flow(sink.consumer, 100)
    await settle()
    assert sink.payloads()[10:] == [b"6", b"7", b"8", b"9"]
    assert sub.skip(2) == 2
    assert sub.cursor.backlog() == 2


async def test_key_shared_departure_moves_held_messages_and_their_acks_still_count(topic):
    sub = await topic.subscribe("s", SubscriptionType.Key_Shared, InitialPosition.Earliest)
    sinks = [Sink(sub, f"c{i}", sub_type=SubscriptionType.Key_Shared) for i in range(3)]
    await publish(topic, 60, keys=lambda n: f"k{n % 30}", per_entry=3)
    gone = sinks.pop(0)
    taken = set(gone.payloads())
    assert taken
    gone.leave()
    await settle()
    for _ in range(3):
        for s in sinks:
            s.ack_all()
        await settle()
    again = {p for s in sinks for p, (_, _, _, r) in zip(s.payloads(), s.messages(), strict=True) if r == 1}
    assert again == taken
    assert sub.cursor.backlog() == 0 and sub.unacked_count() == 0
    await publish(topic, 10, keys=lambda n: f"k{n % 30}", start=180)
    assert sum(len(s.payloads()) for s in sinks) == 180 + 10


async def test_a_departed_consumers_messages_come_back_flagged_with_their_count_unchanged(topic):
    """A departure is not a failure (Pulsar leaves the count alone too): what the consumer
    held comes back flagged (count 1), the stored count stays 0, and a negative ack after
    that counts from there, so ``max_redeliver_count`` counts only failures."""
    sub = await topic.subscribe("s", SubscriptionType.Shared, InitialPosition.Earliest)
    first = Sink(sub, "first")
    await publish(topic, 2)
    first.leave()
    stored = []

    def sink(deliveries):
        doc, _ = topic.store.cursors[("public", "default", "t", "s")]
        stored.append(({(c[0], c[1]): c[2] for c in doc.get("redelivery_counts", [])}, [d.redelivery_count for d in deliveries]))

    consumer = BrokerConsumer("second", 0, sink)
    sub.add_consumer(consumer, SubscriptionType.Shared)
    sub.flow(consumer, 10)
    await settle()
    counts, delivered = stored[0]
    assert delivered == [1, 1] and counts == {}
    positions = sorted(consumer.pending)
    assert [sub.cursor.redelivery_count(p) for p in positions] == [0, 0]
    sub.send_back(consumer, positions[:1])  # a negative ack: the first failure
    await settle()
    counts, delivered = stored[-1]
    assert delivered == [1] and counts == {tuple(positions[0]): 1}
    sub.ack(consumer, positions, cumulative=False)
    assert sub.cursor.delivery_count(positions[1]) == 0  # acknowledged: forgotten


async def test_stats_rate_what_each_consumer_acknowledged_and_failed_not_departures_or_expiry(topic):
    """Pulsar's ``messageAckRate`` and ``msgRateRedeliver``: messages a consumer
    acknowledged (batch indexes, whole entries, everything a cumulative ack covers) and
    messages it failed; a subscription's are its consumers' summed."""
    sub = await topic.subscribe("s", SubscriptionType.Failover, InitialPosition.Earliest)
    sink = Sink(sub, "c", sub_type=SubscriptionType.Failover)
    await publish(topic, 3, per_entry=4)  # 12 messages in 3 entries
    first, second, third = sorted(sink.consumer.pending)
    for meter in sub.meters():
        meter.sample(100.0)
    sub.ack_batch(sink.consumer, [(first, 4, 0b0011)])  # 2 acknowledged
    sub.send_back(sink.consumer, [first])  # the other 2 failed
    await settle()
    assert sink.consumer.pending[first] == 0b1100  # delivered again
    sub.ack(sink.consumer, [second], cumulative=True)  # 2 + 4 acknowledged
    for meter in sub.meters():
        meter.sample(102.0)
    stats = sub.stats()
    assert (stats.message_ack_rate, stats.msg_rate_redeliver) == (4.0, 1.0)  # 8 and 2 in 2 s
    (c,) = stats.consumer_stats
    assert (c.message_ack_rate, c.msg_rate_redeliver) == (4.0, 1.0)

    other = Sink(sub, "d", sub_type=SubscriptionType.Failover)
    sink.leave()  # the departure gives `third` to d: not a failure of c's
    await settle()
    assert list(other.consumer.pending) == [third] and sink.consumer.meter_redeliver.messages == 2
    sub.acknowledge_through(third)  # an expiry: nobody acknowledged
    assert not other.consumer.pending and other.consumer.meter_ack.messages == 0
    assert sink.consumer.meter_ack.messages == 8
