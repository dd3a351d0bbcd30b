"""``magnetar admin namespaces`` policy verbs made from the policy catalogue, through both
doors (gRPC and ``--admin-url``): each verb changes what real producers and consumers see,
and a bad value is one line on stderr, exit 1, with nothing changed."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import httpx
import pytest
import pytest_asyncio
from gateway_support import GatewayCluster, eventually, unique

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
from magnetar.exceptions import TopicNotFound
from magnetar.testing.shell import WarmMagnetar

DOORS = ("grpc", "rest")


@pytest.fixture(scope="module")
def shell() -> Iterator[WarmMagnetar]:
    with WarmMagnetar("admin") as warm:
        yield warm


@pytest_asyncio.fixture
async def admin(gateway_cluster: GatewayCluster) -> AsyncIterator[AdminClient]:
    async with AdminClient(gateway_cluster.service_url) as client:
        yield client


class Cli:
    """``magnetar admin`` through one door."""

    def __init__(self, shell: WarmMagnetar, cluster: GatewayCluster, door: str) -> None:
        self._shell = shell
        self._door = ["--url", cluster.broker.address] if door == "grpc" else ["--admin-url", cluster.url]

    async def run(self, *args: str) -> tuple[int, str, list[str]]:
        done = await asyncio.to_thread(self._shell.run, "admin", *self._door, *args)
        return done.returncode, done.stdout, done.stderr.strip().splitlines()

    async def ok(self, *args: str) -> str:
        code, out, err = await self.run(*args)
        assert code == 0, (args, out, err)
        return out

    async def refused(self, *args: str) -> str:
        code, out, err = await self.run(*args)
        assert code == 1 and out == "" and len(err) == 1 and err[0].startswith("magnetar admin: "), (args, code, out, err)
        return err[0]


@pytest_asyncio.fixture(params=DOORS)
async def cli(request: pytest.FixtureRequest, shell: WarmMagnetar, gateway_cluster: GatewayCluster) -> Cli:
    return Cli(shell, gateway_cluster, request.param)


@pytest_asyncio.fixture
async def namespace(cli: Cli, admin: AdminClient) -> str:
    tenant = unique("clipol")
    await admin.create_tenant(tenant)
    name = f"{tenant}/ns"
    await cli.ok("namespaces", "create", name)
    return name


async def backlog(admin: AdminClient, topic: str, subscription: str) -> int:
    stats = await admin.topic_stats(topic)
    return next(s.backlog for s in stats.subscriptions if s.name == subscription)


async def test_message_ttl_verbs_expire_old_messages(
    cli: Cli, namespace: str, gateway_cluster: GatewayCluster, admin: AdminClient,
):
    topic = f"persistent://{namespace}/ttl"
    assert await cli.ok("namespaces", "get-message-ttl", namespace) == ""  # not set
    async with mg.Client(gateway_cluster.service_url) as client:
        await (await client.subscribe(topic, "s")).close()
        producer = await client.create_producer(topic, batching_enabled=False)
        for i in range(3):
            await producer.send(b"old-%d" % i)
        assert await backlog(admin, topic, "s") == 3
        assert await cli.ok("namespaces", "set-message-ttl", namespace, "-ttl", "1") == ""
        assert await cli.ok("namespaces", "get-message-ttl", namespace) == "1\n"

        async def expired() -> bool:
            return await backlog(admin, topic, "s") == 0

        assert await eventually(expired, timeout=15.0)
        assert await cli.ok("namespaces", "remove-message-ttl", namespace) == ""
        assert await cli.ok("namespaces", "get-message-ttl", namespace) == ""
        assert (await admin.namespace_policies(namespace)).HasField("message_ttl_seconds") is False


async def test_inactive_topic_policies_verbs_delete_idle_topics_only(
    cli: Cli, namespace: str, gateway_cluster: GatewayCluster, admin: AdminClient,
):
    """``set-inactive-topic-policies -e -t 1 -m delete_when_subscriptions_caught_up``: a
    topic without clients whose subscriptions are caught up vanishes (its ledgers with
    it); one with a backlog, or with a producer connected, stays. A partitioned topic goes
    once each of its partitions has gone (its partitioned metadata too)."""
    assert await cli.ok("namespaces", "get-inactive-topic-policies", namespace) == ""
    idle, backlogged, active, parted = (
        f"persistent://{namespace}/{n}" for n in ("idle", "backlogged", "active", "parted"))
    await admin.create_topic(parted, partitions=2)
    async with mg.Client(gateway_cluster.service_url) as client:
        for name in (idle, f"{parted}-partition-0", f"{parted}-partition-1"):
            producer = await client.create_producer(name)
            await producer.send(b"once")
            await producer.close()
        await (await client.subscribe(backlogged, "s")).close()
        producer = await client.create_producer(backlogged)
        await producer.send(b"unread")
        await producer.close()
        kept_open = await client.create_producer(active)
        await cli.ok("namespaces", "set-inactive-topic-policies", namespace, "-e", "-t", "1",
                     "-m", "delete_when_subscriptions_caught_up")
        assert json.loads(await cli.ok("namespaces", "get-inactive-topic-policies", namespace)) == {
            "inactiveTopicDeleteMode": "delete_when_subscriptions_caught_up", "maxInactiveDurationSeconds": 1,
            "deleteWhileInactive": True}

        async def idle_deleted() -> bool:
            return not {idle, parted} & set(await admin.topics(namespace))

        assert await eventually(idle_deleted, timeout=15.0)
        assert await admin.partitions(parted) == 0  # its partitioned metadata went with the last partition
        assert {backlogged, active} <= set(await admin.topics(namespace))
        assert await backlog(admin, backlogged, "s") == 1
        await kept_open.send(b"still here")
        assert (await admin.topic_stats(active)).msg_in_counter == 1
        await kept_open.close()
    await cli.ok("namespaces", "remove-inactive-topic-policies", namespace)
    assert await cli.ok("namespaces", "get-inactive-topic-policies", namespace) == ""
    assert "--delete-mode" in await cli.refused(
        "namespaces", "set-inactive-topic-policies", namespace, "-e", "-t", "1", "-m", "delete_sometimes")
    assert "--max-inactive-duration" in await cli.refused(
        "namespaces", "set-inactive-topic-policies", namespace, "-e", "-t", "0", "-m", "delete_when_no_subscriptions")
    assert await cli.ok("namespaces", "get-inactive-topic-policies", namespace) == ""


async def test_retention_verbs_and_their_check_against_a_backlog_quota(cli: Cli, namespace: str, admin: AdminClient):
    assert await cli.ok("namespaces", "set-retention", namespace, "-t", "60", "-s", "10") == ""
    got = json.loads(await cli.ok("namespaces", "get-retention", namespace))
    assert got == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}
    big = ("namespaces", "set-backlog-quota", namespace, "-l", str(20 * 1024 * 1024), "-p", "producer_request_hold")
    assert "exceeds configured retention" in await cli.refused(*big)  # 20 MB of backlog, 10 MB kept
    assert await cli.ok("namespaces", "get-backlog-quotas", namespace) == "{}\n"
    assert await cli.ok("namespaces", "remove-retention", namespace) == ""
    applied = json.loads(await cli.ok("namespaces", "get-retention", namespace))
    assert applied == {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}  # the broker's default
    assert (await admin.namespace_policies(namespace)).HasField("retention") is False
    await cli.ok(*big)
    quotas = json.loads(await cli.ok("namespaces", "get-backlog-quotas", namespace))
    assert quotas["destination_storage"]["limitSize"] == 20 * 1024 * 1024


async def test_deduplication_verbs_switch_what_a_resend_does(
    cli: Cli, namespace: str, gateway_cluster: GatewayCluster, admin: AdminClient,
):
    topic = f"persistent://{namespace}/dedup"
    assert await cli.ok("namespaces", "set-deduplication", namespace, "--disable") == ""
    assert await cli.ok("namespaces", "get-deduplication", namespace) == "false\n"
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(topic, producer_name="p", batching_enabled=False)
        await producer.send(b"a", sequence_id=1)
        assert (await producer.send(b"a", sequence_id=1)).ledger_id() >= 0  # stored a second time
        assert await cli.ok("namespaces", "remove-deduplication", namespace) == ""  # the broker's default: on
        assert await cli.ok("namespaces", "get-deduplication", namespace) == ""
        assert (await producer.send(b"a", sequence_id=1)).ledger_id() == -1
    assert (await admin.topic_stats(topic)).entries == 2


async def test_backlog_quota_and_delayed_delivery_verbs_reach_producers_and_consumers(
    cli: Cli, namespace: str, gateway_cluster: GatewayCluster,
):
    topic = f"persistent://{namespace}/quota"
    await cli.ok("namespaces", "set-backlog-quota", namespace, "-l", "2000", "-p", "producer_exception")
    quotas = json.loads(await cli.ok("namespaces", "get-backlog-quotas", namespace))
    assert quotas == {"destination_storage": {
        "limit": 2000, "limitSize": 2000, "limitTime": -1, "policy": "producer_exception"}}
    async with mg.Client(gateway_cluster.service_url) as client:
        await client.subscribe(topic, "s")
        producer = await client.create_producer(topic, batching_enabled=False)
        with pytest.raises(mg.ProducerBlockedQuotaExceeded):
            for _ in range(20):
                await producer.send(b"x" * 500)
        assert await cli.ok("namespaces", "remove-backlog-quota", namespace) == ""
        assert await cli.ok("namespaces", "get-backlog-quotas", namespace) == "{}\n"

        async def accepted() -> mg.MessageId | None:  # once the broker has heard of the removal
            with contextlib.suppress(mg.ProducerBlockedQuotaExceeded):
                return await producer.send(b"after")
            return None

        assert await eventually(accepted, timeout=15.0)

        delayed = f"persistent://{namespace}/delayed"
        consumer = await client.subscribe(delayed, "s", consumer_type=mg.ConsumerType.Shared)
        producer = await client.create_producer(delayed)
        assert await cli.ok("namespaces", "set-delayed-delivery", namespace, "--disable") == ""
        got = json.loads(await cli.ok("namespaces", "get-delayed-delivery", namespace))
        assert got == {"active": False, "tickTime": 1000, "maxDeliveryDelayInMillis": 0}
        await producer.send(b"at-once", deliver_after=timedelta(minutes=5))
        assert (await consumer.receive(timeout_millis=10_000)).data() == b"at-once"
        await cli.ok("namespaces", "set-delayed-delivery", namespace, "--enable", "--maxDelay", "60000")
        with pytest.raises(mg.InvalidArgument, match="max allowed delivery delay of 60000"):
            await producer.send(b"too-late", deliver_after=timedelta(minutes=5))
        assert await cli.ok("namespaces", "remove-delayed-delivery", namespace) == ""
        assert await cli.ok("namespaces", "get-delayed-delivery", namespace) == ""


async def test_bad_values_are_one_line_and_change_nothing(cli: Cli, namespace: str, admin: AdminClient):
    before = await admin.namespace_policies(namespace)
    assert "message TTL must >= 0" in await cli.refused("namespaces", "set-message-ttl", namespace, "-ttl", "-1")
    assert "--policy" in await cli.refused(
        "namespaces", "set-backlog-quota", namespace, "-l", "10", "-p", "drop_everything")
    assert "tickTime" in await cli.refused("namespaces", "set-delayed-delivery", namespace, "-e", "-t", "-5")
    assert "publishThrottlingRateInByte" in await cli.refused(
        "namespaces", "set-publish-rate", namespace, "--byte-publish-rate", "-5")
    await cli.refused("namespaces", "set-message-ttl", f"{namespace}-missing", "-ttl", "5")
    assert await admin.namespace_policies(namespace) == before
    code, _, _ = await cli.run("namespaces", "set-message-ttl", namespace, "-ttl", "soon")
    assert code == 2  # usage error, as argparse's


async def test_persistence_verbs_choose_the_quorums_of_new_ledgers(
    cli: Cli, namespace: str, gateway_cluster: GatewayCluster, admin: AdminClient,
):
    """The cluster's broker writes 2/2/2 ledgers on its 2 bookies; a 1/1/1 namespace's
    topic gets a ledger on one bookie; one asking more bookies than there are fails its
    ledger's creation at once, naming the shortage."""
    import httpx

    assert await cli.ok("namespaces", "set-persistence", namespace, "-e", "1", "-w", "1", "-a", "1", "-r", "2") == ""
    assert json.loads(await cli.ok("namespaces", "get-persistence", namespace)) == {
        "bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 1, "bookkeeperAckQuorum": 1,
        "managedLedgerMaxMarkDeleteRate": 2.0, "managedLedgerStorageClassName": None}
    topic = f"persistent://{namespace}/one-copy"
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(topic)
        sent = await producer.send(b"kept once")
    async with httpx.AsyncClient(base_url=gateway_cluster.url, timeout=30) as http:
        path = topic.removeprefix("persistent://")
        stats = (await http.get(f"/admin/v2/persistent/{path}/internalStats")).json()
        assert [ledger["ledgerId"] for ledger in stats["ledgers"]] == [sent.ledger_id()]
        metadata = (await http.get(f"/admin/v2/ledgers/{sent.ledger_id()}")).json()
        assert (metadata["ensemble_size"], metadata["write_quorum"], metadata["ack_quorum"]) == (1, 1, 1)
        assert [len(f["bookies"]) for f in metadata["fragments"]] == [1]

        assert "Ensemble (1) >= WriteQuorum (2)" in await cli.refused(
            "namespaces", "set-persistence", namespace, "-e", "1", "-w", "2", "-a", "1")
        assert (await admin.namespace_policies(namespace)).persistence.bookkeeper_ensemble == 1  # unchanged
        await cli.ok("namespaces", "set-persistence", namespace, "-e", "3", "-w", "3", "-a", "2")
        refused = await http.put(f"/admin/v2/persistent/{namespace}/three-copies")
        assert refused.status_code == 503, refused.text
        assert "needed 3, found 2" in refused.json()["reason"]
        assert await cli.ok("namespaces", "remove-persistence", namespace) == ""
        assert await cli.ok("namespaces", "get-persistence", namespace) == ""
        async with mg.Client(gateway_cluster.service_url) as client:  # its ledger is made now, as the broker's
            sent = await (await client.create_producer(f"persistent://{namespace}/three-copies")).send(b"x")
        metadata = (await http.get(f"/admin/v2/ledgers/{sent.ledger_id()}")).json()
        assert metadata["ensemble_size"] == 2


