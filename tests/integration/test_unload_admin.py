"""``magnetar admin topics unload``, ``namespaces bundles``, ``namespaces unload`` and
``topics delete --force`` against two real brokers, checked through what an SDK
consumer receives afterwards and through the bundle owners the brokers report."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
from magnetar.common.bundles import bundle_of, bundle_ranges
from magnetar.common.errors import Timeout
from magnetar.common.grpcutil import CHANNEL_OPTIONS
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.proto.v1 import broker_pb2_grpc as pb_grpc
from magnetar.testing.processes import start_all
from magnetar.testing.shell import cli_fails as fails
from magnetar.testing.shell import cli_ok as ok
from magnetar.testing.shell import warm_magnetar as magnetar

pytestmark = pytest.mark.integration

TOPIC = "persistent://public/default/unload-me"


async def roundtrip(producer, consumer, text: str) -> None:
    await producer.send(text.encode())
    msg = await consumer.receive(20_000)
    assert msg.data() == text.encode()
    await consumer.acknowledge(msg)


async def test_unload_topic_and_bundle_then_force_delete(bookie_factory, broker_factory) -> None:
    brokers = [broker_factory.create(), broker_factory.create()]
    start_all([bookie_factory.create(), bookie_factory.create(), *brokers])  # start-ups overlap
    url = ",".join(b.address for b in brokers)

    def admin(*args: str):
        return magnetar("admin", "--url", brokers[1].address, *args)

    async with mg.Client(url) as client:
        producer = await client.create_producer(TOPIC, batching_enabled=False)
        consumer = await client.subscribe(TOPIC, "s", consumer_type=mg.ConsumerType.Failover)
        await roundtrip(producer, consumer, "before")
        bundle = bundle_of(TOPIC)
        owners = json.loads(ok(admin("namespaces", "bundles", "public/default")))
        assert sorted(owners) == bundle_ranges(4)
        owner = owners[bundle]
        assert owner in {b.address for b in brokers}

        ok(admin("topics", "unload", TOPIC))  # goes to the owner whichever broker --url is
        await roundtrip(producer, consumer, "after topic unload")
        assert producer.partitions[0].reconnects >= 1 and consumer.partitions[0].reconnects >= 1
        assert json.loads(ok(admin("namespaces", "bundles", "public/default")))[bundle] == owner  # kept

        ok(admin("namespaces", "unload", "public/default", "--bundle", bundle))
        await roundtrip(producer, consumer, "after bundle unload")
        assert consumer.partitions[0].reconnects >= 2

        # A split (sent to brokers[1], done on the owner) keeps the topic served where it
        # is; the other broker reads the new boundaries through its watch.
        await roundtrip(producer, consumer, "before split")
        reconnects = consumer.partitions[0].reconnects
        for b in brokers:  # each broker has read (and keeps) the boundaries
            async with AdminClient(f"magnetar://{b.address}") as on_broker:
                assert [o.bundle for o in await on_broker.bundles("public/default")] == bundle_ranges(4)
        halves = ok(admin("namespaces", "split-bundle", "public/default", "-b", bundle)).split()
        assert len(halves) == 2 and halves[0].startswith(bundle[:10]) and halves[1].endswith(bundle[-10:])
        expected = sorted({*bundle_ranges(4), *halves} - {bundle})
        for b in brokers:
            async with AdminClient(f"magnetar://{b.address}") as on_broker:
                for _ in range(50):
                    shown = sorted(o.bundle for o in await on_broker.bundles("public/default"))
                    if shown == expected:
                        break
                    await asyncio.sleep(0.1)
            assert shown == expected, b.address
        await roundtrip(producer, consumer, "after split")
        assert consumer.partitions[0].reconnects == reconnects  # not disturbed
        # Commands that change nothing run at once (each starts a Python process).
        stats, bad_bundle, no_ns, no_topic, in_use = await asyncio.gather(*(asyncio.to_thread(admin, *args) for args in (
            ("topics", "stats", TOPIC),
            ("namespaces", "unload", "public/default", "--bundle", "0x1_0x2"),
            ("namespaces", "unload", "nosuch/ns"),
            ("topics", "unload", "persistent://public/default/never-made"),
            ("topics", "delete", TOPIC),
        )))  # fmt: skip
        stats = json.loads(ok(stats))
        assert stats["subscriptions"]["s"]["type"] == "Failover"
        assert stats["subscriptions"]["s"]["consumers"] == 1

        assert "not a bundle of public/default" in fails(bad_bundle)
        assert "does not exist" in fails(no_ns)
        assert "does not exist" in fails(no_topic)

        assert "connected producers or consumers" in fails(in_use)
        ok(admin("topics", "delete", "--force", TOPIC))
        with pytest.raises(mg.TopicNotFound, match="was deleted"):
            await consumer.receive(20_000)
        with pytest.raises(mg.TopicNotFound, match="was deleted"):
            for _ in range(100):  # the first sends may still be answered before the stream ends
                await producer.send(b"too late")
        assert TOPIC not in ok(admin("topics", "list", "public/default")).split()


# The load manager with every interval short, and a tiny network capacity so the
# brokers' usage is their topics' traffic (CPU and memory, which other processes on the
# machine move, weigh nothing): a broker carrying both busy bundles is far over the
# average, one carrying one is not.
BALANCED = dict(
    stats_interval_s=0.5, load_balancer_host_usage_check_interval_s=0.3, load_balancer_shedding_interval_s=0.5,
    load_balancer_history_resource_percentage=0.0, load_balancer_bundle_unload_min_throughput_threshold=0.0,
    load_balancer_override_broker_nic_speed_gbps=0.0001, load_balancer_cpu_resource_weight=0.0,
    load_balancer_memory_resource_weight=0.0, ensemble_size=2, write_quorum=2, ack_quorum=2,
)


async def test_overloaded_broker_sheds_a_bundle_to_the_idle_one_and_clients_follow(
    bookie_factory, broker_factory,
) -> None:
    busy, idle = broker_factory.create(**BALANCED), broker_factory.create(**BALANCED)
    start_all([bookie_factory.create(), bookie_factory.create(), busy, idle])
    names = (f"persistent://public/default/balanced-{i}" for i in range(100))
    by_bundle: dict[str, str] = {}
    for name in names:
        by_bundle.setdefault(bundle_of(name), name)
    topics = list(by_bundle.values())[:2]  # two bundles
    sent: dict[str, int] = dict.fromkeys(topics, 0)
    received: dict[str, list[int]] = {t: [] for t in topics}

    async with mg.Client(busy.address) as client:  # every lookup asks the busy broker
        # Nothing reported traffic yet: both bundles stay on the broker asked (as without a load manager).
        producers = {t: await client.create_producer(t, batching_enabled=False) for t in topics}
        consumers = {t: await client.subscribe(t, "s", consumer_type=mg.ConsumerType.Exclusive) for t in topics}
        assert {await owner_of(busy.address, t) for t in topics} == {busy.address}
        stop = asyncio.Event()

        async def produce(topic: str) -> None:
            while not stop.is_set():
                await producers[topic].send(sent[topic].to_bytes(4, "big") + bytes(96))
                sent[topic] += 1
                await asyncio.sleep(0.002)

        async def consume(topic: str) -> None:
            while not stop.is_set() or len(received[topic]) < sent[topic]:
                try:  # short waits: a consumer caught up when the producers stop gets nothing more
                    msg = await consumers[topic].receive(200)
                except Timeout:
                    continue
                received[topic].append(int.from_bytes(msg.data()[:4], "big"))
                await consumers[topic].acknowledge(msg)

        tasks = [asyncio.create_task(f(t)) for t in topics for f in (produce, consume)]
        owners: set[str] = set()
        deadline = asyncio.get_running_loop().time() + 30
        while asyncio.get_running_loop().time() < deadline:
            owners = {await owner_of(idle.address, t) for t in topics}
            if owners == {busy.address, idle.address}:
                break
            await asyncio.sleep(0.1)
        assert owners == {busy.address, idle.address}  # one bundle moved to the idle broker
        await asyncio.sleep(0.5)  # traffic flows on the moved bundle too
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
    for topic in topics:
        assert received[topic] == list(range(sent[topic])), topic  # nothing lost, nothing reordered
    moved = [t for t in topics if producers[t].partitions[0].reconnects]
    assert len(moved) == 1 and consumers[moved[0]].partitions[0].reconnects >= 1


async def owner_of(address: str, topic: str) -> str:
    async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        return (await pb_grpc.BrokerStub(channel).Lookup(pb.LookupRequest(topic=topic), timeout=10)).broker_address
