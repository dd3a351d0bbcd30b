"""Delayed delivery on real processes: real delays of 1-3 s, and a delayed message that
outlives the broker holding it (SIGKILL) is delivered on time by the new owner.

The tests share 2 bookies and a broker; the failover test starts the broker it kills and
gives it a namespace of its own, so the shared broker is the new owner."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import grpc
import pytest

import magnetar.asyncio as mg
from magnetar.common.grpcutil import CHANNEL_OPTIONS
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.proto.v1 import broker_pb2_grpc as pb_grpc
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.processes import start_all

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUORUM = dict(ensemble_size=2, write_quorum=2, ack_quorum=2)
# The broker the failover test kills: a 2 s session (not the default 5 s) expires sooner,
# so the clients' reconnect backoff (0.1 s doubling) finds the new owner on its try at
# 3.1 s instead of 6.3 s after the kill, and a shorter delay still outlives the failover.
KILLED_BROKER = dict(zk_session_timeout_s=2.0, **QUORUM)


async def arrivals(consumer, count: int, since: float) -> dict[bytes, float]:
    out = {}
    for _ in range(count):
        msg = await consumer.receive(timeout_millis=30_000)
        out[msg.data()] = time.monotonic() - since
        await consumer.acknowledge(msg)
    return out


@pytest.fixture(scope="module")
def broker(module_bookie_factory, module_broker_factory):
    broker = module_broker_factory.create(**QUORUM)
    start_all([module_bookie_factory.create(), module_bookie_factory.create(), broker])  # start-ups overlap
    return broker


async def test_delayed_messages_arrive_on_time_on_shared_and_at_once_on_exclusive(broker):
    topic = "persistent://public/default/delayed"
    async with mg.Client(broker.address) as client:
        shared = await client.subscribe(topic, "shared", consumer_type=mg.ConsumerType.Shared)
        exclusive = await client.subscribe(topic, "exclusive", consumer_type=mg.ConsumerType.Exclusive)
        producer = await client.create_producer(topic)  # batching on: delayed ones go alone
        start = time.monotonic()
        for seconds in (3, 1, 2):
            await producer.send(b"%ds" % seconds, deliver_after=timedelta(seconds=seconds))
        await producer.send(b"now")
        await producer.send(b"at", deliver_at=int(time.time() * 1000) + 1500)
        got, at_once = await asyncio.gather(arrivals(shared, 5, start), arrivals(exclusive, 5, start))
        assert got[b"now"] < 1.0
        for name, delay in ((b"1s", 1.0), (b"2s", 2.0), (b"3s", 3.0), (b"at", 1.5)):
            assert delay <= got[name] <= delay + 1.0, (name, got)
        assert sorted(got, key=got.__getitem__) == [b"now", b"1s", b"at", b"2s", b"3s"]
        assert max(at_once.values()) < 1.0  # Exclusive ignores delays, as in Pulsar


async def test_a_delayed_message_survives_a_broker_sigkill_and_comes_on_time(broker, module_broker_factory):
    holder = module_broker_factory(**KILLED_BROKER)
    brokers = [broker, holder]
    namespace = await new_namespace(broker.address, "delayed")
    topic = f"persistent://{namespace}/delayed-failover"
    # Asked first, the new broker takes the topic's bundle: the broker killed is the holder.
    async with grpc.aio.insecure_channel(holder.address, options=CHANNEL_OPTIONS) as channel:
        owner = (await pb_grpc.BrokerStub(channel).Lookup(pb.LookupRequest(topic=topic), timeout=10)).broker_address
    assert owner == holder.address
    delay = 7.0
    async with mg.Client(",".join(b.address for b in brokers)) as client:
        consumer = await client.subscribe(topic, "s", consumer_type=mg.ConsumerType.Shared)
        producer = await client.create_producer(topic)
        start = time.monotonic()
        await producer.send(b"later", deliver_after=timedelta(seconds=delay))
        await asyncio.to_thread(holder.kill)
        with pytest.raises(mg.Timeout):  # never early, also not from the new owner
            await consumer.receive(timeout_millis=int((delay - 0.5 - (time.monotonic() - start)) * 1000))
        msg = await consumer.receive(timeout_millis=30_000)
        waited = time.monotonic() - start
        assert msg.data() == b"later" and delay <= waited <= delay + 1.0, waited
