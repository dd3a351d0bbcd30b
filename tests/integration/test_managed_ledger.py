"""Managed ledgers and cursors against real bookie processes and ZooKeeper."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from magnetar.common.errors import InvalidArgument, LedgerFenced, MetadataVersionConflict, NotFound
from magnetar.ledger.client import LedgerClient
from magnetar.ledger.context import LedgerClientConfig
from magnetar.managedledger import ManagedLedger, ManagedLedgerConfig, Position
from magnetar.metadata.managed_ledgers import ZkManagedLedgerStore
from magnetar.metadata.session import ZkSession

pytestmark = pytest.mark.integration

NAME = ("acme", "orders", "payments")


class Broker:
    """What a broker holds for managed ledgers: a session, a ledger client, a store."""

    def __init__(self, session: ZkSession) -> None:
        self.session = session
        self.client = LedgerClient(session, LedgerClientConfig(add_timeout_s=5, read_timeout_s=5))
        self.store = ZkManagedLedgerStore(session)

    async def open(self, **settings) -> ManagedLedger:
        settings.setdefault("cursor_persist_interval_s", 0.05)
        return await ManagedLedger.open(*NAME, self.client, self.store, ManagedLedgerConfig(**settings))

    async def close(self) -> None:
        await self.client.close()
        await self.session.close()


@contextlib.asynccontextmanager
async def broker(zk_connect: str, zk_root: str):
    session = ZkSession(zk_connect, zk_root)
    await session.start()
    b = Broker(session)
    try:
        yield b
    finally:
        await b.close()


@pytest.fixture
def two_bookies(bookie_factory):
    return bookie_factory.start_many(2)


def payload(i: int) -> bytes:
    return b"entry-%05d-" % i + b"x" * 90


async def test_rollover_makes_ledgers_and_everything_reads_back_in_order(two_bookies, zk_connect, zk_root):
    async with broker(zk_connect, zk_root) as b:
        ml = await b.open(max_entries_per_ledger=1000, cache_max_bytes=20_000)
        positions = []
        for start in range(0, 5500, 500):  # windows of 500 adds in flight
            positions += await asyncio.gather(*(ml.add_entry(payload(i)) for i in range(start, start + 500)))
        assert positions == sorted(positions) and len(set(positions)) == 5500
        doc, _ = await b.store.get(*NAME)
        assert doc is not None
        stored = doc["ledgers"]
        assert len(stored) >= 6
        assert [d["entries"] for d in stored[:5]] == [1000] * 5 and stored[-1]["entries"] == -1
        assert {p.ledger_id for p in positions} == {d["ledger_id"] for d in stored[:6]}
        assert ml.number_of_entries == 5500 and ml.total_size == sum(len(payload(i)) for i in range(5500))
        # Entries 0..~5300 come from the bookies (the cache holds ~190), including
        # evicted entries of the ledger still open.
        got = []
        position = ml.first_position
        while True:
            batch = await ml.read_entries(position, 700, 1 << 20)
            if not batch:
                break
            got += batch
            position = ml.next_position(batch[-1][0])
        assert [p for p, _ in got] == positions
        assert all(data == payload(i) for i, (_, data) in enumerate(got))
        assert ml.cache.misses >= 5000
        await ml.close()
        doc, _ = await b.store.get(*NAME)
        assert doc is not None and doc["ledgers"][-1]["entries"] == 500


async def test_a_crashed_owner_is_recovered_and_fenced(two_bookies, zk_connect, zk_root):
    async with broker(zk_connect, zk_root) as first, broker(zk_connect, zk_root) as second:
        old = await first.open(max_entries_per_ledger=300)
        confirmed = await asyncio.gather(*(old.add_entry(payload(i)) for i in range(700)))
        # In flight when the "crash" happens: these may or may not survive.
        in_flight = [old.add_entry(payload(700 + i)) for i in range(50)]
        await asyncio.sleep(0)
        old_last_ledger = confirmed[-1].ledger_id

        # (b) The first broker stops answering; the second takes the topic over.
        new = await second.open(max_entries_per_ledger=300)
        assert new.last_confirmed_position >= confirmed[-1]
        recovered = [(p, d) for p, d in await new.read_entries(new.first_position, 10_000, 1 << 30)]
        assert [p for p, _ in recovered[:700]] == list(confirmed)
        assert [d for _, d in recovered] == [payload(i) for i in range(len(recovered))]
        p = await new.add_entry(b"after takeover")
        assert p.ledger_id > old_last_ledger and p.entry_id == 0

        # (c) The old owner's next add fails: its ledger was fenced by recovery.
        with pytest.raises(LedgerFenced):
            for _ in range(3):  # the first may still have been pushed before it noticed
                await old.add_entry(b"too late")
        with pytest.raises(LedgerFenced):
            await old.add_entry(b"still too late")
        assert old.is_fenced
        await asyncio.gather(*in_flight, return_exceptions=True)
        await old.close()  # must not clobber the new owner's list
        doc, _ = await second.store.get(*NAME)
        assert doc is not None and doc["ledgers"][-1] == {**doc["ledgers"][-1], "ledger_id": p.ledger_id, "entries": -1}
        await new.close()


async def test_an_abandoned_ledger_handle_is_recovered_with_every_confirmed_entry(two_bookies, zk_connect, zk_root):
    async with broker(zk_connect, zk_root) as first, broker(zk_connect, zk_root) as second:
        old = await first.open()
        confirmed = [await old.add_entry(payload(i)) for i in range(20)]
        ledger_id = old.current_ledger_id
        await old._current.abort()  # the writer is gone without closing its ledger
        new = await second.open()
        got = await new.read_entries(Position(0, 0), 100, 1 << 20)
        assert [p for p, _ in got] == confirmed
        info = next(i for i in new.ledgers if i.ledger_id == ledger_id)
        assert info.entries == 20 and info.size == 20 * len(payload(0))
        assert new.current_ledger_id not in (None, ledger_id)
        before = await second.store.get(*NAME)
        await old.close()  # the stale owner's close leaves the new owner's list alone
        assert await second.store.get(*NAME) == before
        await new.close()


async def test_cursors_persist_and_reopen_with_the_same_state(two_bookies, zk_connect, zk_root):
    async with broker(zk_connect, zk_root) as b:
        ml = await b.open(max_entries_per_ledger=10)
        latest_before = await ml.open_cursor("latest-before", "latest")
        pos = [await ml.add_entry(payload(i)) for i in range(25)]
        earliest = await ml.open_cursor("earliest", "earliest")
        latest = await ml.open_cursor("latest", "latest")
        assert (earliest.backlog(), latest.backlog(), latest_before.backlog()) == (25, 0, 25)
        earliest.ack([pos[12], pos[3], pos[10], pos[9], pos[24]])  # 9 -> 10 spans a ledger boundary
        earliest.ack_cumulative(pos[2])
        assert earliest.mark_delete_position == pos[3]
        assert earliest.individually_acked == [(pos[9], pos[10]), (pos[12], pos[12]), (pos[24], pos[24])]
        assert earliest.backlog() == 25 - 4 - 4
        latest_before.ack_cumulative(pos[19])
        await earliest.flush()
        await ml.close()

        znode, _ = await b.store.get_cursor(*NAME, "earliest")
        assert znode == {
            "mark_delete": list(pos[3]),
            "individually_acked": [[list(pos[9]), list(pos[10])], [list(pos[12]), list(pos[12])], [list(pos[24]), list(pos[24])]],
            "properties": {},
            "read_position": list(pos[4]),  # nothing read: the entry after mark-delete
        }
        assert sorted(await b.store.list_cursors(*NAME)) == ["earliest", "latest", "latest-before"]

        ml = await b.open(max_entries_per_ledger=10)
        again = ml.cursors["earliest"]
        assert again.mark_delete_position == pos[3]
        assert again.individually_acked == earliest.individually_acked
        assert again.backlog() == 17 and again.read_position == pos[4]
        assert ml.cursors["latest-before"].backlog() == 5  # written on close
        assert ml.cursors["latest"].backlog() == 0
        read = await again.read_entries(100, 1 << 20)
        assert [p for p, _ in read] == [p for i, p in enumerate(pos) if i > 3 and i not in (9, 10, 12, 24)]
        await ml.delete_cursor("latest")
        assert sorted(await b.store.list_cursors(*NAME)) == ["earliest", "latest-before"]
        await ml.delete()
        assert await b.store.get(*NAME) == (None, -1)
        assert not set(await b.client.list_ledgers()) & {p.ledger_id for p in pos}


async def test_bad_input_gets_clear_errors(two_bookies, zk_connect, zk_root):
    async with broker(zk_connect, zk_root) as b:
        with pytest.raises(InvalidArgument, match="max_entries_per_ledger"):
            ManagedLedgerConfig(max_entries_per_ledger=-5)
        with pytest.raises(InvalidArgument):
            await ManagedLedger.open("acme", "orders", "bad/topic", b.client, b.store)
        ml = await b.open()
        p = await ml.add_entry(b"only")
        assert await ml.read_entries(ml.next_position(p), 10, 1000) == []  # past the end: empty
        assert await ml.read_entries(Position(p.ledger_id + 1000, 0), 10, 1000) == []
        with pytest.raises(InvalidArgument):
            await ml.read_entries(p, -1, 1000)
        with pytest.raises(InvalidArgument):
            await ml.open_cursor("a/b")
        cursor = await ml.open_cursor("ok")
        with pytest.raises(InvalidArgument):
            cursor.ack([Position(p.ledger_id, 5)])
        await ml.close()


async def test_store_writes_are_versioned_and_delete_takes_the_cursors_along(zk_session):
    store = ZkManagedLedgerStore(zk_session)
    assert await store.get(*NAME) == (None, -1)
    assert await store.list_cursors(*NAME) == []
    v0 = await store.create(*NAME, {"ledgers": [], "properties": {"k": "v"}})
    with pytest.raises(MetadataVersionConflict):
        await store.create(*NAME, {"ledgers": []})
    v1 = await store.update(*NAME, {"ledgers": [{"ledger_id": 1, "entries": -1, "size": 0, "created_ms": 5}]}, v0)
    with pytest.raises(MetadataVersionConflict):
        await store.update(*NAME, {"ledgers": []}, v0)  # stale version: nothing written
    doc, version = await store.get(*NAME)
    assert version == v1 and doc == {"ledgers": [{"ledger_id": 1, "entries": -1, "size": 0, "created_ms": 5}]}
    assert await store.list_topics(*NAME[:2]) == [NAME[2]]

    c0 = await store.put_cursor(*NAME, "sub", {"mark_delete": [1, -1]}, None)
    with pytest.raises(MetadataVersionConflict):
        await store.put_cursor(*NAME, "sub", {"mark_delete": [1, 0]}, None)
    c1 = await store.put_cursor(*NAME, "sub", {"mark_delete": [1, 3]}, c0)
    with pytest.raises(MetadataVersionConflict):
        await store.put_cursor(*NAME, "sub", {"mark_delete": [1, 9]}, c0)
    assert await store.get_cursor(*NAME, "sub") == ({"mark_delete": [1, 3]}, c1)
    with pytest.raises(NotFound):
        await store.put_cursor("acme", "orders", "no-such-topic", "sub", {}, None)
    await store.put_cursor(*NAME, "other", {}, None)
    assert await store.list_cursors(*NAME) == ["other", "sub"]
    await store.delete_cursor(*NAME, "other")
    await store.delete_cursor(*NAME, "other")  # already gone: fine
    await store.delete(*NAME)
    assert await store.get(*NAME) == (None, -1) and await store.get_cursor(*NAME, "sub") == (None, -1)
    await store.delete(*NAME)
