"""Tenants, namespaces and partitioned topics against a real ZooKeeper (metadata/tenants.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from magnetar.common.errors import (
    AlreadyExists,
    InvalidArgument,
    InvalidTopicName,
    NamespaceNotFound,
    TenantNotFound,
    TopicNotFound,
)
from magnetar.metadata.codec import decode, encode
from magnetar.metadata.errors import CorruptMetadata
from magnetar.metadata.session import ZkSession
from magnetar.metadata.tenants import ZkTenantStore

pytestmark = pytest.mark.integration


async def read_doc(session: ZkSession, path: str) -> dict[str, Any]:
    data, _ = await session.get(path)
    return decode(data, path)


@pytest.fixture
def store(zk_session: ZkSession) -> ZkTenantStore:
    return ZkTenantStore(zk_session, max_partitions=64)


# -- tenants ----------------------------------------------------------------------


async def test_tenant_lifecycle(store: ZkTenantStore, zk_session: ZkSession) -> None:
    assert await store.list_tenants() == []
    await store.create_tenant("acme", {"admin_roles": ["ops"], "allowed_clusters": ["c1"]})
    await store.create_tenant("zeta")
    assert await store.list_tenants() == ["acme", "zeta"]
    assert await store.get_tenant("acme") == {"admin_roles": ["ops"], "allowed_clusters": ["c1"]}
    assert await store.get_tenant("zeta") == {}
    # Stored as documented: <root>/admin/tenants/<tenant> holding the info as JSON.
    assert await read_doc(zk_session, f"{zk_session.paths.root}/admin/tenants/acme") == {
        "admin_roles": ["ops"],
        "allowed_clusters": ["c1"],
    }

    with pytest.raises(AlreadyExists, match="tenant acme already exists"):
        await store.create_tenant("acme", {"other": 1})
    assert await store.get_tenant("acme") == {"admin_roles": ["ops"], "allowed_clusters": ["c1"]}

    updated = await store.update_tenant(
        "acme", lambda info: {**info, "admin_roles": ["ops", "dev"]}
    )
    assert updated["admin_roles"] == ["ops", "dev"]
    assert (await store.get_tenant("acme"))["admin_roles"] == ["ops", "dev"]

    await store.delete_tenant("zeta")
    assert await store.list_tenants() == ["acme"]
    with pytest.raises(TenantNotFound, match="tenant zeta does not exist"):
        await store.get_tenant("zeta")
    with pytest.raises(TenantNotFound):
        await store.delete_tenant("zeta")
    with pytest.raises(TenantNotFound):
        await store.update_tenant("zeta", lambda info: info)
    assert await store.list_tenants() == ["acme"]  # the failed update created nothing


@pytest.mark.parametrize("bad", ["", "a/b", "..", "with space", "x" * 256])
async def test_bad_tenant_names_change_nothing(store: ZkTenantStore, bad: str) -> None:
    with pytest.raises(InvalidArgument, match="invalid tenant name"):
        await store.create_tenant(bad, {})
    with pytest.raises(InvalidArgument):
        await store.create_namespace(bad, "ns", {})
    assert await store.list_tenants() == []


async def test_bad_tenant_info_changes_nothing(store: ZkTenantStore) -> None:
    with pytest.raises(InvalidArgument):
        await store.create_tenant("acme", {"roles": {1, 2}})  # a set is not JSON
    assert await store.list_tenants() == []


async def test_delete_tenant_refuses_while_it_has_namespaces(store: ZkTenantStore) -> None:
    await store.create_tenant("acme", {})
    await store.create_namespace("acme", "prod", {})
    await store.create_namespace("acme", "dev", {})
    with pytest.raises(
        InvalidArgument, match=r"^The tenant still has active namespaces: tenant acme has 2 namespaces \(acme/dev, acme/prod\)"
    ):
        await store.delete_tenant("acme")
    assert await store.list_namespaces("acme") == ["acme/dev", "acme/prod"]
    await store.delete_namespace("acme", "dev")
    await store.delete_namespace("acme", "prod")
    await store.delete_tenant("acme")
    assert await store.list_tenants() == []


async def test_deleting_a_used_tenant_leaves_no_znodes(
    store: ZkTenantStore, zk_session: ZkSession
) -> None:
    await store.create_tenant("acme", {})
    await store.create_namespace("acme", "prod", {})
    await store.create_partitioned_topic("acme", "prod", "orders", 2)
    await store.delete_partitioned_topic("acme", "prod", "orders")
    await store.delete_namespace("acme", "prod")
    await store.delete_tenant("acme")
    admin = f"{zk_session.paths.root}/admin"
    assert await zk_session.children(f"{admin}/tenants") == []
    assert await zk_session.children(f"{admin}/partitioned-topics") == []


# -- namespaces -------------------------------------------------------------------


async def test_namespace_lifecycle(store: ZkTenantStore, zk_session: ZkSession) -> None:
    with pytest.raises(TenantNotFound, match="tenant acme does not exist"):
        await store.create_namespace("acme", "prod", {})
    await store.create_tenant("acme", {})
    await store.create_namespace("acme", "prod", {"retention_minutes": 60})
    await store.create_namespace("acme", "dev")
    with pytest.raises(AlreadyExists, match="namespace acme/prod already exists"):
        await store.create_namespace("acme", "prod", {})
    assert await store.list_namespaces("acme") == ["acme/dev", "acme/prod"]
    assert await store.get_policies("acme", "prod") == {"retention_minutes": 60}
    assert await store.get_policies("acme", "dev") == {}
    assert await read_doc(zk_session, zk_session.paths.namespace("acme", "prod")) == {
        "retention_minutes": 60
    }
    with pytest.raises(NamespaceNotFound, match="namespace acme/nope does not exist"):
        await store.get_policies("acme", "nope")
    with pytest.raises(TenantNotFound):
        await store.list_namespaces("nobody")

    await store.delete_namespace("acme", "dev")
    assert await store.list_namespaces("acme") == ["acme/prod"]
    with pytest.raises(NamespaceNotFound):
        await store.delete_namespace("acme", "dev")


@pytest.mark.parametrize(
    ("tenant", "ns"), [("acme", ""), ("acme", "a/b"), ("acme", "."), ("acme", "n s")]
)
async def test_bad_namespace_names(store: ZkTenantStore, tenant: str, ns: str) -> None:
    await store.create_tenant("acme", {})
    with pytest.raises(InvalidArgument, match="invalid namespace name"):
        await store.create_namespace(tenant, ns, {})
    assert await store.list_namespaces("acme") == []


async def test_update_policies(store: ZkTenantStore) -> None:
    await store.create_tenant("acme", {})
    await store.create_namespace("acme", "prod", {"ttl_s": 10})
    result = await store.update_policies("acme", "prod", lambda p: {**p, "ttl_s": 20, "dlq": True})
    assert result == {"ttl_s": 20, "dlq": True}
    assert await store.get_policies("acme", "prod") == {"ttl_s": 20, "dlq": True}

    def refuse(_policies: dict[str, Any]) -> dict[str, Any]:
        raise InvalidArgument("ttl must be positive")

    with pytest.raises(InvalidArgument, match="ttl must be positive"):
        await store.update_policies("acme", "prod", refuse)
    with pytest.raises(InvalidArgument, match="must return a mapping"):
        await store.update_policies("acme", "prod", lambda p: [1, 2])  # type: ignore[arg-type,return-value]
    assert await store.get_policies("acme", "prod") == {"ttl_s": 20, "dlq": True}

    with pytest.raises(NamespaceNotFound):
        await store.update_policies("acme", "missing", lambda p: p)
    assert await store.list_namespaces("acme") == ["acme/prod"]  # nothing was created


async def test_watch_policies_fires_once_on_the_next_change_and_on_delete(store: ZkTenantStore) -> None:
    await store.create_tenant("watched")
    await store.create_namespace("watched", "ns", {"bundles": {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1}})
    fired: list[str] = []
    changed = asyncio.Event()

    def heard(what: str) -> None:
        fired.append(what)
        changed.set()

    doc = await store.watch_policies("watched", "ns", lambda: heard("update"))
    assert doc["bundles"]["numBundles"] == 1
    await store.update_policies("watched", "ns", lambda d: d | {"message_ttl_in_seconds": 5})
    await asyncio.wait_for(changed.wait(), 10)
    changed.clear()
    await store.update_policies("watched", "ns", lambda d: d | {"message_ttl_in_seconds": 6})  # not watched any more
    await store.watch_policies("watched", "ns", lambda: heard("delete"))
    await store.delete_namespace("watched", "ns")
    await asyncio.wait_for(changed.wait(), 10)
    assert fired == ["update", "delete"]
    with pytest.raises(NamespaceNotFound):
        await store.watch_policies("watched", "ns", lambda: heard("never"))


async def test_concurrent_policy_updates_are_not_lost(
    store: ZkTenantStore, zk_connect: str, zk_root: str
) -> None:
    await store.create_tenant("acme", {})
    await store.create_namespace("acme", "prod", {"n": 0})
    other_session = ZkSession(zk_connect, zk_root)
    await other_session.start()
    try:
        other = ZkTenantStore(other_session)

        def bump(p: dict[str, Any]) -> dict[str, Any]:
            return {**p, "n": p["n"] + 1}

        await asyncio.gather(
            *(s.update_policies("acme", "prod", bump) for s in [store, other] * 10)
        )
    finally:
        await other_session.close()
    assert await store.get_policies("acme", "prod") == {"n": 20}


# -- partitioned topics -------------------------------------------------------------


async def test_partitioned_topic_lifecycle(store: ZkTenantStore, zk_session: ZkSession) -> None:
    await store.create_tenant("acme", {})
    await store.create_namespace("acme", "prod", {})
    assert await store.list_partitioned_topics("acme", "prod") == []
    assert await store.get_partitions("acme", "prod", "orders") == 0

    await store.create_partitioned_topic("acme", "prod", "orders", 4)
    await store.create_partitioned_topic("acme", "prod", "audit", 1)
    assert await store.get_partitions("acme", "prod", "orders") == 4
    assert await store.get_partitions("acme", "prod", "audit") == 1
    assert await store.list_partitioned_topics("acme", "prod") == [
        "persistent://acme/prod/audit",
        "persistent://acme/prod/orders",
    ]
    assert await read_doc(
        zk_session, zk_session.paths.partitioned_topic("acme", "prod", "orders")
    ) == {"partitions": 4}
    with pytest.raises(AlreadyExists, match="persistent://acme/prod/orders already exists"):
        await store.create_partitioned_topic("acme", "prod", "orders", 8)
    assert await store.get_partitions("acme", "prod", "orders") == 4

    await store.delete_partitioned_topic("acme", "prod", "orders")
    assert await store.get_partitions("acme", "prod", "orders") == 0
    assert await store.list_partitioned_topics("acme", "prod") == ["persistent://acme/prod/audit"]
    with pytest.raises(
        TopicNotFound, match="partitioned topic persistent://acme/prod/orders does not exist"
    ):
        await store.delete_partitioned_topic("acme", "prod", "orders")


async def test_partitioned_topic_needs_its_namespace(store: ZkTenantStore) -> None:
    with pytest.raises(TenantNotFound):
        await store.create_partitioned_topic("acme", "prod", "orders", 2)
    with pytest.raises(TenantNotFound):
        await store.list_partitioned_topics("acme", "prod")
    await store.create_tenant("acme", {})
    with pytest.raises(NamespaceNotFound, match="namespace acme/prod does not exist"):
        await store.create_partitioned_topic("acme", "prod", "orders", 2)
    with pytest.raises(NamespaceNotFound):
        await store.list_partitioned_topics("acme", "prod")
    assert await store.get_partitions("acme", "prod", "orders") == 0


@pytest.mark.parametrize("partitions", [0, -1, 65, True, 2.0, "3"])
async def test_bad_partition_counts(store: ZkTenantStore, partitions: Any) -> None:
    await store.create_tenant("acme", {})
    await store.create_namespace("acme", "prod", {})
    with pytest.raises(InvalidArgument, match="needs 1 to 64 partitions"):
        await store.create_partitioned_topic("acme", "prod", "orders", partitions)
    assert await store.list_partitioned_topics("acme", "prod") == []


@pytest.mark.parametrize(
    ("topic", "fragment"),
    [
        ("t-partition-3", "names partition 3"),
        ("a/b", "not allowed"),
        ("", "empty"),
        ("..", "must not be"),
    ],
)
async def test_bad_partitioned_topic_names(store: ZkTenantStore, topic: str, fragment: str) -> None:
    await store.create_tenant("acme", {})
    await store.create_namespace("acme", "prod", {})
    with pytest.raises(InvalidTopicName, match=fragment):
        await store.create_partitioned_topic("acme", "prod", topic, 2)
    assert await store.list_partitioned_topics("acme", "prod") == []


async def test_partitioned_topic_refused_over_a_non_partitioned_one(
    store: ZkTenantStore, zk_session: ZkSession
) -> None:
    await store.create_tenant("acme", {})
    await store.create_namespace("acme", "prod", {})
    await zk_session.create(zk_session.paths.managed_ledger("acme", "prod", "orders"), encode({}))
    with pytest.raises(AlreadyExists, match="non-partitioned topic"):
        await store.create_partitioned_topic("acme", "prod", "orders", 2)


async def test_corrupt_partition_count_is_reported(
    store: ZkTenantStore, zk_session: ZkSession
) -> None:
    await store.create_tenant("acme", {})
    await store.create_namespace("acme", "prod", {})
    await store.create_partitioned_topic("acme", "prod", "orders", 2)
    path = zk_session.paths.partitioned_topic("acme", "prod", "orders")
    await zk_session.set(path, encode({"partitions": "many"}))
    with pytest.raises(CorruptMetadata, match="no valid partition count"):
        await store.get_partitions("acme", "prod", "orders")


async def test_delete_namespace_refuses_while_it_has_topics(
    store: ZkTenantStore, zk_session: ZkSession
) -> None:
    await store.create_tenant("acme", {})
    await store.create_namespace("acme", "prod", {})
    await store.create_partitioned_topic("acme", "prod", "orders", 2)
    with pytest.raises(InvalidArgument, match=r"^Cannot delete non empty namespace: namespace acme/prod has 1 topic \(orders\)"):
        await store.delete_namespace("acme", "prod")
    assert await store.get_partitions("acme", "prod", "orders") == 2
    await store.delete_partitioned_topic("acme", "prod", "orders")

    # A non-partitioned topic is known by its managed ledger.
    ml = zk_session.paths.managed_ledger("acme", "prod", "plain")
    await zk_session.create(ml, encode({}))
    with pytest.raises(InvalidArgument, match=r"^Cannot delete non empty namespace: namespace .* has 1 topic \(plain\)"):
        await store.delete_namespace("acme", "prod")
    await zk_session.delete(ml)

    await store.delete_namespace("acme", "prod")
    assert await store.list_namespaces("acme") == []
    assert await zk_session.exists(zk_session.paths.partitioned_topics("acme", "prod")) is None


async def test_create_topic_racing_delete_namespace_never_orphans(
    store: ZkTenantStore, zk_connect: str, zk_root: str
) -> None:
    other_session = ZkSession(zk_connect, zk_root)
    await other_session.start()
    other = ZkTenantStore(other_session)
    try:
        await store.create_tenant("acme", {})
        for round_ in range(15):
            ns = f"ns{round_}"
            await store.create_namespace("acme", ns, {})
            outcomes: tuple[BaseException | None, BaseException | None] = await asyncio.gather(
                other.create_partitioned_topic("acme", ns, "t", 3),
                store.delete_namespace("acme", ns),
                return_exceptions=True,
            )
            created, deleted = outcomes
            ns_exists = f"acme/{ns}" in await store.list_namespaces("acme")
            topic_exists = await store.get_partitions("acme", ns, "t") == 3
            if ns_exists:
                # The topic won: the deletion was refused because of it.
                assert created is None and isinstance(deleted, InvalidArgument)
                assert topic_exists
            else:
                # The deletion won: the topic was refused and nothing of it is left.
                assert deleted is None and isinstance(created, (NamespaceNotFound, TenantNotFound))
                assert not topic_exists
    finally:
        await other_session.close()


# -- defaults -----------------------------------------------------------------------


async def test_ensure_defaults_is_idempotent_and_race_safe(
    store: ZkTenantStore, zk_connect: str, zk_root: str
) -> None:
    sessions = [ZkSession(zk_connect, zk_root) for _ in range(3)]
    for s in sessions:
        await s.start()
    try:
        await asyncio.gather(
            *(ZkTenantStore(s).ensure_defaults() for s in sessions for _ in range(3))
        )
    finally:
        for s in sessions:
            await s.close()
    assert await store.list_tenants() == ["public"]
    assert await store.list_namespaces("public") == ["public/default"]
    assert await store.get_policies("public", "default") == {}
    await store.update_policies("public", "default", lambda p: {"ttl_s": 5})
    await store.ensure_defaults()
    assert await store.get_policies("public", "default") == {"ttl_s": 5}  # left alone


async def _znodes_naming(session: ZkSession, path: str, part: str) -> list[str]:
    """Every znode under ``path`` whose path has the segment ``part``."""
    found = []
    for child in await session.children(path):
        sub = f"{path}/{child}"
        if child == part:
            found.append(sub)
        found += await _znodes_naming(session, sub, part)
    return found


async def test_deleting_a_namespace_leaves_no_znode_of_it_behind(store: ZkTenantStore, zk_session: ZkSession) -> None:
    """Its topics' schemas (one left over with no topic, one deleted with its topic), its
    managed ledgers' folder and its partitioned topics' folder go with it, and with the
    tenant the tenant's folders."""
    from magnetar.broker.schema.registry import SchemaRegistry, SchemaRules
    from magnetar.metadata.schemas import SchemaInfo, ZkSchemaStore

    schemas = ZkSchemaStore(zk_session)
    registry = SchemaRegistry(schemas)
    await store.create_tenant("acme", {})
    await store.create_namespace("acme", "prod", {})
    await store.create_namespace("acme", "keep", {})
    for ns in ("prod", "keep"):
        await registry.put(f"persistent://acme/{ns}/orders", SchemaInfo(2, b'{"type":"string"}'), SchemaRules())
        await registry.put(f"persistent://acme/{ns}/left", SchemaInfo(1), SchemaRules())
        await zk_session.ensure_path(zk_session.paths.managed_ledgers("acme", ns))  # as a topic's ledger makes it
    await schemas.delete("persistent://acme/prod/orders")  # as a topic delete does
    await store.delete_namespace("acme", "prod")
    assert await _znodes_naming(zk_session, zk_session.paths.root, "prod") == []
    assert (await registry.get("persistent://acme/keep/orders")).schema.type == 2  # the other namespace's kept
    await schemas.delete("persistent://acme/keep/orders")
    await store.delete_namespace("acme", "keep")
    await store.delete_tenant("acme")
    assert await _znodes_naming(zk_session, zk_session.paths.root, "acme") == []


