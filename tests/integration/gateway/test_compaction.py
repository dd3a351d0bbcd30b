"""Topic compaction on real processes: 100,000 messages over 1,000 keys with tombstones,
compacted through REST and ``magnetar admin``; a ``read_compacted`` reader sees exactly the
latest value of each live key; the owner broker SIGKILLed mid-compaction leaves the
previous view whole, and the compaction triggered again completes it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import httpx
import pytest
from gateway_support import GatewayCluster, eventually, unique

import magnetar.asyncio as mg
from magnetar.testing.pulsarclient import pulsar_client
from magnetar.testing.shell import WarmMagnetar

pytestmark = pytest.mark.integration

MESSAGES = 100_000
KEYS = 1_000
END = "~end"

# A test SIGKILLs its broker: the restarted broker serves its topics again once its previous
# ZooKeeper session is gone: 2 s after the kill here (the default session is 5 s).
OWN_BROKER_SETTINGS = {"zk_session_timeout_s": 2.0}


@pytest.fixture(scope="module")
def gateway_cluster(own_gateway_cluster: GatewayCluster) -> GatewayCluster:
    """A cluster of this module's own: a test SIGKILLs and restarts its broker."""
    return own_gateway_cluster


def value(i: int) -> bytes:
    """Message i's payload: empty (a tombstone) for every 7th round of keys divisible by
    3, and in the last round for keys divisible by 10 (they end removed)."""
    key, round_ = i % KEYS, i // KEYS
    if (round_ % 7 == 6 and key % 3 == 0) or (round_ == MESSAGES // KEYS - 1 and key % 10 == 0):
        return b""
    return b"%d" % i


def latest(pairs: list[tuple[str, bytes]]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for key, payload in pairs:
        if payload:
            out[key] = payload
        else:
            out.pop(key, None)
    return out


async def produce(client: mg.Client, topic: str, first: int, count: int) -> None:
    producer = await client.create_producer(
        topic, batching_enabled=True, batching_max_messages=100, batching_max_publish_delay_ms=5, block_if_queue_full=True
    )
    for i in range(first, first + count):
        await producer.enqueue(value(i), partition_key=f"k{i % KEYS}")
    await producer.flush()
    await producer.close()


async def read_compacted(client: mg.Client, topic: str) -> list[tuple[str, bytes]]:
    """What a compacted reader from earliest reads up to an end marker sent now (the
    markers of earlier reads, compacted too, are left out)."""
    marker = unique(END)
    producer = await client.create_producer(topic)
    await producer.send(b"end", partition_key=marker)
    await producer.close()
    reader = await client.create_reader(topic, mg.MessageId.earliest, is_read_compacted=True)
    out = []
    try:
        while True:
            msg = await reader.read_next(30_000)
            if msg.partition_key() == marker:
                return out
            if not msg.partition_key().startswith(END):
                out.append((msg.partition_key(), msg.data()))
    finally:
        await reader.close()


async def compaction_done(http: httpx.AsyncClient, path: str) -> dict:
    async def finished():
        status = (await http.get(f"{path}/compaction")).json()
        return status if status["status"] in ("SUCCESS", "ERROR") else None
    status = await eventually(finished, timeout=60)
    assert status, "the compaction did not finish"
    return status


def compaction_cursor(internal: dict) -> dict:
    return internal["cursors"]["__compaction"]


@pytest.fixture(scope="module")
def shell():
    with WarmMagnetar("admin") as warm:
        yield warm


async def test_a_compacted_reader_sees_the_latest_value_of_each_live_key(
    http: httpx.AsyncClient, gateway_cluster: GatewayCluster, shell: WarmMagnetar
):
    local = unique("compact")
    topic, path = f"persistent://public/default/{local}", f"/admin/v2/persistent/public/default/{local}"
    async with mg.Client(gateway_cluster.service_url) as client:
        started = time.monotonic()
        await produce(client, topic, 0, MESSAGES)
        produced_s = time.monotonic() - started
        expected = latest([(f"k{i % KEYS}", value(i)) for i in range(MESSAGES)])
        assert (await http.get(f"{path}/compaction")).json() == {"status": "NOT_RUN", "lastError": ""}
        started = time.monotonic()
        assert (await http.put(f"{path}/compaction")).status_code == 204
        assert (await compaction_done(http, path))["status"] == "SUCCESS"
        compacted_s = time.monotonic() - started
        got = await read_compacted(client, topic)
        assert len(got) == len(expected) == KEYS - KEYS // 10
        assert dict(got) == expected
        # A plain reader still sees every message: compaction removes nothing from the topic.
        reader = await client.create_reader(topic, mg.MessageId.earliest)
        first = await reader.read_next(10_000)
        assert (first.partition_key(), first.data()) == ("k0", value(0))
        await reader.close()
        # magnetar admin, over gRPC and through the gateway: the same verbs.
        more = [(f"k{i}", b"again-%d" % i) for i in range(5)] + [("k1", b"")]
        producer = await client.create_producer(topic)
        for key, payload in more:
            await producer.send(payload, partition_key=key)
        await producer.close()
        for door in (["--url", gateway_cluster.broker.address], ["--admin-url", gateway_cluster.url]):
            done = await asyncio.to_thread(shell.run, "admin", *door, "topics", "compact", topic)
            assert done.returncode == 0, done.stderr
            await compaction_done(http, path)
            done = await asyncio.to_thread(shell.run, "admin", *door, "topics", "compaction-status", topic)
            assert json.loads(done.stdout) == {"status": "SUCCESS", "lastError": ""}
        expected = latest([*expected.items(), *more])
        got = await read_compacted(client, topic)
        assert dict(got) == expected and len(got) == len(expected)
    print(f"produced {MESSAGES} messages in {produced_s:.1f} s, compacted in {compacted_s:.1f} s")


async def test_bad_input_is_refused(http: httpx.AsyncClient, gateway_cluster: GatewayCluster, shell: WarmMagnetar):
    missing = f"/admin/v2/persistent/public/nosuch/{unique('x')}/compaction"
    for r in (await http.put(missing), await http.get(missing)):
        assert r.status_code == 404 and r.json()["reason"]
    r = await http.put("/admin/v2/persistent/public/default/bad%01name/compaction")
    assert r.status_code == 412 and r.json()["reason"].startswith("Topic name is not valid")
    done = await asyncio.to_thread(
        shell.run, "admin", "--url", gateway_cluster.broker.address, "topics", "compact", "persistent://public/nosuch/t"
    )
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
    async with mg.Client(gateway_cluster.service_url) as client:
        with pytest.raises(mg.MagnetarError, match="readCompacted only allowed on failover or exclusive"):
            await client.subscribe(f"persistent://public/default/{unique('shared')}", "s",
                                   consumer_type=mg.ConsumerType.Shared, is_read_compacted=True)


async def test_owner_killed_mid_compaction_keeps_the_previous_view_and_compacts_again(
    http: httpx.AsyncClient, gateway_cluster: GatewayCluster
):
    local = unique("compact-kill")
    topic, path = f"persistent://public/default/{local}", f"/admin/v2/persistent/public/default/{local}"
    async with mg.Client(gateway_cluster.service_url) as client:
        await produce(client, topic, 0, KEYS)
        assert (await http.put(f"{path}/compaction")).status_code == 204
        assert (await compaction_done(http, path))["status"] == "SUCCESS"
        first = compaction_cursor((await http.get(f"{path}/internalStats")).json())
        await produce(client, topic, KEYS, MESSAGES - KEYS)
    assert (await http.put(f"{path}/compaction")).status_code == 204
    gateway_cluster.broker.kill()  # mid-compaction: it reads 100,000 messages first
    gateway_cluster.broker.start()

    async def internal():
        r = await http.get(f"{path}/internalStats")
        return r.json() if r.status_code == 200 else None
    stats = await eventually(internal, timeout=30)
    assert stats, "the topic did not come back"
    # The switch never happened: the view is the first compaction's, whole.
    assert compaction_cursor(stats)["markDeletePosition"] == first["markDeletePosition"]
    assert compaction_cursor(stats)["properties"] == first["properties"]
    assert (await http.get(f"{path}/compaction")).json()["status"] == "NOT_RUN"
    expected = latest([(f"k{i % KEYS}", value(i)) for i in range(MESSAGES)])
    async with mg.Client(gateway_cluster.service_url) as client:
        # The previous view, then the topic after its horizon: the same latest values.
        assert latest(await read_compacted(client, topic)) == expected
        assert (await http.put(f"{path}/compaction")).status_code == 204
        assert (await compaction_done(http, path))["status"] == "SUCCESS"
        got = await read_compacted(client, topic)
    assert dict(got) == expected and len(got) == len(expected)


def pulsar_round_trip(cluster: GatewayCluster, topic: str, compact: Callable[[], None]) -> tuple[dict, list]:
    """pulsar-client (through the Pulsar door): batches of keyed messages and tombstones,
    compacted, then read by a compacted reader up to a marker."""
    import pulsar

    client = pulsar_client(cluster.broker.pulsar_url, operation_timeout_seconds=15)
    try:
        producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=50,
                                          batching_max_publish_delay_ms=5, block_if_queue_full=True)
        sent = [(f"k{i % 50}", b"" if i % 13 == 0 else b"p%d" % i) for i in range(2_000)]
        failed = []
        for key, payload in sent:
            producer.send_async(payload, lambda result, _id: failed.append(result) if result != pulsar.Result.Ok else None,
                                partition_key=key)
        producer.flush()
        assert not failed, failed
        compact()
        marker = unique(END)
        producer.send(b"end", partition_key=marker)
        reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
        got = []
        while True:
            msg = reader.read_next(30_000)
            if msg.partition_key() == marker:
                break
            got.append((msg.partition_key(), msg.data()))
        return latest(sent), got
    finally:
        client.close()


async def test_pulsar_client_reads_the_compacted_view_through_the_pulsar_door(
    http: httpx.AsyncClient, gateway_cluster: GatewayCluster
):
    local = unique("compact-pulsar")
    topic, path = f"persistent://public/default/{local}", f"/admin/v2/persistent/public/default/{local}"

    def compact() -> None:
        with httpx.Client(base_url=gateway_cluster.url, timeout=30) as sync_http:
            assert sync_http.put(f"{path}/compaction").status_code == 204
            deadline = time.monotonic() + 30
            while sync_http.get(f"{path}/compaction").json()["status"] != "SUCCESS":
                assert time.monotonic() < deadline, "the compaction did not finish"
                time.sleep(0.05)

    expected, got = await asyncio.to_thread(pulsar_round_trip, gateway_cluster, topic, compact)
    assert dict(got) == expected and len(got) == len(expected)


async def test_a_partitioned_topic_is_compacted_partition_by_partition(
    http: httpx.AsyncClient, gateway_cluster: GatewayCluster, shell: WarmMagnetar
):
    local = unique("compact-parts")
    topic, path = f"persistent://public/default/{local}", f"/admin/v2/persistent/public/default/{local}"
    assert (await http.put(f"{path}/partitions", json=2)).status_code == 204
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(topic)
        for i in range(40):
            await producer.send(b"%d" % i, partition_key=f"k{i % 4}")
        await producer.close()
    assert (await http.put(f"{path}/compaction")).status_code == 204
    for i in range(2):
        assert (await compaction_done(http, f"{path}-partition-{i}"))["status"] == "SUCCESS"
    r = await http.get(f"{path}/compaction")
    assert r.status_code == 405 and r.json()["reason"]
    # Over gRPC, magnetar admin fans out the same way.
    done = await asyncio.to_thread(shell.run, "admin", "--url", gateway_cluster.broker.address, "topics", "compact", topic)
    assert done.returncode == 0, done.stderr
    for i in range(2):
        await compaction_done(http, f"{path}-partition-{i}")
    async with mg.Client(gateway_cluster.service_url) as client:
        got = latest(await read_compacted_partitioned(client, topic))
    assert got == {f"k{k}": b"%d" % (36 + k) for k in range(4)}


async def read_compacted_partitioned(client: mg.Client, topic: str) -> list[tuple[str, bytes]]:
    """Every partition's compacted view (each up to an end marker of its own)."""
    out = []
    for partition in await client.get_topic_partitions(topic):
        out += await read_compacted(client, partition)
    return out


async def test_has_message_available_is_false_when_the_last_message_was_compacted_out(
    http: httpx.AsyncClient, gateway_cluster: GatewayCluster
):
    """The topic ends with a tombstone, and everything is compacted: a compacted reader
    that read the view's last message has nothing more (the topic's last message, the
    tombstone, is not in the view); a plain reader still has the tombstone to read. Both
    doors: our SDK and pulsar-client."""
    local = unique("compact-tail")
    topic, path = f"persistent://public/default/{local}", f"/admin/v2/persistent/public/default/{local}"
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(topic, batching_enabled=False)
        for key, payload in (("a", b"1"), ("b", b"2"), ("b", b"")):
            await producer.send(payload, partition_key=key)
        await producer.close()
        assert (await http.put(f"{path}/compaction")).status_code == 204
        assert (await compaction_done(http, path))["status"] == "SUCCESS"
        compacted = await client.create_reader(topic, mg.MessageId.earliest, is_read_compacted=True)
        plain = await client.create_reader(topic, mg.MessageId.earliest)
        try:
            assert await compacted.has_message_available()
            assert (await compacted.read_next(10_000)).data() == b"1"
            assert not await compacted.has_message_available()
            for _ in range(2):
                await plain.read_next(10_000)
            assert await plain.has_message_available()
        finally:
            await compacted.close()
            await plain.close()

    def pulsar_side() -> tuple[bool, bytes, bool]:
        import pulsar

        pc = pulsar_client(gateway_cluster.broker.pulsar_url)
        try:
            reader = pc.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
            before = reader.has_message_available()
            data = reader.read_next(10_000).data()
            return before, data, reader.has_message_available()
        finally:
            pc.close()

    assert await asyncio.to_thread(pulsar_side) == (True, b"1", False)
