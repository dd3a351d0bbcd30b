"""Cursor state beyond acks (batch indexes, redelivery counts), non-durable cursors and
retention, against real bookie processes and ZooKeeper."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from magnetar.common.errors import MetadataVersionConflict
from magnetar.ledger.client import LedgerClient
from magnetar.ledger.context import LedgerClientConfig
from magnetar.managedledger import ManagedLedger, ManagedLedgerConfig, Position
from magnetar.managedledger.cursor_state import MAX_DOCUMENT_BYTES, CursorDocument
from magnetar.metadata.codec import encode
from magnetar.metadata.managed_ledgers import ZkManagedLedgerStore
from magnetar.metadata.session import ZkSession

pytestmark = pytest.mark.integration

NAME = ("acme", "orders", "cursors")


class Broker:
    """What a broker holds for managed ledgers: a session, a ledger client, a store."""

    def __init__(self, session: ZkSession) -> None:
        self.session = session
        self.client = LedgerClient(session, LedgerClientConfig(add_timeout_s=5, read_timeout_s=5))
        self.store = ZkManagedLedgerStore(session)

    async def open(self, clock=None, **settings) -> ManagedLedger:
        settings.setdefault("cursor_persist_interval_s", 0.05)
        extra = {} if clock is None else {"clock": clock}
        return await ManagedLedger.open(*NAME, self.client, self.store, ManagedLedgerConfig(**settings), **extra)

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
    return b"entry-%05d-" % i + b"x" * 40


def state(cursor, positions: list[Position]) -> tuple:
    """Everything a cursor knows about ``positions``."""
    return (
        cursor.mark_delete_position,
        cursor.individually_acked,
        [cursor.acked_mask(p) for p in positions],
        [cursor.redelivery_count(p) for p in positions],
        cursor.backlog(),
    )


async def test_batch_acks_and_redelivery_counts_survive_close_and_reopen(two_bookies, zk_connect, zk_root):
    async with broker(zk_connect, zk_root) as b:
        ml = await b.open(max_entries_per_ledger=10)
        pos = [await ml.add_entry(payload(i)) for i in range(25)]
        c = await ml.open_cursor("sub", "earliest")
        c.ack([pos[0], pos[4], pos[12]])
        assert c.ack_batch(pos[1], 5, 0b00101) is False
        assert c.ack_batch(pos[9], 3, 0b011) is False  # last entry of the first ledger
        assert c.ack_batch(pos[15], 100, 1 << 99) is False
        assert c.ack_batch(pos[2], 2, 0b11) is True
        c.add_redeliveries([pos[1], pos[1], pos[3], pos[20], pos[4], pos[2]])  # 4 and 2 acked: not counted
        before = state(c, pos)
        assert before[2][1] == 0b00101 and before[3][:5] == [0, 2, 0, 1, 0] and before[4] == 25 - 4
        await ml.close()

        lid = [p.ledger_id for p in pos]
        znode, _ = await b.store.get_cursor(*NAME, "sub")
        assert znode == {
            "mark_delete": list(pos[0]),
            "individually_acked": [[list(pos[2]), list(pos[2])], [list(pos[4]), list(pos[4])], [list(pos[12]), list(pos[12])]],
            "batch_acks": [[lid[1], 1, 5, "5"], [lid[9], 9, 3, "3"], [lid[15], 5, 100, format(1 << 99, "x")]],
            "redelivery_counts": [[lid[1], 1, 2], [lid[3], 3, 1], [lid[20], 0, 1]],
            "properties": {},
            "read_position": list(pos[1]),  # nothing read: the entry after mark-delete
        }

        ml = await b.open(max_entries_per_ledger=10)
        again = ml.cursors["sub"]
        assert state(again, pos) == before
        read = [p for p, _ in await again.read_entries(100, 1 << 20)]
        assert read == [p for i, p in enumerate(pos) if i not in (0, 2, 4, 12)]
        assert again.ack_batch(pos[1], 5, 0b11010) is True
        assert again.mark_delete_position == pos[2] and again.redelivery_count(pos[1]) == 0
        await ml.close()
        znode, _ = await b.store.get_cursor(*NAME, "sub")
        assert znode is not None and znode["batch_acks"][0] == [lid[9], 9, 3, "3"]
        assert znode["redelivery_counts"][0] == [lid[3], 3, 1]


async def test_counts_stored_by_persist_counts_survive_an_abandoned_owner(two_bookies, zk_connect, zk_root):
    async with broker(zk_connect, zk_root) as first, broker(zk_connect, zk_root) as second:
        old = await first.open(cursor_persist_interval_s=3600)  # only explicit writes
        pos = [await old.add_entry(payload(i)) for i in range(8)]
        c = await old.open_cursor("sub", "earliest")
        c.ack([pos[0]])
        c.ack_batch(pos[2], 4, 0b1001)
        c.add_redeliveries([pos[1], pos[2], pos[2]])
        assert c.counts_dirty
        await c.persist_counts()  # what the dispatcher does before redelivering
        assert not c.counts_dirty
        c.ack([pos[1]])  # never written: the owner is abandoned without close

        new = await second.open()
        taken = new.cursors["sub"]
        assert taken.mark_delete_position == pos[0]
        assert not taken.is_acked(pos[1]) and taken.redelivery_count(pos[1]) == 1  # acked too late
        assert taken.redelivery_count(pos[2]) == 2 and taken.acked_mask(pos[2]) == 0b1001
        # the abandoned owner can no longer write over the new owner's cursor
        c.add_redeliveries([pos[3]])
        with pytest.raises(MetadataVersionConflict):
            await c.persist_counts()
        taken.add_redeliveries([pos[2]])
        await taken.persist_counts()
        znode, _ = await second.store.get_cursor(*NAME, "sub")
        assert znode is not None and znode["redelivery_counts"] == [[pos[1].ledger_id, 1, 1], [pos[2].ledger_id, 2, 3]]
        await new.close()
        await old.close()


async def test_a_non_durable_cursor_leaves_nothing_in_zookeeper(two_bookies, zk_connect, zk_root):
    async with broker(zk_connect, zk_root) as b:
        ml = await b.open(max_entries_per_ledger=5)
        pos = [await ml.add_entry(payload(i)) for i in range(12)]
        reader = await ml.open_cursor("reader-x", start=pos[3], inclusive=True, durable=False)
        got = await reader.read_entries(100, 1 << 20)
        assert [p for p, _ in got] == pos[3:]
        reader.ack([pos[3], pos[4]])
        reader.ack_batch(pos[5], 2, 1)
        reader.add_redeliveries([pos[6]])
        await reader.persist_counts()
        await reader.flush()
        await asyncio.sleep(0.2)  # longer than the debounce interval
        assert await b.store.list_cursors(*NAME) == []
        # it holds nothing back: without durable cursors, closed ledgers are consumed
        deleted = await ml.trim_consumed()
        assert deleted == sorted({pos[0].ledger_id, pos[5].ledger_id})
        await ml.delete_cursor("reader-x")
        await ml.close()
        assert await b.store.list_cursors(*NAME) == []
        assert not set(await b.client.list_ledgers()) & set(deleted)


async def test_trim_consumed_deletes_only_consumed_ledgers_within_retention(two_bookies, zk_connect, zk_root):
    now = [1_000_000.0]
    async with broker(zk_connect, zk_root) as b:
        ml = await b.open(clock=lambda: now[0], max_entries_per_ledger=4)
        pos = []
        for i in range(16):  # 4 closed ledgers of 4 entries, one minute apart, then an open one
            pos.append(await ml.add_entry(payload(i)))
            now[0] += 15
        await asyncio.sleep(0.2)
        ids = sorted({p.ledger_id for p in pos})
        assert len(ids) == 4 and ml.current_ledger_id not in ids
        size = ml.ledgers[0].size
        c = await ml.open_cursor("sub", "earliest")
        c.ack_cumulative(pos[11])  # ledgers 0..2 consumed, 3 not
        assert await ml.trim_consumed(None, None) == []
        # ledger 0 stopped receiving writes 3 minutes ago, ledger 1 two, ledger 2 one
        assert await ml.trim_consumed(200, None) == []
        assert await ml.trim_consumed(150, 3 * size) == [ids[0]]  # time alone
        assert await ml.trim_consumed(None, 2 * size) == []  # size allows the two left
        assert await ml.trim_consumed(10**6, size) == [ids[1]]  # size alone
        c.ack_cumulative(pos[15])
        assert await ml.trim_consumed(90, 10 * size) == []
        assert await ml.trim_consumed() == [ids[2], ids[3]]  # 0/0: every consumed ledger
        doc, _ = await b.store.get(*NAME)
        assert doc is not None and [d["ledger_id"] for d in doc["ledgers"]] == [ml.current_ledger_id]
        left = set(await b.client.list_ledgers())
        assert not left & set(ids) and ml.current_ledger_id in left
        assert c.backlog() == 0 and await c.read_entries(10, 1 << 20) == []
        p = await ml.add_entry(b"after")
        assert [q for q, _ in await c.read_entries(10, 1 << 20)] == [p]
        await ml.close()


async def test_the_largest_allowed_cursor_document_fits_a_znode(zk_session):
    store = ZkManagedLedgerStore(zk_session)
    await store.create(*NAME, {"ledgers": [], "properties": {}})
    big = 2_147_483_000
    doc = CursorDocument(
        Position(big, 0),
        [(Position(big, 3 * i + 2), Position(big, 3 * i + 3)) for i in range(20_000)],
        [(Position(big + 1, i), 4000, (1 << 4000) - 2) for i in range(1000)],
        [(Position(big + 2, i), 10**9) for i in range(10_000)],
    ).to_doc(ManagedLedgerConfig(max_unacked_ranges_to_persist=20_000, max_batch_acks_to_persist=1000))
    assert MAX_DOCUMENT_BYTES - 2000 < len(encode(doc)) <= MAX_DOCUMENT_BYTES
    await store.put_cursor(*NAME, "big", doc, None)
    assert await store.get_cursor(*NAME, "big") == (json.loads(encode(doc)), 0)  # positions come back as lists
