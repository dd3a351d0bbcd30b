"""Subscription types on real processes: ZooKeeper, bookies, a broker, and consumers in
processes of their own that are SIGKILLed (magnetar.testing.consumer_process)."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict

import pytest

import magnetar.asyncio as mg
from magnetar.testing.consumer_process import ConsumerProcess, wait_until
from magnetar.testing.processes import start_all

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUORUM = dict(ensemble_size=2, write_quorum=2, ack_quorum=2)


@pytest.fixture(scope="module")
def url(module_bookie_factory, module_broker_factory) -> str:
    """One broker for the module's tests (each on topics of its own)."""
    broker = module_broker_factory.create(**QUORUM)
    start_all([module_bookie_factory.create(), module_bookie_factory.create(), broker])  # start-ups overlap
    return broker.address


async def produce(url: str, topic: str, values, key=None, batching: bool = True, pace_every: int = 0) -> None:
    async with mg.Client(url) as client:
        producer = await client.create_producer(
            topic, batching_enabled=batching, batching_max_messages=20, block_if_queue_full=True,
        )
        for n in values:
            await producer.enqueue(str(n).encode(), partition_key=key(n) if key else None)
            if pace_every and n % pace_every == pace_every - 1:
                await asyncio.sleep(0.02)
        await producer.flush()
        await producer.close()


def first_occurrences(items: list[int]) -> list[int]:
    seen: set[int] = set()
    return [i for i in items if not (i in seen or seen.add(i))]  # type: ignore[func-returns-value]


async def test_exclusive_refuses_a_second_consumer(url):
    async with mg.Client(url) as client:
        await client.subscribe("excl", "s", consumer_type=mg.ConsumerType.Exclusive)
        with pytest.raises(mg.ConsumerBusy, match="already has a consumer"):
            await client.subscribe("excl", "s", consumer_type=mg.ConsumerType.Exclusive)
        with pytest.raises(mg.ConsumerBusy, match="is Exclusive"):
            await client.subscribe("excl", "s", consumer_type=mg.ConsumerType.Shared)


