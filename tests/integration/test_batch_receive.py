"""``batch_receive`` on real processes (ZooKeeper, 2 bookies, 1 broker): a partitioned
topic drained in batches and acknowledged message by message, then nothing comes back
to a consumer of the same subscription (the blocking client) after reconnecting."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

import magnetar
import magnetar.asyncio as mg
from magnetar.common.grpcutil import CHANNEL_OPTIONS
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.proto.v1 import broker_pb2_grpc as pb_grpc
from magnetar.testing.processes import start_all

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUORUM = dict(ensemble_size=2, write_quorum=2, ack_quorum=2)
TOPIC = "persistent://public/default/batch-receive"


@pytest.fixture
def url(bookie_factory, broker_factory) -> str:
    broker = broker_factory.create(**QUORUM)
    start_all([bookie_factory.create(), bookie_factory.create(), broker])  # start-ups overlap
    return broker.address


async def create_partitioned(url: str, topic: str, partitions: int) -> None:
    async with grpc.aio.insecure_channel(url, options=CHANNEL_OPTIONS) as channel:
        await pb_grpc.BrokerStub(channel).CreateTopic(
            pb.CreateTopicRequest(topic=topic, partitions=partitions), timeout=10
        )


def drain_blocking(url: str, total: int) -> tuple[list[magnetar.Message], list[magnetar.Message]]:
    """With the blocking client: what the subscription still holds (waits 2 s for it),
    then the ``total`` messages published after subscribing."""
    with magnetar.Client(url) as client:
        consumer = client.subscribe(
            TOPIC, "s", batch_receive_policy=magnetar.ConsumerBatchReceivePolicy(100, -1, 2000)
        )
        leftover = consumer.batch_receive()
        producer = client.create_producer(TOPIC)
        for i in range(total):
            producer.send_async(b"late-%d" % i, None, partition_key=f"k{i}")
        producer.flush()
        fresh: list[magnetar.Message] = []
        deadline = time.monotonic() + 30
        while len(fresh) < total and time.monotonic() < deadline:
            batch = consumer.batch_receive()
            fresh += batch
            for msg in batch:
                consumer.acknowledge(msg)
        consumer.close()
    return leftover, fresh


async def test_2500_messages_drained_in_batches_and_acknowledged_are_not_redelivered(url):
    await create_partitioned(url, TOPIC, 3)
    total = 2500
    async with mg.Client(url) as client:
        consumer = await client.subscribe(
            TOPIC, "s", initial_position=mg.InitialPosition.Earliest,
            batch_receive_policy=mg.ConsumerBatchReceivePolicy(max_num_message=500, timeout_ms=1000),
        )  # fmt: skip
        producer = await client.create_producer(TOPIC, batching_max_messages=100)
        await asyncio.gather(*(
            producer.send_async(b"%d" % i, None, partition_key=f"k{i % 17}") for i in range(total)
        ))  # fmt: skip
        got: list[mg.Message] = []
        batches = 0
        deadline = time.monotonic() + 60
        while len(got) < total and time.monotonic() < deadline:
            batch = await consumer.batch_receive()
            assert len(batch) <= 500
            batches += 1
            got += batch
            for msg in batch:
                await consumer.acknowledge(msg)
        await consumer.close()  # sends the pending acks
    values = [int(m.data()) for m in got]
    assert sorted(values) == list(range(total))  # each once
    assert {m.topic_name() for m in got} == {f"{TOPIC}-partition-{i}" for i in range(3)}
    for partition in range(3):  # order holds per partition
        ids = [m.message_id() for m in got if m.topic_name() == f"{TOPIC}-partition-{partition}"]
        assert ids == sorted(ids, key=lambda mid: (mid.ledger_id(), mid.entry_id(), mid.batch_index()))
    assert batches < total // 50  # batches, not one message a call

    leftover, fresh = await asyncio.to_thread(drain_blocking, url, 30)
    assert leftover == []  # nothing acknowledged came back
    assert sorted(m.data() for m in fresh) == sorted(b"late-%d" % i for i in range(30))
