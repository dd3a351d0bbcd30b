"""``magnetar admin namespaces`` policy verbs made from the policy catalogue, through both
doors (gRPC and ``--admin-url``): each verb changes what real producers and consumers see,
and a bad value is one line on stderr, exit 1, with nothing changed."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import pytest
import pytest_asyncio
from gateway_support import GatewayCluster, eventually, unique

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
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
    it); one with a backlog, or with a producer connected, stays."""
    assert await cli.ok("namespaces", "get-inactive-topic-policies", namespace) == ""
    idle, backlogged, active = (f"persistent://{namespace}/{n}" for n in ("idle", "backlogged", "active"))
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(idle)
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
            return idle not in await admin.topics(namespace)

        assert await eventually(idle_deleted, timeout=15.0)
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