async def test_partitioned_topics_of_each_domain_are_apart(store: ZkTenantStore, zk_session: ZkSession) -> None:
    await store.create_tenant("acme", {})
    await store.create_namespace("acme", "prod", {})
    await store.create_partitioned_topic("acme", "prod", "orders", 2)
    await store.create_partitioned_topic("acme", "prod", "orders", 5, domain="non-persistent")
    # a persistent topic named like the other domain is only a persistent topic
    await store.create_partitioned_topic("acme", "prod", "non-persistent", 3)
    assert await store.get_partitions("acme", "prod", "orders") == 2
    assert await store.get_partitions("acme", "prod", "orders", domain="non-persistent") == 5
    assert await store.get_partitions("acme", "prod", "non-persistent", domain="non-persistent") == 0
    assert await store.list_partitioned_topics("acme", "prod", domain="non-persistent") == [
        "non-persistent://acme/prod/orders"
    ]
    assert await store.list_partitioned_topics("acme", "prod") == [
        "persistent://acme/prod/non-persistent", "persistent://acme/prod/orders"
    ]
    assert await store.update_partitions("acme", "prod", "orders", 6, domain="non-persistent") == 5
    assert await store.get_partitions("acme", "prod", "orders") == 2
    with pytest.raises(InvalidArgument, match="non-empty|non empty"):
        await store.delete_namespace("acme", "prod")
    await store.delete_partitioned_topic("acme", "prod", "orders")
    await store.delete_partitioned_topic("acme", "prod", "non-persistent")
    with pytest.raises(InvalidArgument, match="non empty"):  # the non-persistent one is left
        await store.delete_namespace("acme", "prod")
    await store.delete_partitioned_topic("acme", "prod", "orders", domain="non-persistent")
    assert await store.get_partitions("acme", "prod", "orders", domain="non-persistent") == 0
    await store.delete_namespace("acme", "prod")
    await store.delete_tenant("acme")
    assert await zk_session.exists(zk_session.paths.partitioned_topics("acme", "prod", "non-persistent")) is None
