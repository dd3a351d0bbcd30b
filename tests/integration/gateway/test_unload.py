"""Unloading a topic, a bundle or a namespace through the gateway; bundles data. And
non-persistent topics, which live in their broker's memory only (an unload or a restart
empties them): the SDK (gRPC) and pulsar-client (Pulsar's protocol) produce and consume
them live; nothing reaches the bookies; a consumer gets only what is published while it
is connected; drops show in the stats; REST and ``magnetar admin`` list, show and delete
them; a restarted broker serves the topic again, empty (last in the module: the other
tests keep the broker they started with)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator

import httpx
import pulsar
import pytest
import pytest_asyncio
from gateway_support import GatewayCluster, eventually, unique

import magnetar.asyncio as mg
from magnetar.ledger.metadata import LedgerMetadata
from magnetar.metadata.ledgers import ZkLedgerMetadataStore
from magnetar.metadata.session import ZkSession
from magnetar.testing.pulsarclient import pulsar_client
from magnetar.testing.shell import WarmMagnetar, cli_fails, cli_ok

# A test restarts the broker: it serves its topics again once its previous ZooKeeper
# session is gone (2 s here; the default is 5 s).
OWN_BROKER_SETTINGS = {"zk_session_timeout_s": 2.0}


@pytest.fixture(scope="module")
def gateway_cluster(own_gateway_cluster: GatewayCluster) -> GatewayCluster:
    """A cluster of this module's own: a test restarts its broker."""
    return own_gateway_cluster


async def test_bundles_data_names_boundaries_and_owners(http: httpx.AsyncClient, gateway_cluster: GatewayCluster):
    data = (await http.get("/admin/v2/namespaces/public/default/bundles")).json()
    assert data["numBundles"] == len(data["owners"]) >= 1
    assert data["boundaries"][0] == "0x00000000" and data["boundaries"][-1] == "0xffffffff"
    assert len(data["boundaries"]) == data["numBundles"] + 1
    r = await http.get("/admin/v2/namespaces/public/nosuch/bundles")
    assert r.status_code == 404 and r.json()["reason"]


async def test_unloads_keep_clients_working(http: httpx.AsyncClient, gateway_cluster: GatewayCluster):
    topic = f"persistent://public/default/{unique('unload')}"
    client = mg.Client(gateway_cluster.service_url)
    try:
        producer = await client.create_producer(topic)
        consumer = await client.subscribe(topic, "s")
        await producer.send(b"before")
        local = topic.rsplit("/", 1)[1]
        assert (await http.put(f"/admin/v2/persistent/public/default/{local}/unload")).status_code == 204
        owners = (await http.get("/admin/v2/namespaces/public/default/bundles")).json()["owners"]
        bundle = next(b for b, owner in owners.items() if owner)
        assert (await http.put(f"/admin/v2/namespaces/public/default/{bundle}/unload")).status_code == 204
        assert (await http.put("/admin/v2/namespaces/public/default/unload")).status_code == 204
        await producer.send(b"after")
        got = [(await consumer.receive(10_000)).data() for _ in range(2)]
        assert got == [b"before", b"after"]
    finally:
        await client.close()
    r = await http.put("/admin/v2/namespaces/public/nosuch/unload")
    assert r.status_code == 404
    r = await http.put("/admin/v2/persistent/public/default/bad%01name/unload")
    assert r.status_code == 412 and r.json()["reason"].startswith("Topic name is not valid")


# -- non-persistent topics (docs/non-persistent.md) ------------------------------------
@pytest.fixture(scope="module")
def shell() -> Iterator[WarmMagnetar]:
    with WarmMagnetar("admin") as warm:
        yield warm


@pytest_asyncio.fixture
async def client(gateway_cluster: GatewayCluster) -> AsyncIterator[mg.Client]:
    async with mg.Client(gateway_cluster.service_url) as c:
        yield c


async def ledger_ids(cluster: GatewayCluster) -> list[int]:
    async with ZkSession(cluster.zk_connect, cluster.zk_root) as session:
        return await ZkLedgerMetadataStore(session, LedgerMetadata.from_dict).list()


