"""Subscription admin with real ZooKeeper, bookies and two brokers: ``magnetar admin
topics subscriptions / create-subscription / unsubscribe / skip / clear-backlog /
reset-cursor``, checked through the topic stats and through what an SDK consumer
receives afterwards. The CLI is given one broker and reaches topics the other owns.

The tests share one cluster; each works in a namespace of its own (``ns``), whose bundles
nobody owns yet, so the broker a test asks first about a topic takes it."""

from __future__ import annotations

import asyncio
import subprocess
import time

import grpc
import pytest

import magnetar.asyncio as mg
from magnetar.common.bundles import bundle_of
from magnetar.common.grpcutil import CHANNEL_OPTIONS
from magnetar.common.names import TopicName
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.proto.v1 import broker_pb2_grpc as pb_grpc
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.processes import BrokerProcess, start_all
from magnetar.testing.shell import cli_fails as fails
from magnetar.testing.shell import cli_ok as ok
from magnetar.testing.shell import warm_magnetar as magnetar

pytestmark = pytest.mark.integration

QUORUM = dict(ensemble_size=2, write_quorum=2, ack_quorum=2)


class Cluster:
    def __init__(self, brokers: list[BrokerProcess]) -> None:
        self.brokers = brokers
        self.first, self.second = brokers[0].address, brokers[1].address

    def admin(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``magnetar admin`` given the first broker only."""
        return magnetar("admin", "--url", self.first, *args)

    async def call(self, method: str, request, address: str | None = None):
        async with grpc.aio.insecure_channel(address or self.first, options=CHANNEL_OPTIONS) as channel:
            return await getattr(pb_grpc.BrokerStub(channel), method)(request, timeout=10)

    async def owner(self, topic: str, via: str | None = None) -> str:
        return (await self.call("Lookup", pb.LookupRequest(topic=topic), via)).broker_address

    async def stats(self, topic: str) -> pb.TopicStats:
        return await self.call("GetTopicStats", pb.TopicStatsRequest(topic=topic), await self.owner(topic))

    async def backlog(self, topic: str, subscription: str) -> int:
        subs = {s.name: s for s in (await self.stats(topic)).subscriptions}
        return subs[subscription].backlog


@pytest.fixture(scope="module")
def cluster(module_bookie_factory, module_broker_factory) -> Cluster:
    brokers = [module_broker_factory.create(**QUORUM), module_broker_factory.create(**QUORUM)]
    start_all([module_bookie_factory.create(), module_bookie_factory.create(), *brokers])  # start-ups overlap
    return Cluster(brokers)


@pytest.fixture
async def ns(cluster: Cluster) -> str:
    """``persistent://public/sa-<hex>``: a new namespace, none of its bundles owned yet."""
    return f"persistent://{await new_namespace(cluster.first, 'sa')}"


async def produce(url: str, topic: str, n: int, pause_after: int | None = None) -> tuple[list[str], int]:
    """n unbatched messages ``m0``…; returns their ids and a time (ms) between message
    ``pause_after`` - 1 and ``pause_after``."""
    ids: list[str] = []
    between = 0
    async with mg.Client(url) as client:
        producer = await client.create_producer(topic, batching_enabled=False)
        for i in range(n):
            if i == pause_after:
                await asyncio.sleep(0.3)
                between = int(time.time() * 1000)
                await asyncio.sleep(0.3)
            ids.append(str(await producer.send(b"m%d" % i)))
    return ids, between


async def received(consumer, n: int) -> list[bytes]:
    out = []
    for _ in range(n):
        msg = await consumer.receive(timeout_millis=10_000)
        out.append(msg.data())
        await consumer.acknowledge(msg)
    return out


async def nothing_more(consumer) -> bool:
    try:
        msg = await consumer.receive(timeout_millis=500)
    except mg.Timeout:
        return True
    raise AssertionError(f"unexpected message {msg.data()!r}")


async def test_create_list_and_delete_subscriptions(cluster, ns):
    topic = f"{ns}/sa-basic"
    ids, _ = await produce(cluster.second, topic, 10)  # the second broker owns it
    assert await cluster.owner(topic) == cluster.second

    assert ok(cluster.admin("topics", "subscriptions", topic)) == ""
    assert ok(cluster.admin("topics", "create-subscription", topic, "-s", "from-start", "-m", "earliest")) == ""
    ok(cluster.admin("topics", "create-subscription", topic, "-s", "from-now"))
    ok(cluster.admin("topics", "create-subscription", topic, "-s", "from-5", "--message-id", ids[5]))
    assert ok(cluster.admin("topics", "subscriptions", topic)).splitlines() == ["from-5", "from-now", "from-start"]
    assert [await cluster.backlog(topic, s) for s in ("from-start", "from-now", "from-5")] == [10, 0, 5]

    assert "already exists" in fails(cluster.admin("topics", "create-subscription", topic, "-s", "from-now"))
    assert "invalid message id" in fails(cluster.admin("topics", "create-subscription", topic, "-s", "x", "-m", "nonsense"))
    assert "does not exist" in fails(cluster.admin("topics", "subscriptions", f"{ns}/nosuch"))
    assert "does not exist" in fails(cluster.admin("topics", "unsubscribe", topic, "-s", "nosuch"))

    async with mg.Client(f"{cluster.first},{cluster.second}") as client:
        consumer = await client.subscribe(topic, "from-5")
        assert await received(consumer, 5) == [b"m%d" % i for i in range(5, 10)]
        assert await nothing_more(consumer)
        start = await client.subscribe(topic, "from-start")
        assert await received(start, 10) == [b"m%d" % i for i in range(10)]
        await start.close()

        line = fails(cluster.admin("topics", "unsubscribe", topic, "-s", "from-5"))
        assert "consumer" in line and "force" in line
        assert "from-5" in ok(cluster.admin("topics", "subscriptions", topic)).splitlines()
        assert ok(cluster.admin("topics", "unsubscribe", topic, "-s", "from-start")) == ""  # no consumers left
        assert ok(cluster.admin("topics", "unsubscribe", topic, "-s", "from-5", "--force")) == ""
        await consumer.close()
    names = ok(cluster.admin("topics", "subscriptions", topic)).splitlines()
    if "from-5" in names:  # the forced-out consumer reconnected before it was closed
        ok(cluster.admin("topics", "unsubscribe", topic, "-s", "from-5"))
    assert ok(cluster.admin("topics", "subscriptions", topic)).splitlines() == ["from-now"]


async def test_skip_clear_backlog_and_reset_cursor(cluster, ns):
    topic = f"{ns}/sa-moves"
    ids, between = await produce(cluster.second, topic, 20, pause_after=10)
    ok(cluster.admin("topics", "create-subscription", topic, "-s", "s", "-m", "earliest"))
    assert await cluster.backlog(topic, "s") == 20

    async def first_received() -> bytes:
        async with mg.Client(cluster.first) as client:
            consumer = await client.subscribe(topic, "s")
            return (await consumer.receive(timeout_millis=10_000)).data()

    assert ok(cluster.admin("topics", "skip", topic, "-s", "s", "-n", "5")) == ""
    assert await cluster.backlog(topic, "s") == 15
    assert await first_received() == b"m5"

    ok(cluster.admin("topics", "clear-backlog", topic, "-s", "s"))
    assert await cluster.backlog(topic, "s") == 0

    ok(cluster.admin("topics", "reset-cursor", topic, "-s", "s", "--time", str(between)))
    assert await cluster.backlog(topic, "s") == 10
    assert await first_received() == b"m10"

    ok(cluster.admin("topics", "reset-cursor", topic, "-s", "s", "--message-id", ids[3]))
    assert await cluster.backlog(topic, "s") == 17
    assert await first_received() == b"m3"

    ok(cluster.admin("topics", "reset-cursor", topic, "-s", "s", "-m", "latest"))
    assert await cluster.backlog(topic, "s") == 0
    ok(cluster.admin("topics", "reset-cursor", topic, "-s", "s", "-t", "1h"))  # before every message
    assert await cluster.backlog(topic, "s") == 20
    ok(cluster.admin("topics", "skip", topic, "-s", "s", "-n", "100"))  # more than the backlog
    assert await cluster.backlog(topic, "s") == 0
    ok(cluster.admin("topics", "reset-cursor", topic, "-s", "s", "-m", "earliest"))
    assert await cluster.backlog(topic, "s") == 20

    # Refused, and nothing moves.
    assert "at least 1" in fails(cluster.admin("topics", "skip", topic, "-s", "s", "-n", "0"))
    assert "--time" in fails(cluster.admin("topics", "reset-cursor", topic, "-s", "s", "-t", "yesterday"))
    assert "invalid message id" in fails(cluster.admin("topics", "reset-cursor", topic, "-s", "s", "-m", "1"))
    assert "does not exist" in fails(cluster.admin("topics", "skip", topic, "-s", "nosuch", "-n", "1"))
    assert "does not exist" in fails(cluster.admin("topics", "clear-backlog", topic, "-s", "nosuch"))
    assert "does not exist" in fails(cluster.admin("topics", "reset-cursor", topic, "-s", "nosuch", "-t", "1m"))
    assert await cluster.backlog(topic, "s") == 20


async def test_reset_cursor_under_a_connected_consumer(cluster, ns):
    topic = f"{ns}/sa-live"
    ids, _ = await produce(cluster.second, topic, 8)
    async with mg.Client(cluster.first) as client:
        consumer = await client.subscribe(topic, "live", initial_position=mg.InitialPosition.Earliest)
        assert await received(consumer, 8) == [b"m%d" % i for i in range(8)]
        assert await nothing_more(consumer)
        ok(cluster.admin("topics", "reset-cursor", topic, "-s", "live", "-m", ids[2]))
        assert await received(consumer, 6) == [b"m%d" % i for i in range(2, 8)]
        assert await nothing_more(consumer)
        assert await cluster.backlog(topic, "live") == 0


def spread_partitioned_topic(ns: str, partitions: int) -> str:
    """A topic name in ``ns`` whose partitions fall in more than one bundle (so they can
    have different owners)."""
    for n in range(100):
        name = TopicName.parse(f"{ns}/sa-parts-{n}")
        if len({bundle_of(name.partition(i), 4) for i in range(partitions)}) > 1:
            return str(name)
    raise AssertionError("no spread name found")


async def test_partitioned_topic_with_partitions_on_both_brokers(cluster, ns):
    topic = spread_partitioned_topic(ns, 4)
    partitions = [f"{topic}-partition-{i}" for i in range(4)]
    await cluster.call("CreateTopic", pb.CreateTopicRequest(topic=topic, partitions=4))
    # Partition 0's bundle goes to the first broker; the others' to the second.
    await cluster.owner(partitions[0], via=cluster.first)
    for p in partitions[1:]:
        await cluster.owner(p, via=cluster.second)
    owners = {await cluster.owner(p) for p in partitions}
    assert owners == {cluster.first, cluster.second}

    async with mg.Client(cluster.second) as client:
        producer = await client.create_producer(topic, batching_enabled=False)
        ids = [await producer.send(b"m%d" % i, partition_key=f"k{i}") for i in range(40)]
    per_partition = {p: sum(1 for m in ids if m.partition() == i) for i, p in enumerate(partitions)}

    async def backlogs() -> dict[str, int]:
        return {p: await cluster.backlog(p, "ps") for p in partitions}

    ok(cluster.admin("topics", "create-subscription", topic, "-s", "ps", "-m", "earliest"))
    assert ok(cluster.admin("topics", "subscriptions", topic)).splitlines() == ["ps"]
    assert await backlogs() == per_partition
    line = fails(cluster.admin("topics", "create-subscription", topic, "-s", "other", "-m", str(ids[0])))
    assert "partitioned" in line

    ok(cluster.admin("topics", "skip", topic, "-s", "ps", "-n", "1"))
    assert await backlogs() == {p: max(0, n - 1) for p, n in per_partition.items()}
    ok(cluster.admin("topics", "clear-backlog", topic, "-s", "ps"))
    assert sum((await backlogs()).values()) == 0
    ok(cluster.admin("topics", "reset-cursor", topic, "-s", "ps", "-t", "1h"))
    assert await backlogs() == per_partition

    # A message id selects its partition; without a partition it is refused.
    target = next(m for m in ids if m.partition() == 1 and per_partition[partitions[1]] > 1)
    ok(cluster.admin("topics", "clear-backlog", topic, "-s", "ps"))
    ok(cluster.admin("topics", "reset-cursor", topic, "-s", "ps", "-m", str(target)))
    expected = {p: 0 for p in partitions}
    expected[partitions[1]] = sum(1 for m in ids if m.partition() == 1 and m.entry_id() >= target.entry_id())
    assert await backlogs() == expected
    assert "give the partition" in fails(cluster.admin("topics", "reset-cursor", topic, "-s", "ps", "-m", f"{target.ledger_id()}:{target.entry_id()}"))

    async with mg.Client(cluster.first) as client:
        consumer = await client.subscribe(topic, "ps")
        got = [(await consumer.receive(timeout_millis=10_000)) for _ in range(expected[partitions[1]])]
        assert got[0].message_id().entry_id_only() == target
        assert all(m.message_id().partition() == 1 for m in got)
        await consumer.close()

    # Asked directly, a broker that does not serve every partition says what to do.
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await cluster.call("ListSubscriptions", pb.ListSubscriptionsRequest(topic=topic), cluster.first)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "each partition to its owner" in info.value.details()

    ok(cluster.admin("topics", "unsubscribe", topic, "-s", "ps"))
    assert ok(cluster.admin("topics", "subscriptions", topic)) == ""


async def test_bad_requests_are_refused_with_a_clear_status(cluster, ns):
    topic = f"{ns}/sa-bad"
    await produce(cluster.first, topic, 3)
    owner = await cluster.owner(topic)
    await cluster.call("CreateSubscription", pb.CreateSubscriptionRequest(topic=topic, subscription="s", initial_position=pb.EARLIEST), owner)

    async def status(method: str, request, address: str = owner) -> tuple[grpc.StatusCode, str]:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await cluster.call(method, request, address)
        return info.value.code(), info.value.details()

    bad = grpc.StatusCode.INVALID_ARGUMENT
    assert (await status("CreateSubscription", pb.CreateSubscriptionRequest(topic=topic)))[0] == bad
    assert (await status("CreateSubscription", pb.CreateSubscriptionRequest(topic=topic, subscription="a/b")))[0] == bad
    code, details = await status("SkipMessages", pb.SkipMessagesRequest(topic=topic, subscription="s", count=0))
    assert code == bad and "at least 1" in details
    code, details = await status("ResetCursor", pb.ResetCursorRequest(topic=topic, subscription="s"))
    assert code == bad and "message id" in details
    code, _ = await status("ResetCursor", pb.ResetCursorRequest(topic=topic, subscription="s", timestamp_ms=-5))
    assert code == bad
    bad_id = pb.MessageIdData(ledger_id=-4, entry_id=0, partition=-1, batch_index=-1)
    code, _ = await status("ResetCursor", pb.ResetCursorRequest(topic=topic, subscription="s", message_id=bad_id))
    assert code == bad
    code, details = await status("SkipMessages", pb.SkipMessagesRequest(topic=topic, subscription="nosuch", count=1))
    assert code == grpc.StatusCode.NOT_FOUND and "nosuch" in details
    code, _ = await status("ListSubscriptions", pb.ListSubscriptionsRequest(topic=f"{ns}/sa-none"))
    assert code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION)
    code, _ = await status("ListSubscriptions", pb.ListSubscriptionsRequest(topic="a/b"))
    assert code == bad
    code, _ = await status("SetRetention", pb.SetRetentionRequest(
        namespace="public/default", policies=pb.RetentionPolicies(retention_time_minutes=-2)))
    assert code == bad
    code, _ = await status("SetRetention", pb.SetRetentionRequest(namespace="public/default"))
    assert code == bad
    code, _ = await status("GetRetention", pb.GetRetentionRequest(namespace="public/nosuch"))
    assert code == grpc.StatusCode.NOT_FOUND
    assert await cluster.backlog(topic, "s") == 3  # nothing moved
