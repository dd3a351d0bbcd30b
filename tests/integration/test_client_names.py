"""pulsar-client's names in the SDK against a real broker and bookie: what
``Consumer.get_last_message_id`` answers (beside pulsar-client's answer through the
Pulsar protocol door), ``initial_sequence_id`` with the broker's deduplication, and the
message listener."""

from __future__ import annotations

import asyncio
import threading

import pulsar
import pytest

import magnetar
import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
from magnetar.common.keyhash import key_hash
from magnetar.common.netutil import free_port
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.processes import start_all
from magnetar.testing.pulsarclient import pulsar_client

pytestmark = pytest.mark.integration


class Cluster:
    def __init__(self, address: str, port: int) -> None:
        self.address = address
        self.pulsar_url = f"pulsar://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def cluster(module_bookie_factory, module_broker_factory) -> Cluster:
    port = free_port()
    broker = module_broker_factory.create(protocol_port=port, ensemble_size=1, write_quorum=1, ack_quorum=1)
    start_all([module_bookie_factory.create(), broker])  # start-ups overlap
    return Cluster(broker.address, port)


async def _topic(cluster: Cluster, name: str) -> str:
    return f"persistent://{await new_namespace(cluster.address, 'names')}/{name}"


def _pulsar_last(cluster: Cluster, topic: str) -> tuple[int, int, int, int]:
    client = pulsar_client(cluster.pulsar_url, operation_timeout_seconds=10)
    try:
        last = client.subscribe(topic, "pulsar-client").get_last_message_id()
        return last.ledger_id(), last.entry_id(), last.partition(), last.batch_index()
    finally:
        client.close()


def _parts(mid: magnetar.MessageId) -> tuple[int, int, int, int]:
    return mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index()


async def test_get_last_message_id_answers_as_pulsar_client(cluster: Cluster) -> None:
    topic = await _topic(cluster, "last")
    async with mg.Client(cluster.address) as client:
        consumer = await client.subscribe(topic, "s")
        producer = await client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=50)
        await producer.send(b"alone")
        sent = await asyncio.gather(*(producer.send_async(b"m%d" % i, None) for i in range(4)))
        assert len({(m.ledger_id(), m.entry_id()) for m in sent}) == 1  # one batch of 4
        last = await consumer.get_last_message_id()
        assert _parts(last) == _parts(sent[-1]) and last.batch_index() == 3
        assert await asyncio.to_thread(_pulsar_last, cluster, topic) == _parts(last)

        parted = await _topic(cluster, "last-parts")
        async with AdminClient(cluster.address, 10) as admin:
            await admin.create_topic(parted, partitions=2)
        on_partitions = await client.subscribe(parted, "s")
        with pytest.raises(mg.OperationNotSupported):
            await on_partitions.get_last_message_id()
        one = await client.subscribe(f"{parted}-partition-1", "s1")  # a partition by its name: a plain consumer
        empty = await one.get_last_message_id()
        assert (empty.entry_id(), empty.partition()) == (-1, 1)
        assert await asyncio.to_thread(_pulsar_last, cluster, f"{parted}-partition-1") == _parts(empty)

    def pulsar_on_partitions() -> None:
        pc = pulsar_client(cluster.pulsar_url, operation_timeout_seconds=10)
        try:
            with pytest.raises(pulsar.exceptions.OperationNotSupported):
                pc.subscribe(parted, "pulsar-client").get_last_message_id()
        finally:
            pc.close()

    await asyncio.to_thread(pulsar_on_partitions)


async def test_initial_sequence_id_with_the_brokers_deduplication(cluster: Cluster) -> None:
    topic = await _topic(cluster, "seq")
    async with mg.Client(cluster.address) as client:
        reader = await client.create_reader(topic, mg.MessageId.earliest)
        first = await client.create_producer(topic, producer_name="p", initial_sequence_id=100, batching_enabled=False)
        await first.send(b"a")
        await first.send(b"b")
        assert first.last_sequence_id() == 102
        await first.close()
        # The same name again from a baseline at or below 102: the broker drops those as
        # duplicates; 103 is new.
        again = await client.create_producer(topic, producer_name="p", initial_sequence_id=101, batching_enabled=False)
        for payload in (b"dup", b"new"):
            await again.send(payload)
        got = [(await reader.read_next(5000)).data() for _ in range(3)]
        assert got == [b"a", b"b", b"new"]
        assert not await reader.has_message_available()


async def test_message_listener_acknowledges_through_the_blocking_client(cluster: Cluster) -> None:
    topic = await _topic(cluster, "listened")
    count = 50

    def run() -> list[bytes]:
        got: list[bytes] = []
        done = threading.Event()

        def listener(consumer, msg) -> None:
            got.append(msg.data())
            consumer.acknowledge(msg)
            if len(got) == count:
                done.set()

        with magnetar.Client(cluster.address) as client:
            consumer = client.subscribe(topic, "s", consumer_type=magnetar.ConsumerType.Shared, message_listener=listener)
            producer = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=5)
            for i in range(count):
                producer.send_async(b"m%d" % i, None)
            producer.flush()
            assert done.wait(10)
            consumer.close()  # sends the grouped acks
        return got

    got = await asyncio.to_thread(run)
    assert got == [b"m%d" % i for i in range(count)]
    async with AdminClient(cluster.address, 10) as admin:
        (sub,) = (await admin.topic_stats(topic)).subscriptions
    assert (sub.name, sub.backlog, sub.unacked) == ("s", 0, 0)


async def test_key_shared_sticky_ranges_through_the_sdk(cluster: Cluster) -> None:
    topic = await _topic(cluster, "sticky")
    keys = [f"k{i}" for i in range(30)]

    def sticky(*ranges: tuple[int, int]) -> mg.ConsumerKeySharedPolicy:
        return mg.ConsumerKeySharedPolicy(mg.KeySharedMode.Sticky, sticky_ranges=list(ranges))

    async with mg.Client(cluster.address) as client:
        low = await client.subscribe(topic, "s", consumer_type=mg.ConsumerType.KeyShared, key_shared_policy=sticky((0, 32767)))
        high = await client.subscribe(topic, "s", consumer_type=mg.ConsumerType.KeyShared, key_shared_policy=sticky((32768, 65535)))
        with pytest.raises(mg.ConsumerAssignError, match="overlaps"):
            await client.subscribe(topic, "s", consumer_type=mg.ConsumerType.KeyShared, key_shared_policy=sticky((100, 200)))
        with pytest.raises(mg.ConsumerBusy):
            await client.subscribe(topic, "s", consumer_type=mg.ConsumerType.KeyShared)  # AutoSplit
        producer = await client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=20)
        await asyncio.gather(*(producer.send_async(k.encode(), None, partition_key=k) for k in keys))
        got = {"low": set(), "high": set()}
        for name, consumer in (("low", low), ("high", high)):
            while True:
                try:
                    msg = await consumer.receive(timeout_millis=500)
                except mg.Timeout:
                    break
                got[name].add(msg.partition_key())
    assert got == {
        "low": {k for k in keys if key_hash(k) % 65536 <= 32767},
        "high": {k for k in keys if key_hash(k) % 65536 > 32767},
    }
