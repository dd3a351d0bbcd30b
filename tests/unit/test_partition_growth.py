"""Growing a partitioned topic (``TopicAdmin.update_partitions``) without a network: the
new partitions get every durable subscription first, the count is raised last, and a
failure on the way leaves the topic as it was (the count and the metadata)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from test_managed_ledger_core import FakeLedgerClient, MemoryStore

from magnetar.broker.topic_admin import TopicAdmin
from magnetar.common.errors import InvalidArgument, MetadataError, TopicNotFound
from magnetar.managedledger import ManagedLedger, ManagedLedgerConfig

TOPIC = "persistent://public/default/t"


class FakeTenants:
    """The partition counts of ZkTenantStore, with a log of what was done in which order."""

    max_partitions = 16

    def __init__(self, events: list[str], counts: dict[str, int]) -> None:
        self.events = events
        self.counts = counts
        self.fail_update: Exception | None = None

    async def get_partitions(self, tenant: str, namespace: str, topic: str, *, domain: str = "persistent") -> int:
        return self.counts.get(topic, 0)

    async def update_partitions(self, tenant: str, namespace: str, topic: str, partitions: int, *, domain: str = "persistent") -> int:
        if self.fail_update is not None:
            raise self.fail_update
        self.events.append(f"count {partitions}")
        old, self.counts[topic] = self.counts[topic], partitions
        return old


class LoggingStore(MemoryStore):
    """The in-memory managed-ledger store; cursor creations are logged, and the n-th
    one can be made to fail."""

    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events
        self.fail_at: int | None = None
        self.creations = 0

    async def put_cursor(self, t, n, topic, c, doc, version):
        if version is None:
            self.creations += 1
            if self.creations == self.fail_at:
                raise MetadataError("injected: ZooKeeper refused the write")
            self.events.append(f"cursor {topic}/{c}")
        return await super().put_cursor(t, n, topic, c, doc, version)


async def _setup() -> tuple[TopicAdmin, FakeTenants, LoggingStore, list[str]]:
    """A topic ``t`` of 2 partitions: subscription ``a`` on both, ``b`` only on partition 1."""
    events: list[str] = []
    store = LoggingStore(events)
    tenants = FakeTenants(events, {"t": 2})
    for local, subs in (("t-partition-0", ["a"]), ("t-partition-1", ["a", "b"])):
        await store.create("public", "default", local, {"ledgers": [], "properties": {}})
        for sub in subs:
            await store.put_cursor("public", "default", local, sub, {"mark_delete": [0, -1], "properties": {}}, None)
    events.clear()
    store.creations = 0
    service = SimpleNamespace(tenants=tenants, ml_store=store, ml_config=ManagedLedgerConfig())
    return TopicAdmin(service), tenants, store, events  # type: ignore[arg-type]


def _new_partitions_metadata(store: MemoryStore) -> tuple[list, list]:
    lists = [k for k in store.lists if k[2] in ("t-partition-2", "t-partition-3")]
    cursors = [k for k in store.cursors if k[2] in ("t-partition-2", "t-partition-3")]
    return lists, cursors


async def test_subscriptions_are_created_on_the_new_partitions_before_the_count_is_raised():
    admin, tenants, store, events = await _setup()
    assert await admin.update_partitions(TOPIC, 4) == 2
    assert tenants.counts["t"] == 4
    assert events == [
        "cursor t-partition-2/a", "cursor t-partition-2/b", "cursor t-partition-3/a", "cursor t-partition-3/b",
        "count 4",
    ]
    # A new partition's owner takes the cursor over and reads what is published there.
    ml = await ManagedLedger.open("public", "default", "t-partition-3", FakeLedgerClient(), store,
                                  ManagedLedgerConfig(cursor_persist_interval_s=0.01))
    try:
        cursor = ml.cursors["b"]
        position = await ml.add_entry(b"first")
        assert cursor.backlog() == 1
        assert await cursor.read_entries(10, 1 << 20) == [(position, b"first")]
    finally:
        await ml.close()


@pytest.mark.parametrize("fail_at", [1, 3])
async def test_a_failed_subscription_copy_leaves_the_count_and_the_metadata_as_they_were(fail_at: int):
    admin, tenants, store, events = await _setup()
    store.fail_at = fail_at  # 1: the first cursor; 3: partition 2 done, partition 3 half
    with pytest.raises(MetadataError, match="injected"):
        await admin.update_partitions(TOPIC, 4)
    assert tenants.counts["t"] == 2
    assert not any(e.startswith("count") for e in events)
    assert _new_partitions_metadata(store) == ([], [])
    store.fail_at = None  # the retry of the grow then works
    assert await admin.update_partitions(TOPIC, 4) == 2
    assert tenants.counts["t"] == 4
    lists, cursors = _new_partitions_metadata(store)
    assert len(lists) == 2 and len(cursors) == 4


async def test_a_failed_count_raise_undoes_the_new_partitions_metadata():
    admin, tenants, store, _ = await _setup()
    tenants.fail_update = MetadataError("injected: the session expired")
    with pytest.raises(MetadataError, match="injected"):
        await admin.update_partitions(TOPIC, 3)
    assert tenants.counts["t"] == 2
    assert _new_partitions_metadata(store) == ([], [])


async def test_bad_counts_are_refused_before_anything_is_written():
    admin, tenants, store, events = await _setup()
    for bad in (1, 17, True, "3"):
        with pytest.raises(InvalidArgument):
            await admin.update_partitions(TOPIC, bad)  # type: ignore[arg-type]
    with pytest.raises(TopicNotFound):
        await admin.update_partitions("persistent://public/default/other", 3)
    assert await admin.update_partitions(TOPIC, 2) == 2  # the same count changes nothing
    assert events == [] and tenants.counts["t"] == 2