async def test_sdk_and_pulsar_client_consume_live_and_nothing_is_stored(client, gateway_cluster: GatewayCluster):
    topic = f"non-persistent://public/default/{unique('np')}"
    ledgers_before = await ledger_ids(gateway_cluster)
    sdk = await client.subscribe(topic, "sdk-sub")
    pc = pulsar_client(gateway_cluster.broker.pulsar_url, operation_timeout_seconds=10)
    try:
        theirs = await asyncio.to_thread(pc.subscribe, topic, "pc-sub")
        producer = await client.create_producer(topic)
        ids = [await producer.send(f"m{i}".encode()) for i in range(5)]
        assert {(m.ledger_id(), m.entry_id()) for m in ids} == {(0, 0)}  # Pulsar's answer: nothing stored
        assert [(await sdk.receive(timeout_millis=10_000)).data() for _ in range(5)] == [f"m{i}".encode() for i in range(5)]
        got = [await asyncio.to_thread(theirs.receive, 10_000) for _ in range(5)]
        assert [m.data() for m in got] == [f"m{i}".encode() for i in range(5)]
        theirs.acknowledge(got[-1])  # accepted and ignored

        # pulsar-client's producer too; a consumer subscribed now gets only what follows.
        their_producer = await asyncio.to_thread(pc.create_producer, topic)
        await asyncio.to_thread(their_producer.send, b"from-pc")
        assert (await sdk.receive(timeout_millis=10_000)).data() == b"from-pc"
        late = await client.subscribe(topic, "late")
        reader = await client.create_reader(topic, mg.MessageId.latest)  # nothing kept: "latest" is "from now"
        await producer.send(b"after")
        assert (await late.receive(timeout_millis=10_000)).data() == b"after"
        assert (await reader.read_next(timeout_millis=10_000)).data() == b"after"
        with pytest.raises(mg.Timeout):
            await late.receive(timeout_millis=200)  # nothing from before it subscribed
        assert await ledger_ids(gateway_cluster) == ledgers_before  # no ledger for the topic
    finally:
        await asyncio.to_thread(pc.close)


async def test_shared_subscription_spreads_and_drops_show_in_stats(client, http: httpx.AsyncClient):
    local = unique("np-shared")
    topic = f"non-persistent://public/default/{local}"
    a = await client.subscribe(topic, "shared", consumer_type=mg.ConsumerType.Shared, receiver_queue_size=100)
    b = await client.subscribe(topic, "shared", consumer_type=mg.ConsumerType.Shared, receiver_queue_size=100)
    await client.subscribe(topic, "idle", receiver_queue_size=1)  # takes one message, then has no permits
    producer = await client.create_producer(topic, batching_enabled=False)
    for i in range(20):
        await producer.send(f"{i}".encode())
    got_a, got_b = [], []
    for consumer, got in ((a, got_a), (b, got_b)):
        while True:
            try:
                got.append((await consumer.receive(timeout_millis=300)).data())
            except mg.Timeout:
                break
    assert sorted(got_a + got_b, key=int) == [f"{i}".encode() for i in range(20)]
    assert got_a and got_b  # both got some

    r = await http.get(f"/admin/v2/non-persistent/public/default/{local}/stats")
    assert r.status_code == 200, r.text
    body = r.json()
    # "idle" holds at most its queue's worth (its consumer does not receive): the rest was dropped.
    assert body["subscriptions"]["idle"]["msgDropCounter"] >= 18
    assert body["subscriptions"]["shared"]["msgDropCounter"] == 0
    assert body["msgDropCounter"] == body["subscriptions"]["idle"]["msgDropCounter"]
    assert "msgDropRate" in body and "msgDropRate" in body["subscriptions"]["idle"]  # a rate per stats interval
    assert body["msgInCounter"] == 20 and body["storageSize"] == 0 and body["backlogSize"] == 0
    assert {p["producerName"] for p in body["publishers"]} == {producer.producer_name()}


