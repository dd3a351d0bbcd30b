"""Broker failover: SIGKILL the broker that owns a topic while a producer sends and an
Exclusive consumer receives; the other broker takes over, nothing acknowledged is lost,
order is kept, what comes again is flagged as a redelivery, and deduplication keeps resends
out of the topic."""

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
# The survivor takes the topic over once the killed owner's ZooKeeper session is gone: a
# short session (the default is 5 s) shortens that wait. The default session's recovery
# bound is test_handle_recovery.py's.
KILLED_BROKER = dict(zk_session_timeout_s=2.0, **QUORUM)
TOTAL = 3000


async def owner_of(address: str, topic: str) -> str:
    async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        return (await pb_grpc.BrokerStub(channel).Lookup(pb.LookupRequest(topic=topic), timeout=10)).broker_address


def first_occurrences(items: list[int]) -> list[int]:
    seen: set[int] = set()
    out = []
    for i in items:
        if i not in seen:
            seen.add(i)
            out.append(i)
    return out


async def test_owner_killed_other_broker_takes_over(bookie_factory, broker_factory):
    brokers = [broker_factory.create(**KILLED_BROKER) for _ in range(2)]
    start_all([*(bookie_factory.create() for _ in range(3)), *brokers])  # start-ups overlap
    url = ",".join(b.address for b in brokers)
    topic = "persistent://public/default/failover"
    acked: list[int] = []
    ack_times: list[float] = []
    received: list[int] = []
    counts: list[int] = []  # each delivery's redelivery count
    async with mg.Client(url) as client:
        consumer = await client.subscribe(topic, "sub", initial_position=mg.InitialPosition.Earliest)
        producer = await client.create_producer(topic, producer_name="failover-producer", block_if_queue_full=True, send_timeout_millis=60_000)

        def on_ack(i: int):
            def callback(result, msg_id):
                if msg_id is not None:
                    acked.append(i)
                    ack_times.append(time.monotonic())
            return callback

        async def produce() -> None:
            for i in range(TOTAL):
                await producer.enqueue(b"%06d" % i, on_ack(i))
                if i % 50 == 49:
                    await asyncio.sleep(0.02)  # a steady stream, about 2,500 msgs/s
            await producer.flush()

        async def consume() -> None:
            while len(set(received)) < TOTAL:
                msg = await consumer.receive(timeout_millis=60_000)
                received.append(int(msg.data()))
                counts.append(msg.redelivery_count())
                await consumer.acknowledge(msg)

        producing = asyncio.create_task(produce())
        consuming = asyncio.create_task(consume())
        while len(acked) < TOTAL // 3:
            await asyncio.sleep(0.01)
        owner = await owner_of(brokers[0].address, topic)
        victim = next(b for b in brokers if b.address == owner)
        survivor = next(b for b in brokers if b is not victim)
        acked_before = len(acked)
        killed_at = time.monotonic()
        await asyncio.to_thread(victim.kill)
        await asyncio.wait_for(producing, 90)
        await asyncio.wait_for(consuming, 90)
        resumed = next(t for t, n in zip(ack_times, range(len(ack_times)), strict=True) if n >= acked_before and t > killed_at)
        assert resumed - killed_at <= 10, f"the topic was unavailable for {resumed - killed_at:.1f} s"
        assert await owner_of(survivor.address, topic) == survivor.address

    assert sorted(set(acked)) == list(range(TOTAL))  # every send was acknowledged
    assert set(received) >= set(acked)  # and every acknowledged message consumed
    assert first_occurrences(received) == sorted(set(received))  # in order (redeliveries only repeat)
    seen: set[int] = set()
    for value, count in zip(received, counts, strict=True):  # a message seen again is flagged so
        assert value not in seen or count >= 1, f"message {value} came again with redelivery count 0"
        seen.add(value)

    async with mg.Client(survivor.address) as client:  # the topic itself holds each message once
        check = await client.subscribe(topic, "check", initial_position=mg.InitialPosition.Earliest)
        stored = []
        for _ in range(TOTAL):
            stored.append(int((await check.receive(timeout_millis=30_000)).data()))
        assert stored == list(range(TOTAL))
        with pytest.raises(mg.Timeout):
            await check.receive(timeout_millis=1000)