async def backlogs(admin: AdminClient, topics: list[str]) -> dict[str, list[int]]:
    """Each subscription's backlog on each partition of ``topics``, in order."""
    out: dict[str, list[int]] = {}
    for topic in topics:
        for stats in await admin.partition_stats(topic):
            for sub in stats.subscriptions:
                out.setdefault(sub.name, []).append(sub.backlog)
    return out


async def test_namespace_clear_backlog_and_unsubscribe_reach_every_topic(
    cli: Cli, namespace: str, gateway_cluster: GatewayCluster, admin: AdminClient,
):
    plain, partitioned = f"persistent://{namespace}/plain", f"persistent://{namespace}/parts"
    await admin.create_topic(plain)
    await admin.create_topic(partitioned, partitions=2)
    topics = [plain, partitioned]
    for topic in topics:
        for sub in ("a", "b"):
            await admin.create_subscription(topic, sub, mg.MessageId.earliest)
    async with mg.Client(gateway_cluster.service_url) as client:
        for topic in topics:
            producer = await client.create_producer(topic, batching_enabled=False)
            for i in range(6):
                await producer.send(f"m{i}".encode(), partition_key=str(i))
        full = await backlogs(admin, topics)
        assert sum(full["a"]) == sum(full["b"]) == 12 and min(full["a"]) > 0

        assert await cli.ok("namespaces", "clear-backlog", namespace, "-s", "a") == ""
        assert await backlogs(admin, topics) == {"a": [0, 0, 0], "b": full["b"]}
        assert await cli.ok("namespaces", "clear-backlog", namespace) == ""
        assert await backlogs(admin, topics) == {"a": [0, 0, 0], "b": [0, 0, 0]}

        consumer = await client.subscribe(plain, "a")
        reason = await cli.refused("namespaces", "unsubscribe", namespace, "-s", "a")
        assert "Subscription has active connected consumers" in reason
        assert [await admin.subscriptions(t) for t in topics] == [["a", "b"], ["a", "b"]]  # nothing deleted
        await consumer.close()
    assert await cli.ok("namespaces", "unsubscribe", namespace, "-s", "a") == ""
    assert [await admin.subscriptions(t) for t in topics] == [["b"], ["b"]]