@pytest.mark.parametrize("door", ["grpc", "rest"])
async def test_rest_and_admin_list_stats_delete(client, http: httpx.AsyncClient, gateway_cluster: GatewayCluster,
                                                shell: WarmMagnetar, door: str):
    local = unique("np-admin")
    topic = f"non-persistent://public/default/{local}"
    flags = ["--url", gateway_cluster.broker.address] if door == "grpc" else ["--admin-url", gateway_cluster.url]

    def cli(*args: str):
        return shell.run("admin", *flags, *args)

    consumer = await client.subscribe(topic, "s", receiver_queue_size=1)
    producer = await client.create_producer(topic)
    for _ in range(3):
        await producer.send(b"x")
    assert (await consumer.receive(timeout_millis=10_000)).data() == b"x"
    listed = (await http.get("/admin/v2/non-persistent/public/default")).json()
    assert topic in listed
    by_mode = (await http.get("/admin/v2/namespaces/public/default/topics", params={"mode": "NON_PERSISTENT"})).json()
    assert topic in by_mode and all(t.startswith("non-persistent://") for t in by_mode)
    assert topic in (await asyncio.to_thread(cli, "topics", "list", "public/default")).stdout.split()
    stats = json.loads(cli_ok(await asyncio.to_thread(cli, "topics", "stats", topic)))
    assert stats["msgInCounter"] == 3 and stats["subscriptions"]["s"]["consumers"] == 1
    assert stats["subscriptions"]["s"]["msgDropCounter"] >= 1 and stats["msgDropCounter"] >= 1

    refused = cli_fails(await asyncio.to_thread(cli, "topics", "delete", topic))  # connected: not without -f
    assert "connected" in refused or "412" in refused
    cli_ok(await asyncio.to_thread(cli, "topics", "delete", "-f", topic))
    assert topic not in (await http.get("/admin/v2/non-persistent/public/default")).json()
    r = await http.get(f"/admin/v2/non-persistent/public/default/{local}/stats")
    assert r.status_code == 404 and r.json()["reason"] == f"Topic {topic} not found"
    r = await http.delete(f"/admin/v2/non-persistent/public/default/{local}")
    assert r.status_code == 404
    assert (await http.put(f"/admin/v2/non-persistent/public/default/{local}")).status_code == 204  # REST create
    assert topic in (await http.get("/admin/v2/non-persistent/public/default")).json()
    assert (await http.put(f"/admin/v2/non-persistent/public/default/{local}/unload")).status_code == 204
    assert topic not in (await http.get("/admin/v2/non-persistent/public/default")).json()  # unloaded: gone


