"""Namespace retention with real ZooKeeper, bookies and a broker: the broker's retention
task deletes consumed ledgers as the namespace allows; ``magnetar admin namespaces
set-retention / get-retention``.

The broker's tests share one cluster and work in namespaces (or on topics) of their own;
``cluster_zk`` reads its metadata."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import AsyncIterator

import pytest

import magnetar.asyncio as mg
from magnetar.common.errors import InvalidArgument, NamespaceNotFound, NotFound
from magnetar.ledger.metadata import LedgerMetadata
from magnetar.metadata.codec import encode
from magnetar.metadata.errors import CorruptMetadata
from magnetar.metadata.ledgers import ZkLedgerMetadataStore
from magnetar.metadata.managed_ledgers import ZkManagedLedgerStore
from magnetar.metadata.session import ZkSession
from magnetar.metadata.tenants import NamespaceRetention, ZkTenantStore
from magnetar.testing.processes import BrokerProcess, start_all
from magnetar.testing.shell import cli_fails as fails
from magnetar.testing.shell import cli_ok as ok
from magnetar.testing.shell import warm_magnetar as magnetar

pytestmark = pytest.mark.integration

ENTRIES_PER_LEDGER = 4
MESSAGES = 18  # ledgers of 4, 4, 4, 4, 2 (+ the open one)


@pytest.fixture(scope="module")
def broker(module_bookie_factory, module_broker_factory) -> BrokerProcess:
    broker = module_broker_factory.create(
        ensemble_size=2, write_quorum=2, ack_quorum=2,
        max_entries_per_ledger=ENTRIES_PER_LEDGER, retention_check_interval_s=0.5,
        cursor_persist_interval_s=0.2,
    )
    start_all([module_bookie_factory.create(), module_bookie_factory.create(), broker])  # start-ups overlap
    return broker


@pytest.fixture
async def cluster_zk(zk_server, module_zk_root: str) -> AsyncIterator[ZkSession]:
    """A session on the shared cluster's metadata root."""
    session = ZkSession(zk_server.connect_string, module_zk_root)
    await session.start()
    try:
        yield session
    finally:
        await session.close()


