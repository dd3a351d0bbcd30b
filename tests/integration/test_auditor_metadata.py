"""The auditor's ZooKeeper state against a real ZooKeeper: markers, locks, election."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.metadata.election import LeaderElection, leader_of
from magnetar.metadata.session import ZkSession
from magnetar.metadata.underreplication import ZkUnderReplicationStore

pytestmark = pytest.mark.integration


async def test_markers_merge_and_clear_only_if_unchanged(zk_session):
    store = ZkUnderReplicationStore(zk_session)
    assert await store.list() == [] and await store.get(7) is None
    assert await store.mark(7, {"b1:1"})
    assert not await store.mark(7, {"b1:1"})  # already there
    first = await store.get(7)
    assert first is not None and first.missing == ("b1:1",)
    assert await store.mark(7, {"b2:2"})
    assert not await store.clear(first)  # a bookie was added since it was read: kept
    now = await store.get(7)
    assert (
        now is not None
        and now.missing == ("b1:1", "b2:2")
        and now.marked_at_ms == first.marked_at_ms
    )
    await store.mark(3, {"b3:3"})
    assert await store.list_ids() == [3, 7]
    assert await store.clear(now)
    assert [m.ledger_id for m in await store.list()] == [3]


async def test_replication_locks_are_exclusive_and_go_with_the_session(
    zk_connect, zk_root, zk_session
):
    mine = ZkUnderReplicationStore(zk_session)
    other_session = ZkSession(zk_connect, zk_root, session_timeout_s=4)
    await other_session.start()
    other = ZkUnderReplicationStore(other_session)
    assert await other.try_lock(5, "other:1")
    assert not await mine.try_lock(5, "me:1")
    assert await mine.lock_owner(5) == "other:1"
    await mine.unlock(5)  # not ours: left alone
    assert await mine.lock_owner(5) == "other:1"
    await other_session.close()  # the holder dies
    assert await mine.try_lock(5, "me:1")
    await mine.unlock(5)
    assert await mine.lock_owner(5) is None


async def test_exactly_one_leader_and_a_new_one_when_it_goes(zk_connect, zk_root):
    sessions = [ZkSession(zk_connect, zk_root, session_timeout_s=4) for _ in range(3)]
    for s in sessions:
        await s.start()
    path = sessions[0].paths.auditor_election()
    leading: list[str] = []

    def make_lead(name: str):
        async def lead() -> None:
            leading.append(name)
            try:
                await asyncio.Event().wait()
            finally:
                leading.remove(name)

        return lead

    elections = [LeaderElection(s, path, f"a{i}") for i, s in enumerate(sessions)]
    tasks = [asyncio.create_task(e.run(make_lead(e.identifier))) for e in elections]
    try:
        async with asyncio.timeout(10):
            while not leading:
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        assert len(leading) == 1
        first = leading[0]
        assert await leader_of(sessions[1], path) == first
        assert [e.is_leader for e in elections].count(True) == 1
        # the leader's process dies: its session closes, another is elected
        i = int(first[1:])
        tasks[i].cancel()
        await asyncio.gather(tasks[i], return_exceptions=True)
        await sessions[i].close()
        async with asyncio.timeout(10):
            while len(leading) != 1 or leading[0] == first:
                await asyncio.sleep(0.05)
        assert await leader_of(sessions[(i + 1) % 3], path) == leading[0] != first
    finally:
        for e, t in zip(elections, tasks, strict=True):
            await e.close()
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for s in sessions:
            await s.close()