async def test_partitioned_non_persistent_topic_through_rest_cli_sdk_and_pulsar_client(
    client, http: httpx.AsyncClient, gateway_cluster: GatewayCluster, shell: WarmMagnetar,
):
    local, by_cli = unique("np-parts"), unique("np-parts-cli")
    topic, cli_topic = (f"non-persistent://public/default/{n}" for n in (local, by_cli))
    persistent = f"persistent://public/default/{local}"
    path = f"/admin/v2/non-persistent/public/default/{local}"

    def cli(*args: str):
        return shell.run("admin", "--admin-url", gateway_cluster.url, *args)

    assert (await http.put(f"{path}/partitions", json=0)).status_code == 406  # bad input: nothing made
    assert (await http.get(f"{path}/partitions")).json()["partitions"] == 0
    assert (await http.put(f"{path}/partitions", json=2)).status_code == 204
    assert (await http.put(f"{path}/partitions", json=2)).status_code == 409
    assert (await http.get(f"{path}/partitions")).json()["partitions"] == 2
    # the persistent topic of the same name is another topic: not partitioned
    assert (await http.get(f"/admin/v2/persistent/public/default/{local}/partitions")).json()["partitions"] == 0
    assert (await http.post(f"{path}/partitions", json=1)).status_code == 422  # never fewer
    assert (await http.post(f"{path}/partitions", json=3)).status_code == 204
    meta = json.loads(cli_ok(await asyncio.to_thread(cli, "topics", "get-partitioned-topic-metadata", topic)))
    assert meta == {"partitions": 3}

    # The SDK and pulsar-client produce to and consume from its partitions.
    sdk = await client.subscribe(topic, "sdk-sub")
    pc = pulsar_client(gateway_cluster.broker.pulsar_url, operation_timeout_seconds=10)
    try:
        theirs = await asyncio.to_thread(pc.subscribe, topic, "pc-sub")
        producer = await client.create_producer(topic)
        sent = {f"k{i}".encode() for i in range(6)}
        for payload in sorted(sent):
            await producer.send(payload, partition_key=payload.decode())
        got = [await sdk.receive(timeout_millis=10_000) for _ in sent]
        assert {m.data() for m in got} == sent
        assert {m.topic_name() for m in got} <= {f"{topic}-partition-{i}" for i in range(3)}
        assert {(await asyncio.to_thread(theirs.receive, 10_000)).data() for _ in sent} == sent
        their_producer = await asyncio.to_thread(pc.create_producer, topic)
        await asyncio.to_thread(their_producer.send, b"from-pc")
        assert (await sdk.receive(timeout_millis=10_000)).data() == b"from-pc"

        stats = (await http.get(f"{path}/partitioned-stats")).json()
        assert stats["metadata"]["partitions"] == 3 and stats["msgInCounter"] == len(sent) + 1
        assert set(stats["partitions"]) == {f"{topic}-partition-{i}" for i in range(3)}
        assert set(stats["subscriptions"]) == {"sdk-sub", "pc-sub"}
        cli_stats = json.loads(cli_ok(await asyncio.to_thread(cli, "topics", "partitioned-stats", topic)))
        assert cli_stats["msgInCounter"] == len(sent) + 1
        assert (await http.delete(f"{path}/partitions")).status_code == 412  # clients connected
        await asyncio.to_thread(their_producer.close)
    finally:
        await asyncio.to_thread(pc.close)
    assert (await http.delete(f"{path}/partitions", params={"force": "true"})).status_code == 204
    assert (await http.get(f"{path}/partitions")).json()["partitions"] == 0
    assert (await http.delete(f"{path}/partitions")).status_code == 404

    # `magnetar admin` over gRPC: create, grow, delete (the verbs take either domain).
    grpc = ["--url", gateway_cluster.broker.address]
    cli_ok(await asyncio.to_thread(shell.run, "admin", *grpc, "topics", "create-partitioned-topic", cli_topic, "-p", "2"))
    cli_ok(await asyncio.to_thread(shell.run, "admin", *grpc, "topics", "update-partitioned-topic", cli_topic, "-p", "4"))
    r = await http.get(f"/admin/v2/non-persistent/public/default/{by_cli}/partitions")
    assert r.json()["partitions"] == 4
    cli_ok(await asyncio.to_thread(shell.run, "admin", *grpc, "topics", "delete-partitioned-topic", cli_topic))
    assert (await http.get(f"/admin/v2/non-persistent/public/default/{by_cli}/partitions")).json()["partitions"] == 0
    assert persistent not in (await http.get("/admin/v2/persistent/public/default")).json()


def _subscribe_pattern(client: pulsar.Client, pattern: str, subscription: str) -> pulsar.Consumer:
    """``client.subscribe(re.compile(pattern), subscription, pattern_auto_discovery_period=1,
    regex_subscription_mode=NonPersistentOnly)`` as it is meant to work: pulsar-client 3.13's
    ``subscribe`` never hands the period to the C++ core (whose default is 60 s), so the
    configuration is made here as ``subscribe`` makes it (tests/integration/test_pulsar_commands.py)."""
    import _pulsar

    conf = _pulsar.ConsumerConfiguration()
    conf.pattern_auto_discovery_period(1)
    conf.regex_subscription_mode(_pulsar.RegexSubscriptionMode.NonPersistentOnly)
    consumer = pulsar.Consumer()
    consumer._consumer = client._client.subscribe_pattern(re.compile(pattern).pattern, subscription, conf)
    consumer._client = client
    consumer._schema = pulsar.schema.BytesSchema()
    consumer._schema.attach_client(client._client)
    client._consumers.append(consumer)
    return consumer