async def test_compaction_threshold_verbs_compact_a_topic_past_it(
    cli: Cli, namespace: str, gateway_cluster: GatewayCluster, admin: AdminClient,
):
    """Past 2 KiB not yet compacted, the owner compacts the topic at a policy round (every
    0.5 s on this cluster): a compacted reader then sees the latest value of each key."""
    assert "compactionThreshold must be 0 or more" in await cli.refused(
        "namespaces", "set-compaction-threshold", namespace, "-t", "-1")
    assert "not a size" in await cli.refused("namespaces", "set-compaction-threshold", namespace, "-t", "lots")
    assert (await admin.namespace_policies(namespace)).HasField("compaction_threshold") is False
    topic = f"persistent://{namespace}/auto-compacted"
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(topic, batching_enabled=False)
        latest = {}
        for i in range(40):
            key, data = f"k{i % 4}", f"{i:03d}".encode() * 30
            await producer.send(data, partition_key=key)
            latest[key] = data
        assert (await admin.compaction_status(topic)).status == "NOT_RUN"  # 3.6 KiB and no threshold yet

        assert await cli.ok("namespaces", "set-compaction-threshold", namespace, "-t", "2K") == ""
        assert await cli.ok("namespaces", "get-compaction-threshold", namespace) == "2048\n"

        async def compacted() -> bool:
            return (await admin.compaction_status(topic)).status == "SUCCESS"

        assert await eventually(compacted), await admin.compaction_status(topic)
        reader = await client.create_reader(topic, mg.MessageId.earliest, is_read_compacted=True)
        seen = []
        while await reader.has_message_available():
            msg = await reader.read_next(10_000)
            seen.append((msg.partition_key(), msg.data()))
        await reader.close()
        assert sorted(seen) == sorted(latest.items())  # one message per key: compacted
    assert await cli.ok("namespaces", "remove-compaction-threshold", namespace) == ""
    assert await cli.ok("namespaces", "get-compaction-threshold", namespace) == ""