def admin(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return magnetar("admin", "--url", broker.address, *args)


async def ledger_ids(zk_session, namespace: str, topic: str) -> list[int]:
    tenant, ns = namespace.split("/")
    doc, _ = await ZkManagedLedgerStore(zk_session).get(tenant, ns, topic)
    assert doc is not None
    return [entry["ledger_id"] for entry in doc["ledgers"]]


async def wait_for(predicate, timeout: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


async def produce(url: str, topic: str, n: int = MESSAGES) -> None:
    async with mg.Client(url) as client:
        producer = await client.create_producer(topic, batching_enabled=False)
        for i in range(n):
            await producer.send(b"m%d" % i)


async def test_consumed_ledgers_go_with_zero_retention_and_stay_with_unlimited(broker, cluster_zk):
    for ns, (minutes, mb) in {"public/none": (0, 0), "public/forever": (-1, -1)}.items():
        ok(admin(broker, "namespaces", "create", ns))
        assert ok(admin(broker, "namespaces", "set-retention", ns, "--time", str(minutes), "--size", str(mb))) == ""
        got = json.loads(ok(admin(broker, "namespaces", "get-retention", ns)))
        assert got == {"retentionTimeInMinutes": minutes, "retentionSizeInMB": mb}

    async with mg.Client(broker.address) as client:
        consumers = {}
        for ns in ("public/none", "public/forever"):
            topic = f"persistent://{ns}/rolling"
            consumers[ns] = await client.subscribe(topic, "sub", initial_position=mg.InitialPosition.Earliest)
            await produce(broker.address, topic)
        before = {ns: await ledger_ids(cluster_zk, ns, "rolling") for ns in consumers}
        assert all(len(ids) >= MESSAGES // ENTRIES_PER_LEDGER for ids in before.values()), before

        await asyncio.sleep(1.5)  # three retention rounds: nothing is consumed yet
        assert {ns: await ledger_ids(cluster_zk, ns, "rolling") for ns in consumers} == before

        for consumer in consumers.values():
            for i in range(MESSAGES):
                msg = await consumer.receive(timeout_millis=10_000)
                assert msg.data() == b"m%d" % i
                await consumer.acknowledge(msg)

        async def trimmed() -> list[int] | None:
            ids = await ledger_ids(cluster_zk, "public/none", "rolling")
            return ids if len(ids) <= 2 else None

        kept = await wait_for(trimmed, what="consumed ledgers to be deleted")
        gone = sorted(set(before["public/none"]) - set(kept))
        assert gone and kept == before["public/none"][-len(kept):]  # the oldest went
        ledgers = ZkLedgerMetadataStore(cluster_zk, LedgerMetadata.from_dict)

        async def deleted() -> bool | None:  # from the ledgers' metadata too (just after the list)
            for ledger_id in gone:
                try:
                    await ledgers.read(ledger_id)
                except NotFound:
                    continue
                return None
            return True

        await wait_for(deleted, what="the trimmed ledgers' metadata to be deleted")

        await asyncio.sleep(1.5)
        assert await ledger_ids(cluster_zk, "public/forever", "rolling") == before["public/forever"]

        # The remaining messages are still there for a new subscription of the kept topic.
        late = await client.subscribe("persistent://public/forever/rolling", "late", initial_position=mg.InitialPosition.Earliest)
        assert (await late.receive(timeout_millis=10_000)).data() == b"m0"


async def test_remove_retention_lets_consumed_ledgers_go(broker, cluster_zk):
    """``namespaces remove-retention``: the broker's default (keep nothing consumed) applies
    again to a namespace that kept everything."""
    ns = "public/unkept"
    ok(admin(broker, "namespaces", "create", ns))
    ok(admin(broker, "namespaces", "set-retention", ns, "--time", "-1", "--size", "-1"))
    topic = f"persistent://{ns}/rolling"
    async with mg.Client(broker.address) as client:
        consumer = await client.subscribe(topic, "sub", initial_position=mg.InitialPosition.Earliest)
        await produce(broker.address, topic)
        for _ in range(MESSAGES):
            await consumer.acknowledge(await consumer.receive(timeout_millis=10_000))
        before = await ledger_ids(cluster_zk, ns, "rolling")
        assert len(before) >= MESSAGES // ENTRIES_PER_LEDGER, before
        assert ok(admin(broker, "namespaces", "remove-retention", ns)) == ""
        assert json.loads(ok(admin(broker, "namespaces", "get-retention", ns))) == {
            "retentionTimeInMinutes": 0, "retentionSizeInMB": 0,  # the broker's default applies
        }

        async def trimmed() -> list[int] | None:
            ids = await ledger_ids(cluster_zk, ns, "rolling")
            return ids if len(ids) <= 2 else None

        kept = await wait_for(trimmed, what="consumed ledgers to be deleted once retention is removed")
        assert kept == before[-len(kept):]  # the oldest went


async def test_topic_without_subscriptions_keeps_nothing_with_the_default_retention(broker, cluster_zk):
    # public/default sets no retention: the broker's defaults (0 and 0) apply.
    assert json.loads(ok(admin(broker, "namespaces", "get-retention", "public/default"))) == {
        "retentionTimeInMinutes": 0, "retentionSizeInMB": 0,
    }
    await produce(broker.address, "unread")

    async def trimmed() -> list[int] | None:
        ids = await ledger_ids(cluster_zk, "public/default", "unread")
        return ids if len(ids) <= 2 else None

    await wait_for(trimmed, what="closed ledgers of an unsubscribed topic to be deleted")


async def test_a_subscription_holds_data_back_until_it_acknowledges(broker, cluster_zk):
    ok(admin(broker, "namespaces", "create", "public/held"))
    ok(admin(broker, "namespaces", "set-retention", "public/held", "--time", "0", "--size", "0"))
    topic = "persistent://public/held/t"
    async with mg.Client(broker.address) as client:
        consumer = await client.subscribe(topic, "slow", initial_position=mg.InitialPosition.Earliest)
        await produce(broker.address, topic)
        before = await ledger_ids(cluster_zk, "public/held", "t")
        for _ in range(ENTRIES_PER_LEDGER + 1):  # the first ledger wholly, one of the second
            msg = await consumer.receive(timeout_millis=10_000)
            await consumer.acknowledge(msg)

        async def first_gone() -> bool:
            return (await ledger_ids(cluster_zk, "public/held", "t"))[0] != before[0]

        await wait_for(first_gone, what="the first, consumed ledger to go")
        await asyncio.sleep(1.5)
        assert await ledger_ids(cluster_zk, "public/held", "t") == before[1:]  # the rest is held back


async def test_retention_admin_errors(broker):
    assert "does not exist" in fails(admin(broker, "namespaces", "set-retention", "public/nosuch", "--time", "1", "--size", "1"))
    assert "does not exist" in fails(admin(broker, "namespaces", "get-retention", "public/nosuch"))
    # Pulsar's rules and reasons (as the gateway's POST .../retention gives them).
    line = fails(admin(broker, "namespaces", "set-retention", "public/default", "--time", "-2", "--size", "1"))
    assert "Invalid retention policy: time limit must be >= -1" in line
    line = fails(admin(broker, "namespaces", "set-retention", "public/default", "--time", "1", "--size", "-7"))
    assert "Invalid retention policy: size limit must be >= -1" in line
    assert "single time or size limit" in fails(admin(broker, "namespaces", "set-retention", "public/default", "--time", "0", "--size", "5"))
    fails(admin(broker, "namespaces", "get-retention", "no-slash"))
    usage = admin(broker, "namespaces", "set-retention", "public/default", "--time", "ten", "--size", "1")
    assert usage.returncode == 2
    # Nothing was changed by the refused calls.
    assert json.loads(ok(admin(broker, "namespaces", "get-retention", "public/default"))) == {
        "retentionTimeInMinutes": 0, "retentionSizeInMB": 0,
    }


async def test_tenant_store_retention(zk_session):
    store = ZkTenantStore(zk_session)
    await store.create_tenant("acme")
    await store.create_namespace("acme", "ns", {"other": 1})
    assert await store.get_retention("acme", "ns") is None
    await store.set_retention("acme", "ns", NamespaceRetention(60, -1))
    assert await store.get_retention("acme", "ns") == NamespaceRetention(60, -1)
    assert await store.get_policies("acme", "ns") == {
        "other": 1, "retention": {"retention_time_minutes": 60, "retention_size_mb": -1},
    }
    with pytest.raises(InvalidArgument):
        await store.set_retention("acme", "ns", NamespaceRetention(-2, 0))
    assert await store.get_retention("acme", "ns") == NamespaceRetention(60, -1)
    with pytest.raises(NamespaceNotFound):
        await store.set_retention("acme", "missing", NamespaceRetention(0, 0))
    with pytest.raises(NamespaceNotFound):
        await store.get_retention("acme", "missing")
    await zk_session.set(zk_session.paths.namespace("acme", "ns"), encode({"retention": {"retention_time_minutes": "x"}}))
    with pytest.raises(CorruptMetadata):
        await store.get_retention("acme", "ns")