async def test_failover_switches_on_sigkill_of_the_active_consumer_without_loss_in_order(url):
    topic = "failover-kill"
    total = 3000
    a = ConsumerProcess(url, topic, "s", "Failover", "a", "--ack-delay-ms", "1")
    b = ConsumerProcess(url, topic, "s", "Failover", "b")
    try:
        a.wait_ready()
        b.wait_ready()
        await produce(url, topic, range(total // 2))
        await asyncio.to_thread(wait_until, lambda: len(a.messages) >= total // 4, 30, "the active consumer to receive")
        assert b.messages == []  # b is standby while a ("a" < "b") is active
        await asyncio.to_thread(a.kill)
        await produce(url, topic, range(total // 2, total))
        await asyncio.to_thread(wait_until, lambda: len(set(a.values()) | set(b.values())) >= total, 60, "every message")
    finally:
        a.kill()
        b.stop()
    assert set(a.values()) | set(b.values()) == set(range(total))  # nothing lost
    assert a.values() == sorted(a.values()) and b.values() == sorted(set(b.values()))  # each in order
    assert b.values()[0] <= max(a.values()) + 1  # b starts where a stopped acknowledging
    redelivered = [m for m in b.messages if int(m["v"]) <= max(a.values())]
    assert redelivered and all(m["r"] == 1 for m in redelivered)


async def test_shared_spreads_10000_messages_over_4_consumers_and_redelivers_a_killed_ones(url):
    topic = "shared-spread"
    consumers = [ConsumerProcess(url, topic, "s", "Shared", f"c{i}") for i in range(4)]
    slow = None
    try:
        for c in consumers:
            c.wait_ready()
        await produce(url, topic, range(10_000))
        await asyncio.to_thread(wait_until, lambda: sum(len(c.messages) for c in consumers) >= 10_000, 60, "10,000 messages")
        counts = [len(c.messages) for c in consumers]
        assert sum(counts) == 10_000 and set().union(*(c.values() for c in consumers)) == set(range(10_000)), counts
        assert all(0.15 <= n / 10_000 <= 0.35 for n in counts), counts

        # A slow consumer (acks a second after printing) is killed holding unacked messages.
        slow = ConsumerProcess(url, topic, "s", "Shared", "slow", "--ack-delay-ms", "1000")
        slow.wait_ready()
        before = [len(c.messages) for c in consumers]
        await produce(url, topic, range(10_000, 12_000), pace_every=100)
        await asyncio.to_thread(wait_until, lambda: len(slow.messages) >= 2, 30, "the slow consumer to receive")
        await asyncio.to_thread(slow.kill)
        unacked = int(slow.messages[-1]["v"])  # printed, then killed within its ack delay
        everyone = lambda: set(slow.values()).union(*(c.values() for c in consumers))  # noqa: E731
        await asyncio.to_thread(wait_until, lambda: everyone() >= set(range(12_000)), 60, "all 12,000 messages")
        later = [m for c, n in zip(consumers, before, strict=True) for m in c.messages[n:]]
        again = {int(m["v"]) for m in later if m["r"] >= 1}
        assert unacked in again
        assert again <= set(range(10_000, 12_000))
    finally:
        for c in consumers:
            c.stop()
        if slow is not None:
            slow.kill()


async def test_shared_with_200_consumers_on_one_subscription(url):
    topic = "shared-200"
    async with mg.Client(url) as client:
        consumers = [
            await client.subscribe(topic, "s", consumer_type=mg.ConsumerType.Shared, receiver_queue_size=10, consumer_name=f"c{i:03}")
            for i in range(200)
        ]
        await produce(url, topic, range(2000), batching=False)
        got: Counter[int] = Counter()
        per_consumer = []

        async def drain(consumer) -> None:
            n = 0
            while True:
                try:
                    msg = await consumer.receive(timeout_millis=3000)
                except mg.Timeout:
                    break
                got[int(msg.data())] += 1
                n += 1
                await consumer.acknowledge(msg)
            per_consumer.append(n)

        await asyncio.gather(*(drain(c) for c in consumers))
    assert set(got) == set(range(2000)) and set(got.values()) == {1}
    assert sum(1 for n in per_consumer if n) >= 150  # spread over (nearly) all of them


async def test_key_shared_keeps_per_key_order_for_1000_keys_while_consumers_join_and_leave(url):
    topic = "key-shared"
    total = 20_000
    key = lambda n: f"key-{n % 1000}"  # noqa: E731
    procs = [ConsumerProcess(url, topic, "s", "KeyShared", name) for name in ("k1", "k2")]
    try:
        for p in procs:
            p.wait_ready()
        producing = asyncio.create_task(produce(url, topic, range(total), key=key, pace_every=200))
        await asyncio.to_thread(wait_until, lambda: sum(len(p.messages) for p in procs) >= total // 5, 60, "a fifth")
        procs.append(ConsumerProcess(url, topic, "s", "KeyShared", "k3"))  # joins
        procs[-1].wait_ready()
        await asyncio.to_thread(wait_until, lambda: sum(len(p.messages) for p in procs) >= total // 2, 60, "half")
        await asyncio.to_thread(procs[0].kill)  # leaves, holding unacked messages
        procs.append(ConsumerProcess(url, topic, "s", "KeyShared", "k4"))  # joins
        procs[-1].wait_ready()
        await producing
        everyone = lambda: set().union(*(p.values() for p in procs))  # noqa: E731
        try:
            await asyncio.to_thread(wait_until, lambda: everyone() >= set(range(total)), 90, "every message")
        except TimeoutError:
            missing = sorted(set(range(total)) - everyone())
            raise AssertionError(f"{len(missing)} missing, e.g. {missing[:20]}; per consumer {[len(p.messages) for p in procs]}") from None
    finally:
        for p in procs:
            p.stop()
    assert everyone() == set(range(total))
    assert all(p.messages for p in procs[1:])
    # Per key, across consumers, in the order consumers printed them: first occurrences ascend.
    by_key: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for p in procs:
        per_key: dict[str, list[int]] = defaultdict(list)
        for m in p.messages:
            per_key[m["k"]].append(int(m["v"]))
            by_key[m["k"]].append((m["t"], int(m["v"])))
        for values in per_key.values():  # each consumer sees each of its keys in order
            assert first_occurrences(values) == sorted(set(values))
    assert len(by_key) == 1000
    for k, seen in by_key.items():
        ordered = first_occurrences([v for _, v in sorted(seen)])
        assert ordered == sorted(ordered), f"{k} out of order across consumers"
