"""Key_Shared with batching producers: our SDK's Default and KeyBased batching, and
pulsar-client's KeyBased batching through the Pulsar protocol door. Three consumers in
AUTO_SPLIT and in STICKY mode: keys spread over them, each key at one consumer, each key's
order kept, each message delivered once."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import pulsar
import pytest

import magnetar.asyncio as mg
from magnetar.common.keyhash import key_hash
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.pulsarclient import pulsar_client

pytestmark = pytest.mark.integration

KEYS = 12
COUNT = 240
# STICKY: three consumers with a third of the hash space each.
THIRDS = [(0, 21844), (21845, 43689), (43690, 65535)]


def _policy(mode: str, i: int) -> mg.ConsumerKeySharedPolicy:
    if mode == "sticky":
        return mg.ConsumerKeySharedPolicy(mg.KeySharedMode.Sticky, sticky_ranges=[THIRDS[i]])
    return mg.ConsumerKeySharedPolicy(mg.KeySharedMode.AutoSplit)


async def _consumers(client: mg.Client, topic: str, mode: str) -> list:
    return [
        await client.subscribe(topic, "ks", consumer_type=mg.ConsumerType.KeyShared, consumer_name=f"c{i}",
                               receiver_queue_size=20, key_shared_policy=_policy(mode, i))  # fmt: skip
        for i in range(3)
    ]


async def _drain(consumers: list, total: int, timeout_s: float = 15.0) -> list[tuple[int, str, int]]:
    """(consumer index, key, number) of every message the consumers get, each acknowledged,
    until ``total`` arrived and then nothing more for a while."""
    got: list[tuple[int, str, int]] = []
    deadline = time.monotonic() + timeout_s

    async def take(i: int, consumer) -> None:
        while time.monotonic() < deadline:
            try:
                msg = await consumer.receive(timeout_millis=500)
            except mg.Timeout:
                if len(got) >= total:
                    return
                continue
            got.append((i, msg.partition_key(), int(msg.data().decode().split("-")[1])))
            await consumer.acknowledge(msg)

    await asyncio.gather(*(take(i, c) for i, c in enumerate(consumers)))
    return got


def _check(got: list[tuple[int, str, int]], mode: str) -> None:
    numbers = sorted(n for _, _, n in got)
    missing = sorted(set(range(COUNT)) - set(numbers))
    assert numbers == list(range(COUNT)), f"each message once; {len(got)} got, missing {missing}"
    by_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for i, key, n in got:
        by_key[key].append((i, n))
    assert sorted(by_key) == sorted(f"key{k}" for k in range(KEYS))
    owners = {}
    for key, seen in by_key.items():
        consumers = {i for i, _ in seen}
        assert len(consumers) == 1, f"{key} went to consumers {consumers}"
        owners[key] = consumers.pop()
        order = [n for _, n in seen]
        assert order == sorted(order), f"{key} out of order: {order}"
    if mode == "sticky":  # the owner is the consumer whose range holds the key's hash
        for key, owner in owners.items():
            start, end = THIRDS[owner]
            assert start <= key_hash(key) % 65536 <= end, key
    # 12 keys over 3 consumers: more than one of them has keys.
    assert len(set(owners.values())) >= 2, owners


async def _topic(cluster, name: str) -> str:
    return f"persistent://{await new_namespace(cluster.broker.address, 'keybatch')}/{name}"


@pytest.mark.parametrize("mode", ["auto_split", "sticky"])
@pytest.mark.parametrize("batching_type", ["Default", "KeyBased"])
async def test_sdk_batching_producer_key_shared(shared_cluster, batching_type: str, mode: str) -> None:
    topic = await _topic(shared_cluster, f"sdk-{batching_type}-{mode}")
    async with mg.Client(shared_cluster.broker.address) as client:
        consumers = await _consumers(client, topic, mode)
        producer = await client.create_producer(
            topic, batching_type=mg.BatchingType[batching_type], batching_max_messages=20,
            batching_max_publish_delay_ms=20,
        )  # fmt: skip
        futures = [
            await producer.enqueue(f"m-{n}".encode(), partition_key=f"key{n % KEYS}") for n in range(COUNT)
        ]
        await producer.flush()
        ids = [await f for f in futures]
        got = await _drain(consumers, COUNT)
    _check(got, mode)
    entries: dict[tuple[int, int], set[str]] = defaultdict(set)
    for n, mid in enumerate(ids):
        assert mid.batch_index() >= 0  # batched
        entries[(mid.ledger_id(), mid.entry_id())].add(f"key{n % KEYS}")
    if batching_type == "KeyBased":
        assert all(len(keys) == 1 for keys in entries.values())  # one key per entry
    else:
        assert any(len(keys) > 1 for keys in entries.values())  # keys mixed in entries


def _pulsar_produce(url: str, topic: str) -> list[tuple[int, int, int]]:
    client = pulsar_client(url, operation_timeout_seconds=10)
    try:
        producer = client.create_producer(
            topic, batching_enabled=True, batching_type=pulsar.BatchingType.KeyBased, batching_max_messages=20,
            batching_max_publish_delay_ms=20,
        )  # fmt: skip
        ids: list = [None] * COUNT

        def sent(n: int):
            def done(res, mid) -> None:
                ids[n] = (res, mid)
            return done

        for n in range(COUNT):
            producer.send_async(f"m-{n}".encode(), sent(n), partition_key=f"key{n % KEYS}")
        producer.flush()
        deadline = time.monotonic() + 10
        while any(i is None for i in ids) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert all(res == pulsar.Result.Ok for res, _ in ids), ids
        producer.close()
        return [(mid.ledger_id(), mid.entry_id(), mid.batch_index()) for _, mid in ids]
    finally:
        client.close()


def _pulsar_consume(url: str, topic: str, mode: str) -> tuple[list[tuple[int, str, int]], list[tuple[int, int, int]]]:
    """pulsar-client's three Key_Shared consumers, then the producer: (consumer index, key,
    number) of every message they get, each acknowledged, until COUNT arrived and then
    nothing for a while; and the ids the producer got."""
    client = pulsar_client(url, operation_timeout_seconds=10)
    try:
        consumers = []
        for i in range(3):
            policy = (
                pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, sticky_ranges=[THIRDS[i]])
                if mode == "sticky" else pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.AutoSplit)
            )  # fmt: skip
            consumers.append(client.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared,
                                              consumer_name=f"c{i}", receiver_queue_size=20, key_shared_policy=policy))  # fmt: skip
        ids = _pulsar_produce(url, topic)
        got: list[tuple[int, str, int]] = []
        deadline = time.monotonic() + 15
        idle = 0
        while time.monotonic() < deadline and (len(got) < COUNT or idle < 3):
            idle += 1
            for i, c in enumerate(consumers):
                while True:
                    try:
                        msg = c.receive(100)
                    except pulsar.Timeout:
                        break
                    idle = 0
                    got.append((i, msg.partition_key(), int(msg.data().decode().split("-")[1])))
                    c.acknowledge(msg)
        return got, ids
    finally:
        client.close()


@pytest.mark.parametrize("readers", ["sdk", "pulsar-client"])
@pytest.mark.parametrize("mode", ["auto_split", "sticky"])
async def test_pulsar_client_key_based_producer_key_shared(shared_cluster, mode: str, readers: str) -> None:
    topic = await _topic(shared_cluster, f"pulsar-kb-{mode}-{readers}")
    url = f"pulsar://127.0.0.1:{shared_cluster.broker.protocol_port}"
    if readers == "pulsar-client":
        got, ids = await asyncio.to_thread(_pulsar_consume, url, topic, mode)
    else:
        async with mg.Client(shared_cluster.broker.address) as client:
            consumers = await _consumers(client, topic, mode)
            ids = await asyncio.to_thread(_pulsar_produce, url, topic)
            got = await _drain(consumers, COUNT)
    _check(got, mode)
    entries: dict[tuple[int, int], set[str]] = defaultdict(set)
    for n, (ledger, entry, index) in enumerate(ids):
        assert index >= 0
        entries[(ledger, entry)].add(f"key{n % KEYS}")
    assert all(len(keys) == 1 for keys in entries.values())  # pulsar-client batched per key
