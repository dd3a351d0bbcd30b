"""Metadata layer against a real ZooKeeper: sessions, CAS writes, bookie registrations."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from magnetar.broker.topic_policies import TopicPolicyAdmin
from magnetar.common.errors import (
    MetadataError,
    MetadataVersionConflict,
    NotConnected,
    NotFound,
)
from magnetar.common.names import TopicName
from magnetar.common.netutil import free_port
from magnetar.metadata.bookies import ZkBookieRegistry
from magnetar.metadata.chaos import expire_session
from magnetar.metadata.codec import decode, encode
from magnetar.metadata.errors import CorruptMetadata, MetadataTooLarge, NodeExists
from magnetar.metadata.nodes import Op, SessionState
from magnetar.metadata.session import MAX_REQUEST_BYTES, ZkSession
from magnetar.metadata.topic_policies import ZkTopicPolicyStore
from magnetar.metadata.versioned import read_modify_write

pytestmark = pytest.mark.integration

B1, B2, B3 = "127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.9:3181"


@asynccontextmanager
async def session(zk_connect: str, zk_root: str) -> AsyncIterator[ZkSession]:
    s = ZkSession(zk_connect, zk_root)
    await s.start()
    try:
        yield s
    finally:
        await s.close()


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_register_list_move_unregister(zk_session: ZkSession) -> None:
    registry = ZkBookieRegistry(zk_session)
    assert await registry.list_writable() == []
    assert await registry.list_read_only() == []
    await registry.register(B2, {"address": B2, "v": 1})
    await registry.register(B1, {"address": B1})
    await registry.register(B3, {"address": B3}, read_only=True)
    assert await registry.list_writable() == [B1, B2]
    assert await registry.list_read_only() == [B3]
    assert await registry.get_info(B2) == {"address": B2, "v": 1}
    assert await registry.get_info("127.0.0.1:9999") is None

    await registry.set_read_only(B1, True)
    assert await registry.list_writable() == [B2]
    assert await registry.list_read_only() == [B1, B3]
    assert await registry.get_info(B1) == {"address": B1}
    await registry.set_read_only(B1, True)  # no-op
    await registry.set_read_only(B3, False)
    assert await registry.list_writable() == [B2, B3]
    assert await registry.list_read_only() == [B1]

    await registry.register(B2, {"address": B2, "v": 2})  # again: info replaced
    assert await registry.get_info(B2) == {"address": B2, "v": 2}

    await registry.unregister(B1)
    await registry.unregister(B2)
    await registry.unregister("127.0.0.1:1")  # never registered: no-op
    assert await registry.list_writable() == [B3]
    assert await registry.list_read_only() == []
    with pytest.raises(NotFound):
        await registry.set_read_only(B1, False)


async def test_znodes_are_where_the_design_says(zk_session: ZkSession, zk_root: str) -> None:
    await ZkBookieRegistry(zk_session).register(B1, {"address": B1})
    data, stat = await zk_session.get(f"{zk_root}/bookies/available/{B1}")
    assert decode(data) == {"address": B1}
    assert stat.ephemeral_owner == zk_session.session_id


async def test_registration_vanishes_when_the_session_closes(
    zk_connect: str, zk_root: str, zk_session: ZkSession
) -> None:
    observer = ZkBookieRegistry(zk_session)
    async with session(zk_connect, zk_root) as bookie_session:
        registry = ZkBookieRegistry(bookie_session)
        await registry.register(B1, {})
        await registry.register(B3, {}, read_only=True)
        assert await observer.list_writable() == [B1]
        assert await observer.list_read_only() == [B3]
    assert await observer.list_writable() == []
    assert await observer.list_read_only() == []


async def test_registration_comes_back_after_session_expiry(
    zk_connect: str, zk_root: str, zk_session: ZkSession
) -> None:
    observer = ZkBookieRegistry(zk_session)
    async with session(zk_connect, zk_root) as bookie_session:
        registry = ZkBookieRegistry(bookie_session)
        await registry.register(B1, {"address": B1})
        await registry.register(B2, {"address": B2})
        await registry.set_read_only(B2, True)
        old_session = bookie_session.session_id
        states: list[SessionState] = []
        bookie_session.add_state_listener(states.append)

        await expire_session(bookie_session)

        assert SessionState.LOST in states and states[-1] is SessionState.CONNECTED
        assert bookie_session.session_id != old_session

        async def registered_again() -> bool:
            writable, read_only = await observer.list_writable(), await observer.list_read_only()
            return writable == [B1] and read_only == [B2]

        await eventually(registered_again)
        stat = await zk_session.exists(zk_session.paths.bookie_available(B1))
        assert stat is not None and stat.ephemeral_owner == bookie_session.session_id
        assert await observer.get_info(B2) == {"address": B2}
        # Still usable after renewal.
        await registry.set_read_only(B2, False)
        assert await observer.list_writable() == [B1, B2]


async def test_register_waits_for_a_stale_registration(zk_connect: str, zk_root: str) -> None:
    async with session(zk_connect, zk_root) as old, session(zk_connect, zk_root) as new:
        await ZkBookieRegistry(old).register(B1, {"run": 1})

        impatient = ZkBookieRegistry(new, stale_wait_s=0.3)
        with pytest.raises(NodeExists, match="another ZooKeeper session"):
            await impatient.register(B1, {"run": 2})

        patient = ZkBookieRegistry(new, stale_wait_s=20)
        waiting = asyncio.create_task(patient.register(B1, {"run": 2}))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        await old.close()  # the old "process" dies: its registration goes
        await asyncio.wait_for(waiting, 10)
        assert await patient.get_info(B1) == {"run": 2}


async def test_read_modify_write_under_concurrent_writers(zk_connect: str, zk_root: str) -> None:
    path = f"{zk_root}/counters/c"
    writers, increments = 4, 15

    def bump(doc: dict[str, object] | None) -> dict[str, object]:
        doc = doc or {"n": 0, "by": []}
        return {"n": int(doc["n"]) + 1, "by": doc["by"]}  # type: ignore[call-overload]

    async def writer(s: ZkSession) -> None:
        for _ in range(increments):
            await read_modify_write(s, path, bump, max_attempts=200)

    async with session(zk_connect, zk_root) as s1, session(zk_connect, zk_root) as s2:
        await asyncio.gather(*(writer(s) for s in (s1, s2) for _ in range(writers)))
        data, stat = await s1.get(path)
    total = 2 * writers * increments
    assert decode(data)["n"] == total
    assert stat.version == total - 1  # created at version 0, then one set per increment


async def test_version_conflict_and_other_errors(zk_session: ZkSession, zk_root: str) -> None:
    path = f"{zk_root}/doc"
    doc, version = await read_modify_write(zk_session, path, lambda d: {"a": 1})
    assert (doc, version) == ({"a": 1}, 0)
    await zk_session.set(path, encode({"a": 2}), version=0)
    with pytest.raises(MetadataVersionConflict, match="version conflict"):
        await zk_session.set(path, encode({"a": 3}), version=0)
    with pytest.raises(MetadataVersionConflict):
        await zk_session.delete(path, version=0)
    with pytest.raises(NodeExists, match="already exists"):
        await zk_session.create(path, b"{}")
    with pytest.raises(NotFound, match="does not exist"):
        await zk_session.get(f"{zk_root}/missing")
    with pytest.raises(NotFound):
        await zk_session.children(f"{zk_root}/missing")
    assert await zk_session.exists(f"{zk_root}/missing") is None
    await zk_session.create(f"{zk_root}/doc/child")
    with pytest.raises(MetadataError, match="has children"):
        await zk_session.delete(path)
    await zk_session.delete(path, recursive=True)
    assert await zk_session.exists(path) is None


async def test_multi_is_all_or_nothing(zk_session: ZkSession, zk_root: str) -> None:
    a, b = f"{zk_root}/a", f"{zk_root}/b"
    await zk_session.create(a, b"{}")
    with pytest.raises(NotFound):
        await zk_session.multi([Op.create(b, b"{}"), Op.delete(f"{zk_root}/nope")])
    assert await zk_session.exists(b) is None
    results = await zk_session.multi([Op.set(a, b'{"x":1}', 0), Op.create(b), Op.check(a, 1)])
    assert results[0].version == 1 and results[1] == b


async def test_a_request_over_zookeepers_limit_is_refused_and_the_session_lives(
    zk_session: ZkSession, zk_root: str
) -> None:
    """ZooKeeper drops the whole session of a client whose request passes jute.maxbuffer
    (the fuzzer found the broker sending such a policies document): the session refuses it
    before sending, writes nothing and stays the same session."""
    doc, other = f"{zk_root}/doc", f"{zk_root}/other"
    await zk_session.create(doc, b"small")
    session_id = zk_session.session_id
    big = b"x" * MAX_REQUEST_BYTES
    with pytest.raises(MetadataTooLarge, match=r"over ZooKeeper's limit of 1,048,575 \(jute.maxbuffer\): nothing"):
        await zk_session.set(doc, big)
    with pytest.raises(MetadataTooLarge):
        await zk_session.create(other, big)
    with pytest.raises(MetadataTooLarge, match="and 1 more"):
        await zk_session.multi([Op.set(doc, big[: MAX_REQUEST_BYTES // 2]), Op.create(other, big[: MAX_REQUEST_BYTES // 2])])
    with pytest.raises(MetadataTooLarge):
        await zk_session.create(f"{zk_root}/" + "p" * MAX_REQUEST_BYTES)
    # Nothing written, the same session, and a document just under the limit still fits.
    assert (await zk_session.get(doc))[0] == b"small" and await zk_session.exists(other) is None
    fits = b"y" * (MAX_REQUEST_BYTES - 2048)
    await zk_session.set(doc, fits)
    assert (await zk_session.get(doc))[0] == fits
    assert zk_session.session_id == session_id and zk_session.state is SessionState.CONNECTED


async def test_corrupt_registration_is_a_clear_error(zk_session: ZkSession) -> None:
    await zk_session.create(zk_session.paths.bookie_available(B1), b"\x00garbage")
    with pytest.raises(CorruptMetadata, match=B1):
        await ZkBookieRegistry(zk_session).get_info(B1)


async def test_wait_gone(zk_session: ZkSession, zk_root: str) -> None:
    path = f"{zk_root}/lock"
    await zk_session.create(path)
    assert not await zk_session.wait_gone(path, 0.2)
    asyncio.get_running_loop().call_later(
        0.2, lambda: asyncio.ensure_future(zk_session.delete(path))
    )
    assert await zk_session.wait_gone(path, 10)


async def test_start_fails_clearly_without_zookeeper() -> None:
    address = f"127.0.0.1:{free_port()}"
    s = ZkSession(address)
    with pytest.raises(NotConnected, match=f"could not connect to ZooKeeper at {address}"):
        await s.start(timeout_s=1)
    await s.close()


async def test_operations_on_a_closed_session_fail_clearly(zk_connect: str, zk_root: str) -> None:
    s = ZkSession(zk_connect, zk_root)
    with pytest.raises(NotConnected, match="not started"):
        await s.get(zk_root)
    await s.start()
    assert s.state is SessionState.CONNECTED
    await s.close()
    with pytest.raises(NotConnected, match="closed"):
        await s.exists(zk_root)


async def test_a_topics_schema_history_is_versioned_and_racing_registrations_lose_nothing(zk_session: ZkSession) -> None:
    from magnetar.broker.schema.compatibility import SchemaCompatibilityStrategy
    from magnetar.broker.schema.registry import SchemaRegistry, SchemaRules
    from magnetar.metadata.schemas import SchemaInfo, ZkSchemaStore

    store = ZkSchemaStore(zk_session)
    registry = SchemaRegistry(store)
    topic = "persistent://acme/orders/events"
    assert await store.history(topic) == ()
    first, second = SchemaInfo(1, b"", {"k": "v"}), SchemaInfo(1, b"other")
    rules = SchemaRules(SchemaCompatibilityStrategy.ALWAYS_COMPATIBLE)
    kept = await asyncio.gather(registry.put(topic, first, rules), registry.put(topic, second, rules))
    assert sorted(k.version for k in kept) == [0, 1]  # compare-and-set: neither registration lost
    history = await store.history(f"{topic}-partition-3")  # a partition's is its topic's
    assert sorted((s.version, s.schema.data) for s in history) == sorted((k.version, k.schema.data) for k in kept)
    assert await registry.delete(topic) == 2
    await store.delete(topic)
    await store.delete(topic)  # nothing to delete: nothing happens
    assert await store.history(topic) == ()
    # The single-schema document older brokers wrote is version 0.
    old = zk_session.paths.schema("acme", "orders", "old")
    await zk_session.create(old, encode({"type": 2, "data": "e30=", "properties": {}, "version": 0}), makepath=True)
    assert (await registry.get("persistent://acme/orders/old")).schema == SchemaInfo(2, b"{}")
    assert (await registry.put("persistent://acme/orders/old", second, rules)).version == 1
    path = zk_session.paths.schema("acme", "orders", "bad")
    await zk_session.create(path, encode({"type": 2, "data": "not base64!"}), makepath=True)
    with pytest.raises(CorruptMetadata):
        await store.history("persistent://acme/orders/bad")


async def test_the_session_waits_on_its_socket_without_a_new_selector_per_request(
    zk_session: ZkSession, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kazoo's stock handler built an epoll selector for every wait on its socket (a
    quarter of the broker's CPU under a burst of admin creates)."""
    import selectors

    made = 0
    stock = selectors.DefaultSelector

    class Counted(stock):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            nonlocal made
            made += 1
            super().__init__()

    monkeypatch.setattr(selectors, "DefaultSelector", Counted)
    root = zk_session.paths.root
    await zk_session.create(f"{root}/waits", b"x")
    answers = await asyncio.gather(*(zk_session.get(f"{root}/waits") for _ in range(200)))
    assert [data for data, _ in answers] == [b"x"] * 200
    assert made == 0


async def test_topic_policy_documents_are_listed_per_namespace(zk_session: ZkSession) -> None:

    store = ZkTopicPolicyStore(zk_session)
    assert await store.topics_with_documents("lean", "ns") == set()  # no document yet: no node
    for local in ("a", "b"):
        await store.update(TopicName.parse(f"persistent://lean/ns/{local}"), lambda doc: {**doc, "message_ttl_s": 5})
    await store.update(TopicName.parse("persistent://lean/other/c"), lambda doc: {**doc, "message_ttl_s": 5})
    assert await store.topics_with_documents("lean", "ns") == {"a", "b"}
    admin = TopicPolicyAdmin(store, namespaces=None)  # type: ignore[arg-type]
    assert await admin.setters("lean/ns") == {"persistent://lean/ns/a", "persistent://lean/ns/b"}
