"""Readers (non-durable cursors from a start id) and consumer seek by id and by publish
time, on a real broker and bookies."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

import magnetar.asyncio as mg
from magnetar.common.grpcutil import CHANNEL_OPTIONS
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.proto.v1 import broker_pb2_grpc as pb_grpc
from magnetar.testing.processes import start_all

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def url(module_bookie_factory, module_broker_factory) -> str:
    """One broker for the module's tests that need no settings of their own (each on
    topics of its own)."""
    broker = module_broker_factory.create(ensemble_size=1, write_quorum=1, ack_quorum=1)
    start_all([module_bookie_factory.create(), broker])  # start-ups overlap
    return broker.address


async def send_all(client, topic: str, values, batching: bool = False) -> list[mg.MessageId]:
    producer = await client.create_producer(topic, batching_enabled=batching)
    ids = [await producer.send(str(v).encode()) for v in values]
    await producer.close()
    return ids


async def read_values(reader, count: int) -> list[int]:
    return [int((await reader.read_next(timeout_millis=10_000)).data()) for _ in range(count)]


async def subscriptions(address: str, topic: str) -> list[str]:
    async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        stats = await pb_grpc.BrokerStub(channel).GetTopicStats(pb.TopicStatsRequest(topic=topic), timeout=10)
    return [s.name for s in stats.subscriptions]


async def test_readers_from_earliest_latest_and_an_id_inclusive_or_not(url):
    topic = "persistent://public/default/readers"
    async with mg.Client(url) as client:
        ids = await send_all(client, topic, range(10))

        earliest = await client.create_reader(topic, mg.MessageId.earliest)
        assert await earliest.has_message_available()
        assert await read_values(earliest, 10) == list(range(10))
        assert not await earliest.has_message_available()

        after = await client.create_reader(topic, ids[4])
        assert await read_values(after, 5) == [5, 6, 7, 8, 9]
        inclusive = await client.create_reader(topic, ids[4], start_message_id_inclusive=True)
        assert await read_values(inclusive, 6) == [4, 5, 6, 7, 8, 9]

        latest = await client.create_reader(topic, mg.MessageId.latest)
        assert not await latest.has_message_available()
        with pytest.raises(mg.Timeout):
            await latest.read_next(timeout_millis=500)
        await send_all(client, topic, [10, 11])
        assert await read_values(latest, 2) == [10, 11]
        assert await read_values(earliest, 2) == [10, 11]

        # Non-durable: the readers' cursors are on the broker while they read, gone after.
        assert len(await subscriptions(url, topic)) == 4
        for r in (earliest, after, inclusive, latest):
            await r.close()
        await asyncio.sleep(0.5)
        assert await subscriptions(url, topic) == []

        # A reader can seek too.
        again = await client.create_reader(topic, mg.MessageId.latest)
        await again.seek(ids[7])  # exclusive (start_message_id_inclusive off): after it
        assert await read_values(again, 2) == [8, 9]


async def test_consumer_seek_by_message_id_and_by_publish_time(url):
    topic = "persistent://public/default/seek"
    async with mg.Client(url) as client:
        consumer = await client.subscribe(topic, "s", initial_position=mg.InitialPosition.Earliest)
        first = await send_all(client, topic, range(0, 20), batching=True)
        await asyncio.sleep(0.05)
        middle_ms = int(time.time() * 1000)
        await asyncio.sleep(0.05)
        await send_all(client, topic, range(20, 40), batching=True)

        received = []
        for _ in range(40):
            msg = await consumer.receive(timeout_millis=10_000)
            received.append(int(msg.data()))
            await consumer.acknowledge(msg)
        assert received == list(range(40))

        await consumer.seek(first[5])  # exclusive (start_message_id_inclusive off): the one after
        msg = await consumer.receive(timeout_millis=10_000)
        assert int(msg.data()) == 6

        await consumer.seek(middle_ms)  # the first message published at or after
        msg = await consumer.receive(timeout_millis=10_000)
        assert int(msg.data()) == 20

        await consumer.seek(mg.MessageId.earliest)
        assert int((await consumer.receive(timeout_millis=10_000)).data()) == 0

        await consumer.seek(mg.MessageId.latest)
        with pytest.raises(mg.Timeout):
            await consumer.receive(timeout_millis=500)
        await send_all(client, topic, [40])
        assert int((await consumer.receive(timeout_millis=10_000)).data()) == 40

        with pytest.raises(TypeError):
            await consumer.seek("yesterday")  # type: ignore[arg-type]

        # The seek moved the stored cursor: a new consumer after this one closes resumes there.
        await consumer.seek(first[10])
        await consumer.close()
        consumer = await client.subscribe(topic, "s")
        assert int((await consumer.receive(timeout_millis=10_000)).data()) == 10

        await consumer.unsubscribe()
        assert "s" not in await subscriptions(url, topic)


async def test_the_unacked_limit_holds_shared_consumers_only_not_readers_or_exclusive(bookie_factory, broker_factory):
    """max_unacked_messages_per_consumer is Pulsar's Shared/Key_Shared limit: a reader
    (which never acknowledges) and an Exclusive consumer read past it; a Shared
    consumer stops there until it acknowledges."""
    broker = broker_factory.create(ensemble_size=1, write_quorum=1, ack_quorum=1, max_unacked_messages_per_consumer=100)
    start_all([bookie_factory.create(), broker])  # start-ups overlap
    topic = "persistent://public/default/past-the-unacked-limit"
    async with mg.Client(broker.address) as client:
        await send_all(client, topic, range(300), batching=True)
        reader = await client.create_reader(topic, mg.MessageId.earliest)
        assert await read_values(reader, 300) == list(range(300))
        exclusive = await client.subscribe(topic, "excl", initial_position=mg.InitialPosition.Earliest)
        assert [int((await exclusive.receive(timeout_millis=10_000)).data()) for _ in range(300)] == list(range(300))
        shared = await client.subscribe(topic, "shared", consumer_type=mg.ConsumerType.Shared,
                                        initial_position=mg.InitialPosition.Earliest)
        got = []
        with pytest.raises(mg.Timeout):
            while True:
                got.append(await shared.receive(timeout_millis=1500))
        assert 100 <= len(got) < 300  # held at the limit (whole batches count)
        for message in got:
            await shared.acknowledge(message)
        more = await shared.receive(timeout_millis=10_000)
        assert int(more.data()) not in {int(m.data()) for m in got}
