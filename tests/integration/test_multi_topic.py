"""The multi-topic consumer on real processes (ZooKeeper, 2 bookies, 1 broker): one
consumer of a plain topic and a partitioned one, the blocking client on a list, and
retry letter topics of several topics."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import grpc
import pytest

import magnetar
import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
from magnetar.common.grpcutil import CHANNEL_OPTIONS
from magnetar.common.keyhash import partition_for_key
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.proto.v1 import broker_pb2_grpc as pb_grpc
from magnetar.testing.processes import start_all

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUORUM = dict(ensemble_size=2, write_quorum=2, ack_quorum=2)
NS = "persistent://public/default"


@pytest.fixture(scope="module")
def url(module_bookie_factory, module_broker_factory) -> str:
    """One broker for the module's tests (each on topics of its own)."""
    broker = module_broker_factory.create(**QUORUM)
    start_all([module_bookie_factory.create(), module_bookie_factory.create(), broker])  # start-ups overlap
    return broker.address


async def create_partitioned(url: str, topic: str, partitions: int) -> None:
    async with grpc.aio.insecure_channel(url, options=CHANNEL_OPTIONS) as channel:
        await pb_grpc.BrokerStub(channel).CreateTopic(
            pb.CreateTopicRequest(topic=topic, partitions=partitions), timeout=10
        )


async def test_one_shared_consumer_of_a_plain_and_a_partitioned_topic(url):
    plain, parted = f"{NS}/mt-plain", f"{NS}/mt-parted"
    await create_partitioned(url, parted, 2)
    n = 300
    async with mg.Client(url) as client:
        consumer = await client.subscribe(
            ["mt-plain", parted], "s", consumer_type=mg.ConsumerType.Shared,
            initial_position=mg.InitialPosition.Earliest,
        )
        assert consumer.topics() == [plain, parted] and len(consumer.partitions) == 3
        to_plain = await client.create_producer(plain, batching_max_messages=20)
        to_parted = await client.create_producer(parted, batching_max_messages=20)
        sends = [to_plain.send_async(b"plain:%d" % i, None) for i in range(n)]
        sends += [to_parted.send_async(b"parted:%d" % i, None, partition_key=f"k{i % 7}") for i in range(n)]
        await asyncio.gather(*sends)

        seen: dict[str, list[int]] = defaultdict(list)  # topic_name() -> values, in arrival order
        for _ in range(2 * n):
            msg = await consumer.receive(timeout_millis=20_000)
            source, value = msg.data().decode().split(":")
            if source == "plain":
                assert msg.topic_name() == plain and msg.message_id().partition() == -1
            else:
                index = partition_for_key(msg.partition_key(), 2)
                assert msg.topic_name() == f"{parted}-partition-{index}" == f"{parted}-partition-{msg.message_id().partition()}"
            seen[msg.topic_name()].append(int(value))
            await consumer.acknowledge(msg)
        with pytest.raises(mg.Timeout):
            await consumer.receive(timeout_millis=500)  # nothing twice

        assert seen[plain] == list(range(n))  # every message once, in order
        partitions = {t: v for t, v in seen.items() if t != plain}
        assert len(partitions) == 2 and all(v == sorted(v) for v in partitions.values())  # order per partition
        assert sorted(v for vs in partitions.values() for v in vs) == list(range(n))
        with pytest.raises(mg.InvalidArgument, match="pass the Message"):
            await consumer.acknowledge(msg.message_id())
        await consumer.close()

        # Every ack reached the broker: a new consumer of the subscription gets nothing.
        again = await client.subscribe([plain, parted], "s", consumer_type=mg.ConsumerType.Shared)
        with pytest.raises(mg.Timeout):
            await again.receive(timeout_millis=1000)


def test_the_blocking_client_consumes_two_topics(url):
    with magnetar.Client(url) as client:
        consumer = client.subscribe(["mt-a", "mt-b"], "s", initial_position=magnetar.InitialPosition.Earliest)
        for topic in ("mt-a", "mt-b"):
            producer = client.create_producer(topic)
            for i in range(20):
                producer.send(b"%d" % i)
            producer.close()
        seen: dict[str, list[int]] = defaultdict(list)
        for _ in range(40):
            msg = consumer.receive(timeout_millis=20_000)
            seen[msg.topic_name()].append(int(msg.data()))
            consumer.acknowledge(msg)
        assert seen == {f"{NS}/mt-a": list(range(20)), f"{NS}/mt-b": list(range(20))}
        consumer.seek(magnetar.MessageId.earliest)
        replayed = {(m.topic_name(), int(m.data())) for m in (consumer.receive(timeout_millis=20_000) for _ in range(40))}
        assert replayed == {(t, i) for t in seen for i in range(20)}
        consumer.unsubscribe()


async def test_reconsume_later_goes_through_the_retry_topic_of_each_topic(url):
    async with mg.Client(url) as client:
        consumer = await client.subscribe(
            ["mt-r1", "mt-r2"], "s", consumer_type=mg.ConsumerType.Shared, enable_retry=True
        )
        for topic in ("mt-r1", "mt-r2"):
            await (await client.create_producer(topic)).send(topic.encode())
        originals = [await consumer.receive(timeout_millis=10_000) for _ in range(2)]
        for msg in originals:
            await consumer.reconsume_later(msg, 1000)
        copies = [await consumer.receive(timeout_millis=10_000) for _ in range(2)]
        assert {(c.topic_name(), c.data()) for c in copies} == {
            (f"{NS}/mt-r1-s-RETRY", b"mt-r1"), (f"{NS}/mt-r2-s-RETRY", b"mt-r2")
        }
        for copy in copies:
            assert copy.properties()["REAL_TOPIC"] == f"{NS}/{copy.data().decode()}"
            await consumer.acknowledge(copy)
        with pytest.raises(mg.Timeout):
            await consumer.receive(timeout_millis=1500)


async def test_open_producers_and_consumers_add_the_partitions_of_a_grown_topic(url):
    """``update_partitions`` on a topic with an open producer and consumer: within their
    ``auto_update_partitions_interval_seconds`` both use the new partition, and the
    consumer gets what the producer sends there (its subscription was created on the new
    partition, at its start, before the count was raised)."""
    topic = f"{NS}/grown"
    await create_partitioned(url, topic, 2)
    async with mg.Client(url) as client, AdminClient(url, 15) as admin:
        consumer = await client.subscribe(
            topic, "s", consumer_type=mg.ConsumerType.Shared, auto_update_partitions_interval_seconds=0.5,
        )
        producer = await client.create_producer(
            topic, batching_enabled=False, auto_update_partitions_interval_seconds=0.5,
        )
        assert (len(producer.partitions), len(consumer.partitions)) == (2, 2)
        await admin.update_partitions(topic, 3)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while (len(producer.partitions), len(consumer.partitions)) != (3, 3):
            assert loop.time() < deadline, (len(producer.partitions), len(consumer.partitions))
            await asyncio.sleep(0.05)
        assert consumer.partitions[2].topic == f"{topic}-partition-2"
        ids = [await producer.send(b"%d" % i) for i in range(30)]  # round robin over 3
        assert {m.partition() for m in ids} == {0, 1, 2}
        got: dict[str, set[bytes]] = defaultdict(set)
        for _ in ids:
            msg = await consumer.receive(timeout_millis=20_000)
            got[msg.topic_name()].add(msg.data())
            await consumer.acknowledge(msg)
        assert sum(len(v) for v in got.values()) == 30
        assert len(got[f"{topic}-partition-2"]) == sum(1 for m in ids if m.partition() == 2)
        await producer.close()
        await consumer.close()