async def test_auto_topic_creation_verbs_decide_what_a_first_producer_creates(
    cli: Cli, namespace: str, gateway_cluster: GatewayCluster, admin: AdminClient,
):
    """The cluster's broker auto-creates non-partitioned topics; the namespace's override
    makes them partitioned (3 partitions), or forbids them, at both doors."""
    import pulsar

    from magnetar.testing.pulsarclient import pulsar_client

    assert "cannot be null when the type is partitioned" in await cli.refused(
        "namespaces", "set-auto-topic-creation", namespace, "-e", "-t", "partitioned")
    assert await cli.ok("namespaces", "get-auto-topic-creation", namespace) == ""
    assert await cli.ok("namespaces", "set-auto-topic-creation", namespace, "-e", "-t", "partitioned", "-n", "3") == ""
    assert json.loads(await cli.ok("namespaces", "get-auto-topic-creation", namespace)) == {
        "allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 3}
    pulsar_side = pulsar_client(gateway_cluster.broker.pulsar_url, operation_timeout_seconds=15)
    try:
        async with mg.Client(gateway_cluster.service_url) as client:
            topic = f"persistent://{namespace}/auto-parts"
            consumer = await client.subscribe(topic, "s")
            assert await admin.partitions(topic) == 3
            producer = await client.create_producer(topic, batching_enabled=False)
            for i in range(6):
                await producer.send(f"m{i}".encode(), partition_key=f"k{i}")
            got = sorted([(await consumer.receive(10_000)).data() for _ in range(6)])
            assert got == [f"m{i}".encode() for i in range(6)]
            by_pulsar = f"persistent://{namespace}/auto-parts-pulsar"
            await asyncio.to_thread(lambda: pulsar_side.create_producer(by_pulsar).close())
            assert await admin.partitions(by_pulsar) == 3
            # A reader of a missing topic creates it as a consumer does; its first question
            # already does, so one starting at a message id is refused as on any partitioned topic.
            read_first = f"persistent://{namespace}/read-first"
            with pytest.raises(mg.InvalidArgument, match="partitioned topic"):
                await client.create_reader(read_first, mg.MessageId(-1, 0, 0))
            assert await admin.partitions(read_first) == 3
            reader = await client.create_reader(f"{read_first}-2", mg.MessageId.earliest)
            assert await admin.partitions(f"{read_first}-2") == 3
            await (await client.create_producer(f"{read_first}-2")).send(b"read")
            assert (await reader.read_next(10_000)).data() == b"read"
            # The dead letter topic a nack creates is partitioned too, and keeps the message.
            retried = await client.subscribe(
                topic, "d", consumer_type=mg.ConsumerType.Shared, initial_position=mg.InitialPosition.Earliest,
                negative_ack_redelivery_delay_ms=100, dead_letter_policy=mg.ConsumerDeadLetterPolicy(max_redeliver_count=1))
            await retried.negative_acknowledge(await retried.receive(10_000))
            dead = f"{topic}-d-DLQ"

            async def dead_lettered() -> bool:
                return dead in await admin.topics(namespace)

            assert await eventually(dead_lettered, timeout=15.0)
            assert await admin.partitions(dead) == 3
            dead_reader = await client.subscribe(dead, "read", initial_position=mg.InitialPosition.Earliest)
            assert (await dead_reader.receive(10_000)).data().startswith(b"m")

            assert await cli.ok("namespaces", "set-auto-topic-creation", namespace) == ""  # no --enable: forbidden
            with pytest.raises(TopicNotFound, match="Topic not found"):
                await client.create_producer(f"persistent://{namespace}/forbidden")
            with pytest.raises(pulsar.TopicNotFound):
                await asyncio.to_thread(pulsar_side.subscribe, f"persistent://{namespace}/forbidden-pulsar", "s")
            assert await admin.topics(namespace) == sorted([topic, by_pulsar, read_first, f"{read_first}-2", dead])

            assert await cli.ok("namespaces", "remove-auto-topic-creation", namespace) == ""  # the broker's: plain
            plain = f"persistent://{namespace}/plain"
            await (await client.create_producer(plain)).send(b"x")
            assert await admin.partitions(plain) == 0
    finally:
        await asyncio.to_thread(pulsar_side.close)


async def test_create_missed_partitions_and_bundle_range_verbs(
    cli: Cli, namespace: str, gateway_cluster: GatewayCluster, admin: AdminClient,
):
    import zlib

    from magnetar.metadata.managed_ledgers import ZkManagedLedgerStore
    from magnetar.metadata.session import ZkSession

    tenant, ns = namespace.split("/")
    topic = f"persistent://{namespace}/parts"
    await admin.create_topic(topic, partitions=3)
    async with mg.Client(gateway_cluster.service_url) as client:
        await (await client.create_producer(f"{topic}-partition-1")).send(b"x")  # the only one used
    session = ZkSession(gateway_cluster.zk_connect, gateway_cluster.zk_root)
    await session.start()
    try:
        store = ZkManagedLedgerStore(session)
        assert sorted(await store.list_topics(tenant, ns)) == ["parts-partition-1"]
        assert await cli.ok("topics", "create-missed-partitions", topic) == ""
        assert sorted(await store.list_topics(tenant, ns)) == [f"parts-partition-{i}" for i in range(3)]
        assert await cli.ok("topics", "create-missed-partitions", topic) == ""  # nothing missing: nothing done
        await cli.refused("topics", "create-missed-partitions", f"{topic}-partition-0")
        await cli.refused("topics", "create-missed-partitions", f"persistent://{namespace}/none")
        assert sorted(await store.list_topics(tenant, ns)) == [f"parts-partition-{i}" for i in range(3)]
    finally:
        await session.close()

    ranges = [b.bundle for b in await admin.bundles(namespace)]
    for name in (topic, f"{topic}-partition-2"):
        got = (await cli.ok("topics", "bundle-range", name)).strip()
        assert got in ranges
        low, high = (int(edge, 16) for edge in got.split("_"))
        assert low <= zlib.crc32(name.encode()) <= high
    await cli.refused("topics", "bundle-range", "persistent://no-such-tenant/ns/t")


async def test_topic_policy_verbs_override_the_namespaces_and_fall_back_to_it(
    cli: Cli, namespace: str, gateway_cluster: GatewayCluster, admin: AdminClient,
):
    topic = f"persistent://{namespace}/topic-ttl"
    other = f"persistent://{namespace}/namespace-ttl"
    await cli.ok("namespaces", "set-message-ttl", namespace, "-ttl", "3600")
    assert "not found" in await cli.refused("topics", "get-message-ttl", topic)  # as Pulsar's: no topic yet
    assert "not found" in await cli.refused("topics", "set-message-ttl", topic, "-ttl", "5")
    await cli.ok("topics", "create", topic)
    assert await cli.ok("topics", "get-message-ttl", topic) == ""  # the topic sets none
    assert await cli.ok("topics", "get-message-ttl", topic, "--applied") == "3600\n"  # its namespace's
    async with mg.Client(gateway_cluster.service_url) as client:
        for name in (topic, other):
            await (await client.subscribe(name, "s")).close()
            producer = await client.create_producer(name, batching_enabled=False)
            for i in range(3):
                await producer.send(b"old-%d" % i)
        assert await cli.ok("topics", "set-message-ttl", topic, "-ttl", "1") == ""
        assert await cli.ok("topics", "get-message-ttl", topic) == "1\n"

        async def expired() -> bool:
            return await backlog(admin, topic, "s") == 0

        assert await eventually(expired, timeout=15.0)
        assert await backlog(admin, other, "s") == 3  # its namespace's hour applies there
    assert await cli.ok("topics", "remove-message-ttl", topic) == ""
    assert await cli.ok("topics", "get-message-ttl", topic, "--applied") == "3600\n"  # the namespace's again

    before = await admin.topic_policies(topic)
    assert "message TTL must >= 0" in await cli.refused("topics", "set-message-ttl", topic, "-ttl", "-1")
    await cli.refused("topics", "set-message-ttl", f"persistent://{namespace}-missing/t", "-ttl", "5")
    assert await admin.topic_policies(topic) == before



def _pulsar_producer_refused(cluster: GatewayCluster, topic: str) -> str:
    """pulsar-client's producer on ``topic``: the error it gets (its class name and text)."""
    import pulsar

    from magnetar.testing.pulsarclient import pulsar_client

    client = pulsar_client(cluster.broker.pulsar_url, operation_timeout_seconds=10)
    try:
        client.create_producer(topic)
    except pulsar.ProducerBusy as exc:
        return f"ProducerBusy {exc}"
    finally:
        client.close()
    return "created"



async def test_max_producers_and_consumers_refuse_one_too_many_at_both_doors(
    cli: Cli, namespace: str, gateway_cluster: GatewayCluster, admin: AdminClient,
):
    topic = f"persistent://{namespace}/limits"
    await admin.create_topic(topic)
    await cli.ok("namespaces", "set-max-producers-per-topic", namespace, "-p", "2")
    assert await cli.ok("topics", "set-max-producers", topic, "-p", "1") == ""
    assert await cli.ok("topics", "get-max-producers", topic) == "1\n"
    assert await cli.ok("topics", "set-max-consumers", topic, "-c", "1") == ""
    async with mg.Client(gateway_cluster.service_url) as client:
        first = await client.create_producer(topic)
        with pytest.raises(mg.ProducerBusy, match="Topic reached max producers limit"):
            await client.create_producer(topic)
        assert (await asyncio.to_thread(_pulsar_producer_refused, gateway_cluster, topic)).startswith("ProducerBusy")
        assert await cli.ok("topics", "remove-max-producers", topic) == ""
        assert await cli.ok("topics", "get-max-producers", topic, "--applied") == "2\n"  # the namespace's
        second = await client.create_producer(topic)  # the namespace's 2 applies at once (this broker took it)
        with pytest.raises(mg.ProducerBusy, match="Topic reached max producers limit"):
            await client.create_producer(topic)
        await client.subscribe(topic, "a")
        with pytest.raises(mg.ConsumerBusy, match="Topic reached max consumers limit"):
            await client.subscribe(topic, "b")
        await first.send(b"kept")
        await second.close()
    assert "maxProducers must be 0 or more" in await cli.refused("topics", "set-max-producers", topic, "-p", "-1")
    assert (await admin.topic_policies(topic)).max_consumers_per_topic == 1



@pytest.mark.parametrize("cli", ["grpc"], indirect=True)  # the REST door's verbs: the other topic tests
async def test_a_topic_dispatch_rate_paces_its_subscription_and_loses_nothing(
    cli: Cli, namespace: str, gateway_cluster: GatewayCluster, admin: AdminClient,
):
    topic = f"persistent://{namespace}/paced"
    await admin.create_topic(topic)
    assert await cli.ok("topics", "set-dispatch-rate", topic, "-md", "4") == ""  # 4 a second; the namespace none
    got = json.loads(await cli.ok("topics", "get-dispatch-rate", topic))
    assert got["dispatchThrottlingRateInMsg"] == 4 and got["ratePeriodInSecond"] == 1
    sent = [b"m-%d" % i for i in range(10)]
    async with mg.Client(gateway_cluster.service_url) as client:
        consumer = await client.subscribe(topic, "s", receiver_queue_size=100)
        producer = await client.create_producer(topic, batching_enabled=False)
        for payload in sent:
            await producer.send(payload)
        received = []
        for _ in sent:
            message = await consumer.receive(timeout_millis=10_000)
            received.append(message.data())
            await consumer.acknowledge(message)
    assert sorted(received) == sorted(sent)
    stats = next(s for s in (await admin.topic_stats(topic)).subscriptions if s.name == "s")
    assert stats.dispatch_throttled_msg_events > 0 and stats.dispatch_throttled_time_ms > 0
    assert await cli.ok("topics", "remove-dispatch-rate", topic) == ""
    assert await cli.ok("topics", "get-dispatch-rate", topic) == ""



@pytest.mark.parametrize("cli", ["grpc"], indirect=True)  # REST is the other half of the test
async def test_a_topic_publish_rate_paces_its_producer_and_loses_nothing(
    cli: Cli, namespace: str, gateway_cluster: GatewayCluster, admin: AdminClient,
):
    """Set by ``topics set-publish-rate`` and read back over REST; 10 messages a second
    pace a producer of 25 (the produce door pauses its stream); removed over REST."""
    import httpx

    topic = f"persistent://{namespace}/paced-producer"
    path = f"/admin/v2/persistent/{namespace}/paced-producer/publishRate"
    await admin.create_topic(topic)
    assert await cli.ok("topics", "set-publish-rate", topic, "-m", "10") == ""
    async with httpx.AsyncClient(base_url=gateway_cluster.url, timeout=30) as http:
        assert (await http.get(path)).json()["publishThrottlingRateInMsg"] == 10
        sent = [b"p-%d" % i for i in range(25)]
        async with mg.Client(gateway_cluster.service_url) as client:
            consumer = await client.subscribe(topic, "s")
            producer = await client.create_producer(topic, batching_enabled=False)
            began = asyncio.get_running_loop().time()
            for payload in sent:
                await producer.send(payload)
            took = asyncio.get_running_loop().time() - began
            throttled = (await admin.topic_stats(topic)).publishers[0].throttled_time_ms
            received = sorted([(await consumer.receive(10_000)).data() for _ in sent])
        assert received == sorted(sent)
        assert throttled > 0 and took >= 1.0, (throttled, took)  # 25 at 10/s: over a second past the first bucket
        assert (await http.delete(path)).status_code == 204
        assert (await http.get(path)).status_code == 204  # the topic sets none again


def _ledgers(stats: object) -> list[int]:
    return [ledger.ledger_id for ledger in stats.ledgers]  # type: ignore[attr-defined]


@pytest.mark.parametrize("cli", ["grpc"], indirect=True)  # the REST door's verbs: the other topic tests
async def test_a_topic_retention_keeps_consumed_ledgers_and_removed_falls_back_to_the_namespaces(
    cli: Cli, namespace: str, gateway_cluster: GatewayCluster, admin: AdminClient,
):
    """The namespace keeps nothing consumed (the broker's 0/0); a topic retention of an hour
    keeps its consumed ledger where its neighbour's goes; removed through the CLI, the
    namespace's applies and the ledger goes."""
    kept, plain = f"persistent://{namespace}/retained", f"persistent://{namespace}/not-retained"
    for topic in (kept, plain):
        await admin.create_topic(topic)
    assert await cli.ok("topics", "set-retention", kept, "-t", "60", "-s", "10") == ""
    first: dict[str, int] = {}
    async with mg.Client(gateway_cluster.service_url) as client:
        for topic in (kept, plain):  # consumed and acknowledged, then a new ledger after the unload
            consumer = await client.subscribe(topic, "s")
            producer = await client.create_producer(topic, batching_enabled=False)
            await producer.send(b"old")
            await consumer.acknowledge(await consumer.receive(10_000))
            await consumer.close()
            await producer.close()
            first[topic] = _ledgers(await admin.internal_stats(topic))[0]
            await admin.unload_topic(topic)
            await (await client.create_producer(topic)).send(b"new")  # loaded again, writing a new ledger

        async def plain_trimmed() -> bool:
            return first[plain] not in _ledgers(await admin.internal_stats(plain))

        assert await eventually(plain_trimmed, timeout=15.0)  # a retention round ran over both
        assert first[kept] in _ledgers(await admin.internal_stats(kept))  # the topic's hour keeps it
        assert await cli.ok("topics", "remove-retention", kept) == ""

        async def kept_trimmed() -> bool:
            return first[kept] not in _ledgers(await admin.internal_stats(kept))

        assert await eventually(kept_trimmed, timeout=15.0)


async def test_topic_deduplication_backlog_quota_and_delayed_delivery_override_the_namespaces(
    cli: Cli, namespace: str, gateway_cluster: GatewayCluster, admin: AdminClient,
):
    """The three topic policies no other test drives through a client: each set on one topic
    acts on its producers and consumers where its namespace says otherwise (or nothing), and
    removed, the namespace's applies again."""
    dedup, quota, delayed = (f"persistent://{namespace}/{name}" for name in ("dedup", "quota", "delayed"))
    await cli.ok("namespaces", "set-deduplication", namespace, "--disable")
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(dedup, producer_name="p", batching_enabled=False)
        assert await cli.ok("topics", "set-deduplication", dedup, "--enable") == ""
        await producer.send(b"a", sequence_id=1)
        assert (await producer.send(b"a", sequence_id=1)).ledger_id() == -1  # the topic's: deduplicated
        assert await cli.ok("topics", "remove-deduplication", dedup) == ""
        assert (await producer.send(b"a", sequence_id=1)).ledger_id() >= 0  # the namespace's: stored again
        assert (await admin.topic_stats(dedup)).entries == 2

        await client.subscribe(quota, "s")
        producer = await client.create_producer(quota, batching_enabled=False)
        assert await cli.ok("topics", "set-backlog-quota", quota, "-l", "2000", "-p", "producer_exception") == ""
        with pytest.raises(mg.ProducerBlockedQuotaExceeded):
            for _ in range(20):
                await producer.send(b"x" * 500)
        assert await cli.ok("topics", "remove-backlog-quota", quota) == ""
        await producer.send(b"after")  # the namespace sets no quota

        consumer = await client.subscribe(delayed, "s", consumer_type=mg.ConsumerType.Shared)
        producer = await client.create_producer(delayed)
        assert await cli.ok("topics", "set-delayed-delivery", delayed, "--disable") == ""
        await producer.send(b"at-once", deliver_after=timedelta(minutes=5))
        assert (await consumer.receive(timeout_millis=10_000)).data() == b"at-once"
        assert await cli.ok("topics", "remove-delayed-delivery", delayed) == ""
        await producer.send(b"later", deliver_after=timedelta(minutes=5))  # the namespace's: delayed
        with pytest.raises(mg.Timeout):
            await consumer.receive(timeout_millis=500)


async def test_split_bundle_keeps_producers_and_consumers_going_through_rest_and_the_cli(
    shell: WarmMagnetar, gateway_cluster: GatewayCluster, http: httpx.AsyncClient,
):
    """A namespace made with explicit boundaries, split three ways (REST by topic count,
    the CLI at a given position, REST in the middle with unload) while SDK producers
    publish and consumers receive: every message arrives, in order, and the clients keep
    going; the stored boundaries are what the splits made."""
    from magnetar.common.bundles import NamespaceBundles

    cli = Cli(shell, gateway_cluster, "rest")
    tenant = unique("split")
    namespace = f"{tenant}/ns"
    assert (await http.put(f"/admin/v2/tenants/{tenant}", json={"adminRoles": [], "allowedClusters": ["standalone"]})).status_code == 204
    made = {"boundaries": ["0x00000000", "0x80000000", "0xffffffff"], "numBundles": 2}
    assert (await http.put(f"/admin/v2/namespaces/{namespace}", json={"bundles": made})).status_code == 204
    assert (await http.get(f"/admin/v2/namespaces/{namespace}")).json()["bundles"] == made
    low, high = NamespaceBundles.of(made["boundaries"]).ranges
    # Two topics in each bundle (the topic-count split needs two).
    by_bundle: dict[str, list[str]] = {low: [], high: []}
    for i in range(100):
        name = f"persistent://{namespace}/t{i}"
        placed = by_bundle[NamespaceBundles.of(made["boundaries"]).bundle_of(name)]
        if len(placed) < 2:
            placed.append(name)
    topics = by_bundle[low] + by_bundle[high]
    assert len(topics) == 4

    sent = {t: 0 for t in topics}
    received: dict[str, list[int]] = {t: [] for t in topics}
    stop = asyncio.Event()
    async with mg.Client(gateway_cluster.service_url) as client:
        producers = {t: await client.create_producer(t, batching_enabled=False) for t in topics}
        consumers = {t: await client.subscribe(t, "s", consumer_type=mg.ConsumerType.Failover) for t in topics}

        async def publish(topic: str) -> None:
            while not stop.is_set():
                await producers[topic].send(str(sent[topic]).encode())
                sent[topic] += 1
                await asyncio.sleep(0.005)

        async def consume(topic: str) -> None:
            while True:
                msg = await consumers[topic].receive(20_000)
                received[topic].append(int(msg.data()))
                await consumers[topic].acknowledge(msg)

        tasks = [asyncio.create_task(publish(t)) for t in topics] + [asyncio.create_task(consume(t)) for t in topics]
        try:
            async def flowing() -> bool:
                return all(len(received[t]) >= 5 for t in topics)

            async def keeps_going() -> bool:
                before = {t: len(received[t]) for t in topics}
                return bool(await eventually(lambda: asyncio.sleep(0, all(len(received[t]) > before[t] + 5 for t in topics))))

            assert await eventually(flowing)
            r = await http.put(f"/admin/v2/namespaces/{namespace}/{low}/split",
                               params={"splitAlgorithmName": "topic_count_equally_divide"})
            assert r.status_code == 204, r.text
            after_rest = (await http.get(f"/admin/v2/namespaces/{namespace}/bundles")).json()
            assert after_rest["numBundles"] == 3
            split_low = [b for b in after_rest["owners"] if int(b.split("_")[1], 16) <= 0x80000000]
            assert len(split_low) == 2
            assert sorted(NamespaceBundles.of(after_rest["boundaries"]).bundle_of(t) for t in by_bundle[low]) == sorted(split_low)
            handles = [*consumers.values(), *producers.values()]
            assert all(h.partitions[0].reconnects == 0 for h in handles)  # nobody disturbed

            assert await keeps_going()
            printed = await cli.ok("namespaces", "split-bundle", namespace, "--bundle", high,
                                   "--split-algorithm-name", "specified_positions_divide", "--split-boundaries", "0xc0000000")
            assert printed.split() == ["0x80000000_0xc0000000", "0xc0000000_0xffffffff"]

            middle = split_low[0]
            r = await http.put(f"/admin/v2/namespaces/{namespace}/{middle}/split", params={"unload": "true"})
            assert r.status_code == 204, r.text
            data = (await http.get(f"/admin/v2/namespaces/{namespace}/bundles")).json()
            assert data["numBundles"] == 5 and "0xc0000000" in data["boundaries"]
            assert (await http.get(f"/admin/v2/namespaces/{namespace}")).json()["bundles"] == {
                "boundaries": data["boundaries"], "numBundles": 5}
            async with AdminClient(gateway_cluster.service_url) as grpc_admin:  # GetBundlesData
                stored = await grpc_admin.bundles_data(namespace)
            assert ([f"0x{b:08x}" for b in stored.boundaries], stored.num_bundles) == (data["boundaries"], 5)

            # Refused, nothing changed: a bundle split already, an unknown algorithm, no namespace.
            r = await http.put(f"/admin/v2/namespaces/{namespace}/{low}/split")
            assert r.status_code == 412 and "Invalid bundle range" in r.json()["reason"]
            r = await http.put(f"/admin/v2/namespaces/{namespace}/{high[:11]}c0000000/split",
                               params={"splitAlgorithmName": "by_magic"})
            assert r.status_code == 400 and "Unsupported split algorithm" in r.json()["reason"]
            assert "does not exist" in await cli.refused("namespaces", "split-bundle", f"{tenant}/none", "-b", low)
            assert (await http.get(f"/admin/v2/namespaces/{namespace}/bundles")).json()["boundaries"] == data["boundaries"]

            assert await keeps_going()
            stop.set()
            await asyncio.gather(*tasks[:len(topics)])

            async def all_in() -> bool:
                return all(received[t] and max(received[t]) == sent[t] - 1 for t in topics)

            assert await eventually(all_in, timeout=20)
        finally:
            stop.set()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    for t in topics:
        # Each new message comes next in order; a redelivery after the unload repeats one seen.
        fresh = [n for i, n in enumerate(received[t]) if n not in received[t][:i]]
        assert fresh == list(range(sent[t])), (t, received[t][:50])
