"""Delayed and scheduled delivery in the dispatchers (in-memory twins; real time for the
short delays, an injected clock for the clamping rules)."""

from __future__ import annotations

import asyncio
import time

import pytest
from test_dispatch import Sink, settle

from magnetar.broker.dispatch.delayed import MAX_DELAY_MS, DelayedIndex, effective_deliver_at
from magnetar.broker.entry import Message, encode_entry
from magnetar.broker.subscription_type import InitialPosition, SubscriptionType
from magnetar.common.errors import InvalidArgument
from magnetar.managedledger.position import Position

pytestmark = pytest.mark.asyncio

DAY_MS = 86_400_000


async def test_clamping_rules():
    published = 1_000_000
    assert effective_deliver_at(0, published) == 0  # not delayed
    assert effective_deliver_at(published - 5, published) == published - 5  # in the past: due now
    assert effective_deliver_at(published + 3 * DAY_MS, published) == published + 3 * DAY_MS
    assert effective_deliver_at(published + 10 * DAY_MS, published) == published + 10 * DAY_MS
    assert effective_deliver_at(published + 11 * DAY_MS, published) == published + MAX_DELAY_MS
    assert MAX_DELAY_MS == 864_000_000


async def test_index_hands_back_entries_in_time_order_once_due():
    now = [1000.0]
    index = DelayedIndex(clock_ms=lambda: now[0])
    index.add(Position(1, 2), 3000)
    index.add(Position(1, 1), 2000)
    index.add(Position(1, 1), 2000)  # twice: kept once
    assert len(index) == 2 and index.next_due_ms() == 2000
    assert index.pop_due() == []
    now[0] = 2500
    assert index.pop_due() == [Position(1, 1)]
    now[0] = 10_000
    assert index.pop_due() == [Position(1, 2)] and len(index) == 0 and index.next_due_ms() is None


async def publish_delayed(topic, values_and_delays, publish_ms=None) -> None:
    futures = []
    for value, delay_ms in values_and_delays:
        now = publish_ms if publish_ms is not None else int(time.time() * 1000)
        msg = Message(payload=str(value).encode(), deliver_at_ms=now + delay_ms if delay_ms is not None else 0)
        entry = encode_entry("p", 0, now, False, [msg])
        futures.append(topic.publish("", entry, 1, 0, 0))
    await asyncio.gather(*futures)


async def test_shared_holds_delayed_messages_until_due_and_others_flow(topic):
    sub = await topic.subscribe("s", SubscriptionType.Shared, InitialPosition.Earliest)
    sink = Sink(sub, "c")
    # Delivery times are wall-clock milliseconds: measure arrivals on the same clock, from
    # the exact millisecond the delays count from (a monotonic start taken before it can
    # put a punctual delivery a fraction of a millisecond "early").
    published_ms = int(time.time() * 1000)
    await publish_delayed(topic, [(0, None), (1, 400), (2, 200), (3, None), (4, -5000)], publish_ms=published_ms)
    await settle()
    assert sink.payloads() == [b"0", b"3", b"4"]  # a time in the past is at once
    arrivals = {}
    while len(sink.payloads()) < 5 and time.time() * 1000 - published_ms < 5000:
        for p in sink.payloads():
            arrivals.setdefault(p, time.time() * 1000 - published_ms)
        await asyncio.sleep(0.005)
    for p in sink.payloads():
        arrivals.setdefault(p, time.time() * 1000 - published_ms)
    assert sink.payloads() == [b"0", b"3", b"4", b"2", b"1"]
    # Never early; lateness is measured precisely in bench/, here only bounded loosely.
    assert 200 <= arrivals[b"2"] <= 1200 and 400 <= arrivals[b"1"] <= 1400, arrivals
    assert all(m[3] == 0 for m in sink.messages())  # being held is not a redelivery


async def test_exclusive_delivers_delayed_messages_at_once(topic):
    sub = await topic.subscribe("s", SubscriptionType.Exclusive, InitialPosition.Earliest)
    sink = Sink(sub, "c", sub_type=SubscriptionType.Exclusive)
    await publish_delayed(topic, [(0, 60_000), (1, None)])
    await settle()
    assert sink.payloads() == [b"0", b"1"]


async def test_a_new_dispatcher_finds_waiting_messages_again(topic):
    # What a broker restart or failover does: the dispatcher reads again from the cursor.
    # The delay is a minute on an injected clock: a loaded machine cannot make it fall due
    # between two steps of the test (a real 300 ms delay once did, under CI).
    sub = await topic.subscribe("s", SubscriptionType.Key_Shared, InitialPosition.Earliest)
    first = Sink(sub, "a", sub_type=SubscriptionType.Key_Shared)
    published = int(time.time() * 1000)
    await publish_delayed(topic, [(0, 60_000), (1, None)], publish_ms=published)
    await settle()
    assert first.payloads() == [b"1"] and len(sub.dispatcher.delayed) == 1
    first.ack_all()
    first.leave()
    second = Sink(sub, "b", sub_type=SubscriptionType.Key_Shared)
    await settle()
    assert second.payloads() == [] and len(sub.dispatcher.delayed) == 1
    sub.dispatcher.delayed.clock_ms = lambda: published + 60_000
    sub.dispatcher.wake()
    await settle()
    assert second.payloads() == [b"0"]
    second.ack_all()
    assert sub.cursor.backlog() == 0


async def test_a_clamped_delay_waits_ten_days_not_longer(topic):
    sub = await topic.subscribe("s", SubscriptionType.Shared, InitialPosition.Earliest)
    now = [time.time() * 1000]
    sink = Sink(sub, "c")
    sub.dispatcher.delayed.clock_ms = lambda: now[0]
    published = int(now[0])
    await publish_delayed(topic, [(0, 30 * DAY_MS)], publish_ms=published)
    await settle()
    assert sub.dispatcher.delayed.next_due_ms() == published + MAX_DELAY_MS
    now[0] = published + MAX_DELAY_MS - 1
    sub.dispatcher.wake()
    await settle()
    assert sink.payloads() == []
    now[0] = published + MAX_DELAY_MS
    sub.dispatcher.wake()
    await settle()
    assert sink.payloads() == [b"0"]


async def test_publishing_records_the_latest_delivery_time_of_the_ledger(persistent_topic):
    # What PersistentTopic.publish hands the managed ledger (the topic twin does not).
    published = int(time.time() * 1000)
    await publish_delayed(persistent_topic, [(0, 5_000), (1, None), (2, 30 * DAY_MS), (3, 1_000)], publish_ms=published)
    batched = encode_entry("p", 0, published, True, [
        Message(payload=b"x", deliver_at_ms=published + 40 * DAY_MS), Message(payload=b"y"),
    ])  # fmt: skip
    await persistent_topic.publish("", batched, 2, 0, 0)  # a batch is delivered at once: not delayed
    with pytest.raises(InvalidArgument, match="not a message batch"):  # refused, not stored
        await persistent_topic.publish("", b"\xff\xff not an entry", 1, 0, 0)
    with pytest.raises(InvalidArgument, match="says 3 messages, its entry holds 2"):
        await persistent_topic.publish("", batched, 3, 0, 0)
    assert persistent_topic.ml.number_of_entries == 5
    (info,) = [i for i in persistent_topic.ml.ledgers if i.entries]
    assert info.max_deliver_at_ms == published + MAX_DELAY_MS  # clamped