async def test_pattern_consumers_join_a_non_persistent_topic_made_after_they_subscribed(
    client, gateway_cluster: GatewayCluster,
):
    prefix = unique("np-pattern")
    pattern = f"persistent://public/default/{prefix}-.*"  # the mode, not the domain, chooses
    sdk = await client.subscribe(
        re.compile(pattern), "sdk-sub", pattern_auto_discovery_period=1,
        regex_subscription_mode=mg.RegexSubscriptionMode.NonPersistentOnly,
    )
    everything = await client.subscribe(
        re.compile(pattern), "all-sub", pattern_auto_discovery_period=1,
        regex_subscription_mode=mg.RegexSubscriptionMode.AllTopics,
    )
    pc = pulsar_client(gateway_cluster.broker.pulsar_url, operation_timeout_seconds=10)
    try:
        theirs = await asyncio.to_thread(_subscribe_pattern, pc, f"non-persistent://public/default/{prefix}-.*", "pc-sub")
        assert sdk.topics() == []
        new_topic = f"non-persistent://public/default/{prefix}-later"
        await client.create_producer(f"persistent://public/default/{prefix}-stored")  # not NonPersistentOnly's
        producer = await client.create_producer(new_topic)
        async def sdk_joined() -> bool:
            return new_topic in sdk.topics() and new_topic in everything.topics()

        assert await eventually(sdk_joined)

        async def their_consumer_joined() -> bool:  # pulsar-client's discovery runs on its own clock
            await producer.send(b"probe")
            try:
                await asyncio.to_thread(theirs.receive, 300)
            except pulsar.Timeout:
                return False
            return True

        assert await eventually(their_consumer_joined)
        await producer.send(b"after-join")
        msg = await sdk.receive(timeout_millis=10_000)
        while msg.data() == b"probe":  # the probes reached the SDK consumer too
            msg = await sdk.receive(timeout_millis=10_000)
        assert (msg.topic_name(), msg.data()) == (new_topic, b"after-join")
        assert sorted(everything.topics()) == sorted([new_topic, f"persistent://public/default/{prefix}-stored"])
        got = await asyncio.to_thread(theirs.receive, 10_000)
        while got.data() == b"probe":
            got = await asyncio.to_thread(theirs.receive, 10_000)
        assert (got.topic_name(), got.data()) == (new_topic, b"after-join")
    finally:
        await asyncio.to_thread(pc.close)


async def test_a_restarted_broker_serves_the_topic_again_empty(gateway_cluster: GatewayCluster, http: httpx.AsyncClient):
    local = unique("np-restart")
    topic = f"non-persistent://public/default/{local}"
    before = mg.Client(gateway_cluster.service_url)
    producer = await before.create_producer(topic)
    await before.subscribe(topic, "before-restart", receiver_queue_size=1)
    for _ in range(3):
        await producer.send(b"before")
    # Its client goes while the broker is down: a live one would subscribe again after the
    # restart (as Pulsar's does), which a CI run once saw before the stats below.
    await asyncio.to_thread(gateway_cluster.broker.stop)
    await before.shutdown()
    await asyncio.to_thread(gateway_cluster.broker.start)
    async with mg.Client(gateway_cluster.service_url) as again:
        consumer = await again.subscribe(topic, "after-restart")
        producer = await again.create_producer(topic)
        await producer.send(b"after")
        assert (await consumer.receive(timeout_millis=10_000)).data() == b"after"
        async def stats() -> dict | None:  # the gateway reconnects to the restarted broker
            r = await http.get(f"/admin/v2/non-persistent/public/default/{local}/stats")
            return r.json() if r.status_code == 200 else None

        body = await eventually(stats)
        assert body is not None
        # Loaded anew: only what was published since, and only the subscription made since.
        assert (body["msgInCounter"], set(body["subscriptions"])) == (1, {"after-restart"})
