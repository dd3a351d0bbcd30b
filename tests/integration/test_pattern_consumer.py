"""Pattern subscriptions on real processes (the run's shared cluster: 2 bookies, a
broker): a consumer of ``persistent://<ns>/orders-.*`` joins a topic created after it
subscribed, with nothing lost, leaves a deleted one, acks reach the right topics, and
bad patterns are refused. Each test has a namespace of its own."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Awaitable, Callable

import pytest

import magnetar
import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PERIOD_S = 1  # pattern_auto_discovery_period: short, so the test takes seconds


@pytest.fixture
def url(shared_cluster) -> str:  # type: ignore[no-untyped-def]
    return shared_cluster.broker.address


@pytest.fixture
async def namespace(url: str) -> str:
    ns = f"public/pattern-{uuid.uuid4().hex[:8]}"
    async with AdminClient(url) as admin:
        await admin.create_namespace(ns)
    return ns


async def _until(check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(0.1)


async def _backlog(admin: AdminClient, topic: str, subscription: str) -> int:
    total = 0
    for stats in await admin.partition_stats(topic):
        total += sum(s.backlog for s in stats.subscriptions if s.name == subscription)
    return total


async def _receive(consumer: mg.Consumer, n: int) -> list[mg.Message]:
    got = []
    for _ in range(n):
        msg = await consumer.receive(timeout_millis=15_000)
        got.append(msg)
        await consumer.acknowledge(msg)
    return got


async def test_a_pattern_consumer_joins_a_new_topic_with_nothing_lost_and_leaves_a_deleted_one(url, namespace):
    base = f"persistent://{namespace}"
    plain, parted, other, new = f"{base}/orders-a", f"{base}/orders-p", f"{base}/other", f"{base}/orders-new"
    async with AdminClient(url) as admin, mg.Client(url) as client:
        await admin.create_topic(parted, partitions=2)
        for topic in (plain, other):
            await admin.create_topic(topic)
        consumer = await client.subscribe(
            re.compile(f"{base}/orders-.*"), "s", consumer_type=mg.ConsumerType.Shared,
            pattern_auto_discovery_period=PERIOD_S,
        )  # from the latest message (the default): a topic found later is joined from its earliest
        assert consumer.topic() == f"{base}/orders-.*"
        assert sorted(consumer.topics()) == [plain, parted] and len(consumer.partitions) == 3

        sent: set[tuple[str, bytes]] = set()
        for topic in (plain, parted, other):
            producer = await client.create_producer(topic, batching_enabled=False)
            for i in range(10):
                await producer.send(b"%d" % i, partition_key=f"k{i}")
                sent.add((topic, b"%d" % i))
            await producer.close()
        # A topic created after the consumer subscribed, written at once (before the
        # consumer can have found it): every message arrives.
        to_new = await client.create_producer(new, batching_max_messages=10)
        await asyncio.gather(*(to_new.send_async(b"%d" % i, None) for i in range(50)))
        sent |= {(new, b"%d" % i) for i in range(50)}
        expected = {(t, v) for t, v in sent if t != other}

        got = await _receive(consumer, len(expected))
        base_of = {m.topic_name(): m.topic_name().split("-partition-")[0] for m in got}
        assert {(base_of[m.topic_name()], m.data()) for m in got} == expected  # every one, and only orders-*
        assert len(got) == len(expected)  # none twice
        assert sorted(consumer.topics()) == sorted([plain, parted, new])
        with pytest.raises(mg.Timeout):
            await consumer.receive(timeout_millis=300)

        # The acks went to each message's topic: no backlog left on any.
        for topic in (plain, parted, new):
            await _until(lambda t=topic: _zero(admin, t), f"backlog of {topic} 0")
        assert await _backlog(admin, other, "s") == 0 and not (await admin.topic_stats(other)).subscriptions

        # A deleted topic is left; the others keep flowing. A message of it received
        # and not acknowledged yet is acknowledged without error (nothing to do).
        producer = await client.create_producer(plain)
        await producer.send(b"last")
        await producer.close()
        last = await consumer.receive(timeout_millis=15_000)
        assert (last.topic_name(), last.data()) == (plain, b"last")
        await admin.delete_topic(plain, force=True)

        async def left() -> bool:
            return plain not in consumer.topics()

        await _until(left, f"{plain} left")
        await consumer.acknowledge(last)
        await consumer.negative_acknowledge(last)
        assert len(consumer.partitions) == 3  # orders-p's two, orders-new
        await to_new.send(b"after")
        msg = await consumer.receive(timeout_millis=15_000)
        assert (msg.topic_name(), msg.data()) == (new, b"after")
        await consumer.acknowledge(msg)
        with pytest.raises(mg.Timeout):  # the deleted topic did not end the consumer (no TopicNotFound)
            await consumer.receive(timeout_millis=300)
        await consumer.close()


async def test_a_pattern_consumer_recovers_from_a_broker_restart_and_still_discovers(url, namespace, shared_cluster):
    base = f"persistent://{namespace}"
    old, new = f"{base}/orders-a", f"{base}/orders-new"
    async with AdminClient(url) as admin, mg.Client(url) as client:
        await admin.create_topic(old)
        consumer = await client.subscribe(re.compile(f"{base}/orders-.*"), "s", pattern_auto_discovery_period=PERIOD_S)
        to_old = await client.create_producer(old, batching_enabled=False)
        for i in range(5):
            await to_old.send(b"before-%d" % i)
        seen = {(m.topic_name(), m.data()) for m in await _receive(consumer, 5)}

        await asyncio.to_thread(shared_cluster.broker.restart, hard=True)  # SIGKILL, then the same ports

        for i in range(5):
            await to_old.send(b"after-%d" % i)
        await admin.create_topic(new, partitions=2)  # found later: joined as its partitions
        to_new = await client.create_producer(new, batching_enabled=False)
        for i in range(20):
            await to_new.send(b"new-%d" % i, partition_key=f"k{i}")
        sent = {(old, b"before-%d" % i) for i in range(5)} | {(old, b"after-%d" % i) for i in range(5)}
        sent |= {(new, b"new-%d" % i) for i in range(20)}
        while seen != sent:  # acks not sent before the kill come again: the set absorbs them
            msg = await consumer.receive(timeout_millis=20_000)
            got = (msg.topic_name().split("-partition-")[0], msg.data())
            assert got in sent
            seen.add(got)
            await consumer.acknowledge(msg)
        assert consumer.topics() == [old, new]  # in the order found
        assert sorted(p.topic for p in consumer.partitions) == [old, f"{new}-partition-0", f"{new}-partition-1"]
        for topic in (old, new):
            await _until(lambda t=topic: _zero(admin, t), f"backlog of {topic} 0", timeout_s=20)
        await consumer.close()


async def _zero(admin: AdminClient, topic: str) -> bool:
    return await _backlog(admin, topic, "s") == 0


async def test_bad_patterns_are_refused_and_subscribe_nothing(url, namespace):
    base = f"persistent://{namespace}"
    async with AdminClient(url) as admin, mg.Client(url) as client:
        await admin.create_topic(f"{base}/orders-a")
        with pytest.raises(mg.InvalidTopicName, match="one namespace"):
            await client.subscribe(re.compile("persistent://public/.*/orders-a"), "s")
        with pytest.raises(mg.InvalidArgument, match="not a regular expression"):
            await client.subscribe(f"{base}/orders-[", "s", is_pattern_topic=True)
        with pytest.raises(mg.InvalidArgument, match="a list of topics does not support"):
            await client.subscribe([f"{base}/orders-a"], "s", is_pattern_topic=True)
        with pytest.raises(magnetar.NamespaceNotFound):
            await client.subscribe(re.compile(f"persistent://public/no-such-{uuid.uuid4().hex[:6]}/orders-.*"), "s")
        assert not (await admin.topic_stats(f"{base}/orders-a")).subscriptions  # nothing was subscribed


def test_the_blocking_client_takes_a_compiled_pattern(url, namespace):
    base = f"persistent://{namespace}"
    with magnetar.Client(url) as client:
        consumer = client.subscribe(re.compile(f"{base}/orders-.*"), "s", pattern_auto_discovery_period=PERIOD_S)
        assert consumer.topics() == []  # nothing matches yet
        producer = client.create_producer(f"{base}/orders-b")
        producer.send(b"first")
        msg = consumer.receive(timeout_millis=15_000)
        assert (msg.topic_name(), msg.data()) == (f"{base}/orders-b", b"first")
        consumer.acknowledge(msg)
        consumer.close()
