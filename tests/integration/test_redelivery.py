"""Negative acks and redelivery counts across a broker SIGKILL, and cursor persistence
across a broker restart, on real processes."""

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

QUORUM = dict(ensemble_size=2, write_quorum=2, ack_quorum=2)
# A killed broker's topics move once its ZooKeeper session is gone: a short session (the
# default is 5 s) makes that wait short; what is checked does not depend on its length.
KILLED_BROKER = dict(zk_session_timeout_s=2.0, **QUORUM)


async def owner_of(address: str, topic: str) -> str:
    async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        return (await pb_grpc.BrokerStub(channel).Lookup(pb.LookupRequest(topic=topic), timeout=10)).broker_address


async def test_nacked_message_returns_after_the_delay_with_a_count_that_survives_broker_sigkill(bookie_factory, broker_factory):
    brokers = [broker_factory.create(**KILLED_BROKER) for _ in range(2)]
    start_all([bookie_factory.create(), bookie_factory.create(), *brokers])  # start-ups overlap
    topic = "persistent://public/default/nacks"
    delay_ms = 1000
    async with mg.Client(",".join(b.address for b in brokers)) as client:
        consumer = await client.subscribe(
            topic, "s", consumer_type=mg.ConsumerType.Shared, initial_position=mg.InitialPosition.Earliest,
            negative_ack_redelivery_delay_ms=delay_ms,
        )
        producer = await client.create_producer(topic)
        await producer.send(b"again and again")
        msg = await consumer.receive(timeout_millis=10_000)
        assert msg.redelivery_count() == 0
        for expected in (1, 2):
            nacked_at = time.monotonic()
            await consumer.negative_acknowledge(msg)
            msg = await consumer.receive(timeout_millis=10_000)
            waited = time.monotonic() - nacked_at
            assert delay_ms / 1000 <= waited <= delay_ms / 1000 + 1.0, waited
            assert msg.data() == b"again and again" and msg.redelivery_count() == expected

        # With a backoff: min * multiplier ** redelivery_count, capped (300, 600, 700 ms).
        backoff = mg.MultiplierRedeliveryBackoff(min_delay_ms=300, max_delay_ms=700, multiplier=2.0)
        backed_off = await client.subscribe(
            topic, "backoff", consumer_type=mg.ConsumerType.Shared, initial_position=mg.InitialPosition.Earliest,
            negative_ack_redelivery_delay_ms=60_000, negative_ack_redelivery_backoff=backoff,
        )
        other = await backed_off.receive(timeout_millis=10_000)
        for count in range(3):
            assert other.redelivery_count() == count
            nacked_at = time.monotonic()
            await backed_off.negative_acknowledge(other)
            other = await backed_off.receive(timeout_millis=10_000)
            waited = time.monotonic() - nacked_at
            assert backoff.next(count) / 1000 <= waited <= backoff.next(count) / 1000 + 0.5, (count, waited)
        assert [backoff.next(c) for c in range(3)] == [300, 600, 700]
        await backed_off.acknowledge(other)
        await backed_off.close()

        owner = await owner_of(brokers[0].address, topic)
        victim = next(b for b in brokers if b.address == owner)
        await asyncio.to_thread(victim.kill)
        # The new owner delivers it again (a crash is not counted) with the stored count.
        msg = await consumer.receive(timeout_millis=30_000)
        assert msg.redelivery_count() == 2
        await consumer.negative_acknowledge(msg)
        msg = await consumer.receive(timeout_millis=10_000)
        assert msg.redelivery_count() == 3  # continues from where it was, not from 0
        await consumer.acknowledge(msg)
        with pytest.raises(mg.Timeout):
            await consumer.receive(timeout_millis=2 * delay_ms)


async def test_after_a_broker_restart_only_acks_of_the_last_persist_interval_come_back(bookie_factory, broker_factory):
    interval = 1.5
    broker = broker_factory.create(cursor_persist_interval_s=interval, **KILLED_BROKER)
    start_all([bookie_factory.create(), bookie_factory.create(), broker])
    topic = "persistent://public/default/cursor-restart"
    total = 4000
    acked_at: dict[int, float] = {}
    async with mg.Client(broker.address) as client:
        consumer = await client.subscribe(topic, "s", initial_position=mg.InitialPosition.Earliest, consumer_type=mg.ConsumerType.Shared)
        producer = await client.create_producer(topic, batching_max_messages=10, block_if_queue_full=True)
        for n in range(total):
            await producer.enqueue(str(n).encode())
        await producer.flush()

        async def ack_steadily() -> None:
            # Every message but each 7th, about 1,000 a second: batches end up partly acked.
            for _ in range(total):
                msg = await consumer.receive(timeout_millis=10_000)
                n = int(msg.data())
                if n % 7:
                    await consumer.acknowledge(msg)
                    acked_at[n] = time.monotonic()
                await asyncio.sleep(0.001)

        acking = asyncio.create_task(ack_steadily())
        while len(acked_at) < total // 2:
            await asyncio.sleep(0.01)
        acking.cancel()
        await asyncio.gather(acking, return_exceptions=True)
        killed_at = time.monotonic()
        await asyncio.to_thread(broker.kill)
        await asyncio.to_thread(broker.start)

        # The restarted broker serves the topic once its previous session has expired
        # (up to its 2 s ZooKeeper session timeout): wait for redeliveries that long.
        again: set[int] = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                msg = await consumer.receive(timeout_millis=3000 if consumer.is_connected() and again else 15_000)
            except mg.Timeout:
                break
            again.add(int(msg.data()))
            await consumer.acknowledge(msg)

    acked_before_kill = {n for n, t in acked_at.items() if t <= killed_at}
    unacked = set(range(total)) - acked_before_kill
    assert again >= unacked  # nothing unacknowledged is lost
    late = {n: killed_at - acked_at[n] for n in again & acked_before_kill}
    # Acks the client sends within its 100 ms ack-grouping window count as "within the interval".
    assert all(age <= interval + 0.2 for age in late.values()), sorted(late.values())[-5:]
    assert len(acked_before_kill - again) > total // 3  # older acks (batch-index ones too) held


async def test_ack_timeout_redelivers_what_was_not_acknowledged_in_time(bookie_factory, broker_factory):
    broker = broker_factory.create(ensemble_size=1, write_quorum=1, ack_quorum=1)
    start_all([bookie_factory.create(), broker])
    topic = "persistent://public/default/ack-timeout"
    async with mg.Client(broker.address) as client:
        consumer = await client.subscribe(
            topic, "s", consumer_type=mg.ConsumerType.Shared, initial_position=mg.InitialPosition.Earliest,
            unacked_messages_timeout_ms=1000,
        )
        producer = await client.create_producer(topic, batching_enabled=False)
        for n in range(3):
            await producer.send(b"%d" % n)
        got = [await consumer.receive(timeout_millis=10_000) for _ in range(3)]
        received_at = time.monotonic()
        await consumer.acknowledge(got[1])  # only the middle one in time
        again = [await consumer.receive(timeout_millis=10_000) for _ in range(2)]
        assert time.monotonic() - received_at >= 1.0
        assert sorted(m.data() for m in again) == [b"0", b"2"]
        assert [m.redelivery_count() for m in again] == [1, 1]
        for m in again:
            await consumer.acknowledge(m)
        with pytest.raises(mg.Timeout):
            await consumer.receive(timeout_millis=2500)
