"""Terminating a PersistentTopic (pulsar-admin's ``topics terminate``): producers are
refused, consumers get everything then the end of the topic, and the terminated position
is stored with the ledger list (a broker that loads the topic again keeps it terminated)."""

from __future__ import annotations

import asyncio

import pytest
from test_dispatch import Sink, publish, settle
from test_managed_ledger_core import FakeLedgerClient, MemoryStore, open_ml

from magnetar.broker.config import BrokerConfig
from magnetar.broker.entry import decode_entry
from magnetar.broker.subscription_type import InitialPosition, SubscriptionType
from magnetar.broker.topic import PersistentTopic
from magnetar.common.errors import TopicTerminated

pytestmark = pytest.mark.asyncio
TOPIC = "persistent://public/default/t"


class EndSink(Sink):
    """A consumer's stream that also records when it is told the topic ended (and how
    many messages it had got by then)."""

    def __init__(self, sub, name: str, permits: int = 1000) -> None:
        self.ends: list[int] = []
        super().__init__(sub, name, permits=0, sub_type=SubscriptionType.Exclusive)
        self.consumer.on_end_of_topic = lambda: self.ends.append(len(self.payloads()))
        sub.flow(self.consumer, permits)


def _config() -> BrokerConfig:
    return BrokerConfig(dispatch_max_entries=50, cursor_persist_interval_s=0.01)


async def test_terminate_refuses_producers_and_tells_consumers_the_end_after_the_last_message():
    client, store = FakeLedgerClient(), MemoryStore()
    topic = PersistentTopic(TOPIC, -1, await open_ml(client, store), _config())
    await topic.load()
    closed: list[BaseException] = []
    topic.add_producer("p", on_close=closed.append)
    sub = await topic.subscribe("s", SubscriptionType.Exclusive, InitialPosition.Earliest)
    await publish(topic, 5)
    sink = EndSink(sub, "c", permits=3)  # reads 3 of 5 first
    await settle()
    assert sink.payloads() == [b"0", b"1", b"2"]

    last = await topic.terminate()
    assert last == topic.ml.last_confirmed_position and last.entry_id == 4
    assert [type(e) for e in closed] == [TopicTerminated]  # the connected producer is closed
    assert await topic.terminate() == last  # again: the same answer
    with pytest.raises(TopicTerminated):
        topic.add_producer("q")
    with pytest.raises(TopicTerminated):
        await topic.publish("x", (await _an_entry(topic)), 1, 0, 0)
    await settle()
    assert sink.ends == []  # two messages still to read: not at the end yet
    sub.flow(sink.consumer, 10)
    await settle()
    assert sink.payloads() == [b"0", b"1", b"2", b"3", b"4"]
    assert sink.ends == [5]  # told once, after the last message
    assert topic.ml.last_confirmed_position == last  # nothing was stored after
    await topic.close()

    # A broker loading the topic again (a restart, a hand-over) finds it terminated.
    again = PersistentTopic(TOPIC, -1, await open_ml(client, store), _config())
    await again.load()
    assert again.terminated_position == last
    with pytest.raises(TopicTerminated):
        again.add_producer("p")
    late = EndSink(await again.subscribe("late", SubscriptionType.Exclusive, InitialPosition.Earliest), "l")
    await settle()
    assert late.payloads() == [str(i).encode() for i in range(5)] and late.ends == [5]
    await again.close()


async def test_terminate_waits_for_the_adds_in_flight_and_refuses_those_after():
    topic = PersistentTopic(TOPIC, -1, await open_ml(FakeLedgerClient(), MemoryStore()), _config())
    await topic.load()
    entry = await _an_entry(topic)
    before = [topic.publish("", entry, 1, 0, 0) for _ in range(3)]
    terminating = asyncio.ensure_future(topic.terminate())
    await asyncio.sleep(0)
    after = topic.publish("", entry, 1, 0, 0)
    stored = [r.position for r in await asyncio.gather(*before)]
    assert await terminating == stored[-1]
    with pytest.raises(TopicTerminated):
        await after
    await topic.close()


async def test_a_consumer_of_a_terminated_empty_topic_is_told_the_end_at_once(persistent_topic):
    await persistent_topic.terminate()
    sub = await persistent_topic.subscribe("s", SubscriptionType.Exclusive, InitialPosition.Earliest)
    sink = EndSink(sub, "c")
    await settle()
    assert sink.payloads() == [] and sink.ends == [0]


async def _an_entry(topic) -> bytes:
    from magnetar.broker.entry import Message, encode_entry

    entry = encode_entry("p", 0, 0, False, [Message(payload=b"x")])
    assert decode_entry(entry).messages[0].payload == b"x"
    return entry
