"""ManagedLedger and ManagedCursor against in-memory twins of the ledger client and store."""

from __future__ import annotations

import asyncio
import copy
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from magnetar.common.errors import (
    EntryTooLarge,
    InvalidArgument,
    LedgerFenced,
    MetadataError,
    MetadataVersionConflict,
    NoSuchLedger,
    NotEnoughBookies,
    NotFound,
    ServiceClosed,
)
from magnetar.ledger.context import LedgerClientConfig
from magnetar.ledger.metadata import Fragment, LedgerMetadata
from magnetar.ledger.reader import LedgerEntry
from magnetar.managedledger import ManagedLedger, ManagedLedgerConfig, Position

P = Position


class FakeHandle:
    """Confirms adds in order after ``client.add_delay`` seconds; can be fenced."""

    def __init__(self, client: FakeLedgerClient, ledger_id: int) -> None:
        self.client = client
        self.ledger_id = ledger_id
        self.metadata = LedgerMetadata(1, 1, 1, fragments=(Fragment(0, ("b",)),))
        self.last_add_confirmed = -1
        self.pending: list[tuple[int, bytes, asyncio.Future[int]]] = []
        self.error: Exception | None = None
        self.closed = False

    @property
    def stored(self) -> list[bytes]:
        return self.client.data[self.ledger_id]

    async def read(self, first: int, last: int) -> list[LedgerEntry]:
        return _entries(self.ledger_id, self.stored, first, last, self.last_add_confirmed)

    def add_entry(self, payload: bytes) -> asyncio.Future[int]:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if self.error is not None or self.closed:
            fut.set_exception(self.error or ServiceClosed("closed"))
            return fut
        entry_id = len(self.stored) + len(self.pending)
        self.pending.append((entry_id, payload, fut))
        asyncio.get_running_loop().call_later(self.client.add_delay, self._confirm)
        return fut

    def _confirm(self) -> None:
        if self.error is None and self.pending:
            entry_id, payload, fut = self.pending.pop(0)
            self.stored.append(payload)
            self.last_add_confirmed = entry_id
            fut.set_result(entry_id)

    def fence(self) -> None:
        self.fail(LedgerFenced(self.ledger_id))

    def fail(self, error: Exception) -> None:
        """What the real handle does when an add fails: this and every pending add fail."""
        self.error = error
        pending, self.pending = self.pending, []
        for _, _, fut in pending:
            fut.set_exception(error)

    async def close(self) -> LedgerMetadata:
        if self.pending:
            await asyncio.gather(*(f for _, _, f in self.pending), return_exceptions=True)
        self.closed = True
        if isinstance(self.error, LedgerFenced | ServiceClosed):
            raise self.error
        if self.client.fail_close:
            raise MetadataError("ZooKeeper is gone")
        # A writer whose adds failed closes at its last confirmed entry, as the real one.
        md = self.metadata.closed(len(self.stored) - 1, sum(map(len, self.stored)))
        self.client.closed[self.ledger_id] = md
        await asyncio.sleep(self.client.close_delay)
        return md

    async def abort(self, drain: bool = False) -> None:
        if drain and self.pending:
            await asyncio.gather(*(f for _, _, f in self.pending), return_exceptions=True)
        self.closed = True
        self.error = ServiceClosed("aborted")


def _entries(ledger_id: int, data: list[bytes], first: int, last: int, last_readable: int) -> list[LedgerEntry]:
    if last > last_readable:
        raise InvalidArgument("past the end")
    return [LedgerEntry(ledger_id, e, data[e], 0) for e in range(first, last + 1)]


@dataclass
class FakeReader:
    ledger_id: int
    metadata: LedgerMetadata
    data: list[bytes]

    async def read(self, first: int, last: int) -> list[LedgerEntry]:
        return _entries(self.ledger_id, self.data, first, last, self.metadata.last_entry_id)


@dataclass
class FakeLedgerClient:
    config: LedgerClientConfig = field(default_factory=lambda: LedgerClientConfig(max_entry_bytes=1000))
    data: dict[int, list[bytes]] = field(default_factory=dict)
    closed: dict[int, LedgerMetadata] = field(default_factory=dict)
    handles: dict[int, FakeHandle] = field(default_factory=dict)
    next_id: int = 10
    add_delay: float = 0.0
    close_delay: float = 0.0
    fail_create: bool = False
    fail_close: bool = False
    reads: int = 0
    properties: list[dict[str, str]] = field(default_factory=list)

    async def create_ledger(
        self, ensemble_size: int, write_quorum: int, ack_quorum: int, properties: dict[str, str] | None = None
    ) -> FakeHandle:
        if self.fail_create:
            raise NotEnoughBookies(ensemble_size, 0)
        self.next_id += 1
        self.data[self.next_id] = []
        self.properties.append(dict(properties or {}))
        handle = self.handles[self.next_id] = FakeHandle(self, self.next_id)
        return handle

    async def open_ledger(self, ledger_id: int, recovery: bool = True) -> FakeReader:
        if ledger_id not in self.data:
            raise NoSuchLedger(ledger_id)
        self.reads += 1
        if ledger_id not in self.closed:
            if not recovery:
                raise AssertionError("the managed ledger reads open ledgers through its writer")
            self.handles[ledger_id].fence()
            stored = self.data[ledger_id]
            self.closed[ledger_id] = self.handles[ledger_id].metadata.closed(len(stored) - 1, sum(map(len, stored)))
        return FakeReader(ledger_id, self.closed[ledger_id], self.data[ledger_id])

    async def delete_ledger(self, ledger_id: int) -> None:
        if self.data.pop(ledger_id, None) is None:
            raise NoSuchLedger(ledger_id)


def _as_stored(doc):
    """What ZooKeeper gives back: the document through JSON (tuples become lists)."""
    return json.loads(json.dumps(doc))


class MemoryStore:
    """In-memory twin of ZkManagedLedgerStore (same versions and errors)."""

    def __init__(self) -> None:
        self.lists: dict[tuple[str, str, str], tuple[dict, int]] = {}
        self.cursors: dict[tuple[str, str, str, str], tuple[dict, int]] = {}
        self.cursor_writes = 0

    async def get(self, t, n, topic):
        doc, v = self.lists.get((t, n, topic), (None, -1))
        return copy.deepcopy(doc), v

    async def create(self, t, n, topic, doc):
        if (t, n, topic) in self.lists:
            raise MetadataVersionConflict("exists")
        self.lists[(t, n, topic)] = (copy.deepcopy(doc), 0)
        return 0

    async def update(self, t, n, topic, doc, version):
        if (t, n, topic) not in self.lists:
            raise NotFound("gone")
        if self.lists[(t, n, topic)][1] != version:
            raise MetadataVersionConflict("bad version")
        self.lists[(t, n, topic)] = (copy.deepcopy(doc), version + 1)
        return version + 1

    async def delete(self, t, n, topic):
        self.lists.pop((t, n, topic), None)
        for key in [k for k in self.cursors if k[:3] == (t, n, topic)]:
            del self.cursors[key]

    async def list_cursors(self, t, n, topic):
        return sorted(k[3] for k in self.cursors if k[:3] == (t, n, topic))

    async def get_cursor(self, t, n, topic, c):
        doc, v = self.cursors.get((t, n, topic, c), (None, -1))
        return copy.deepcopy(doc), v

    async def put_cursor(self, t, n, topic, c, doc, version):
        key = (t, n, topic, c)
        self.cursor_writes += 1
        if version is None:
            if key in self.cursors:
                raise MetadataVersionConflict("exists")
            self.cursors[key] = (_as_stored(doc), 0)
            return 0
        if key not in self.cursors:
            raise NotFound("gone")
        if self.cursors[key][1] != version:
            raise MetadataVersionConflict("bad version")
        self.cursors[key] = (_as_stored(doc), version + 1)
        return version + 1

    async def delete_cursor(self, t, n, topic, c):
        self.cursors.pop((t, n, topic, c), None)


NAME = ("public", "default", "t")


async def open_ml(client: FakeLedgerClient, store: MemoryStore, **settings: Any) -> ManagedLedger:
    settings.setdefault("cursor_persist_interval_s", 0.01)
    return await ManagedLedger.open(*NAME, client, store, ManagedLedgerConfig(**settings))


def stored_list(store: MemoryStore) -> list[dict]:
    return store.lists[NAME][0]["ledgers"]


async def test_adds_complete_in_order_and_roll_over_at_max_entries():
    client, store = FakeLedgerClient(close_delay=0.01), MemoryStore()
    ml = await open_ml(client, store, max_entries_per_ledger=10)
    order: list[Position] = []
    futs = [ml.add_entry(b"m%d" % i) for i in range(35)]
    for f in futs:
        f.add_done_callback(lambda f: order.append(f.result()))
    positions = await asyncio.gather(*futs)
    assert order == list(positions) == sorted(positions)
    ids = sorted({p.ledger_id for p in positions})
    assert len(ids) == 4 and [sum(p.ledger_id == i for p in positions) for i in ids] == [10, 10, 10, 5]
    assert ml.number_of_entries == 35 and ml.last_confirmed_position == positions[-1]
    assert [d["entries"] for d in stored_list(store)] == [10, 10, 10, -1]
    assert client.properties[0] == {"topic": "persistent://public/default/t", "component": "managed-ledger"}
    got = await ml.read_entries(ml.first_position, 100, 1 << 20)
    assert [d for _, d in got] == [b"m%d" % i for i in range(35)]
    assert [p for p, _ in got] == list(positions)
    await ml.close()
    assert [d["entries"] for d in stored_list(store)] == [10, 10, 10, 5]
    with pytest.raises(ServiceClosed):
        await ml.add_entry(b"late")


async def test_rollover_by_size_and_by_age_with_an_injected_clock():
    client, store = FakeLedgerClient(), MemoryStore()
    ml = await open_ml(client, store, max_size_per_ledger=100)
    for _ in range(5):
        await ml.add_entry(b"x" * 40)
    await asyncio.sleep(0)
    assert [i.entries for i in ml.ledgers][:2] == [3, 2]  # rolled after the entry that reached 100 bytes
    await ml.close()

    now = [1000.0]
    ml = await ManagedLedger.open(*NAME, client, store, ManagedLedgerConfig(max_ledger_age_s=60), clock=lambda: now[0])
    first = await ml.add_entry(b"a")
    now[0] += 61
    second = await ml.add_entry(b"b")  # the ledger is too old: this one is the last in it
    third = await ml.add_entry(b"c")
    assert first.ledger_id == second.ledger_id != third.ledger_id
    await ml.close()


async def test_reads_cross_ledgers_respect_limits_and_use_bookies_for_evicted_entries():
    client, store = FakeLedgerClient(), MemoryStore()
    ml = await open_ml(client, store, max_entries_per_ledger=4, cache_max_bytes=30)
    positions = [await ml.add_entry(b"e%02d" % i) for i in range(12)]  # 3 bytes each
    await asyncio.sleep(0.01)
    assert len(ml.cache) == 10  # entries 0 and 1 left the cache
    got = await ml.read_entries(positions[1], 5, 1 << 20)
    assert [p for p, _ in got] == positions[1:6] and got[0][1] == b"e01"
    assert client.reads == 1  # entry 1 came from the "bookies", the rest from the cache
    assert [d for _, d in await ml.read_entries(positions[0], 100, 10)] == [b"e00", b"e01", b"e02"]  # 9 bytes
    assert [d for _, d in await ml.read_entries(positions[0], 100, 1)] == [b"e00"]  # always one
    assert await ml.read_entries(ml.next_position(positions[-1]), 10, 100) == []
    assert await ml.read_entries(P(10_000, 0), 10, 100) == []
    assert [p for p, _ in await ml.read_entries(P(0, 0), 1, 100)] == [positions[0]]
    assert ml.next_position(positions[3]) == positions[4]
    for bad in ((positions[0], 0, 10), (positions[0], 10, 0), (P(-1, 0), 1, 1)):
        with pytest.raises(InvalidArgument):
            await ml.read_entries(*bad)
    await ml.close()


async def test_bad_entries_fail_alone_and_a_fenced_add_fails_everything_after_it():
    client, store = FakeLedgerClient(add_delay=0.01), MemoryStore()
    ml = await open_ml(client, store)
    with pytest.raises(EntryTooLarge):
        await ml.add_entry(b"x" * 1001)
    with pytest.raises(InvalidArgument):
        await ml.add_entry("text")  # type: ignore[arg-type]
    ok = await ml.add_entry(b"ok")
    futs = [ml.add_entry(b"p%d" % i) for i in range(5)]
    client.handles[ok.ledger_id].fence()
    results = await asyncio.gather(*futs, return_exceptions=True)
    assert all(isinstance(r, LedgerFenced) for r in results)
    assert ml.is_fenced
    with pytest.raises(LedgerFenced):
        await ml.add_entry(b"after")
    with pytest.raises(LedgerFenced):
        await ml.wait_for_new_entries(ok, 1)
    await ml.close()
    assert stored_list(store)[-1]["entries"] == -1  # left for the next owner to recover


async def test_a_failed_rollover_fails_the_queued_adds():
    client, store = FakeLedgerClient(close_delay=0.02), MemoryStore()
    ml = await open_ml(client, store, max_entries_per_ledger=2)
    client.fail_create = True
    futs = [ml.add_entry(b"%d" % i) for i in range(5)]
    results = await asyncio.gather(*futs, return_exceptions=True)
    assert [type(r).__name__ for r in results] == ["Position", "Position"] + ["NotEnoughBookies"] * 3
    await ml.close()


async def test_a_retriable_add_failure_closes_the_ledger_and_the_next_add_opens_a_new_one():
    """Pulsar's ClosedLedger: the failed ledger is closed at its last confirmed entry,
    pending adds fail with the retriable error, and adds once bookies are back succeed
    in a new ledger, without reopening the managed ledger."""
    client, store = FakeLedgerClient(add_delay=0.01), MemoryStore()
    ml = await open_ml(client, store)
    kept = [await ml.add_entry(b"k%d" % i) for i in range(3)]
    first = kept[0].ledger_id
    pending = [ml.add_entry(b"p%d" % i) for i in range(4)]
    client.fail_create = True  # no writable bookies for a while
    client.handles[first].fail(NotEnoughBookies(2, 1))
    results = await asyncio.gather(*pending, return_exceptions=True)
    assert [type(r) for r in results] == [NotEnoughBookies] * 4
    assert not ml.is_fenced
    for _ in range(100):  # the failed ledger gets closed, and the list stored, in the background
        if stored_list(store)[-1]["entries"] != -1:
            break
        await asyncio.sleep(0.01)
    assert client.closed[first].last_entry_id == 2
    assert ml.state == "ClosedLedger" and ml.current_ledger_id is None
    assert [(d["ledger_id"], d["entries"]) for d in stored_list(store)] == [(first, 3)]

    with pytest.raises(NotEnoughBookies):  # still none: the add fails, the topic is not failed
        await ml.add_entry(b"still none")
    assert not ml.is_fenced and len(client.handles) == 1
    client.fail_create = False  # bookies are back, and lost again before an entry is stored
    lost = ml.add_entry(b"p0")
    while ml.current_ledger_id is None:
        await asyncio.sleep(0.001)
    empty = ml.current_ledger_id
    client.handles[empty].fail(NotEnoughBookies(2, 1))
    with pytest.raises(NotEnoughBookies):
        await lost
    for _ in range(100):  # as Pulsar: an empty failed ledger leaves the list and is deleted
        if empty not in client.data:
            break
        await asyncio.sleep(0.01)
    assert empty not in client.data and [d["ledger_id"] for d in stored_list(store)] == [first]

    resent = [await ml.add_entry(b"p%d" % i) for i in range(4)]  # back for good
    assert {p.ledger_id for p in resent} == {ml.current_ledger_id} and ml.current_ledger_id > first
    assert [p.entry_id for p in resent] == [0, 1, 2, 3]
    assert ml.state == "LedgerOpened"
    got = await ml.read_entries(ml.first_position, 100, 1 << 20)
    assert [d for _, d in got] == [b"k0", b"k1", b"k2", b"p0", b"p1", b"p2", b"p3"]
    await ml.close()
    assert [d["entries"] for d in stored_list(store)] == [3, 4]


async def test_a_failed_ledger_that_cannot_be_closed_is_closed_before_a_new_one_opens():
    client, store = FakeLedgerClient(add_delay=0.01), MemoryStore()
    ml = await open_ml(client, store)
    await ml.add_entry(b"a")
    first = ml.current_ledger_id
    assert first is not None
    client.fail_close = True
    failed = ml.add_entry(b"b")
    client.handles[first].fail(NotEnoughBookies(2, 1))
    with pytest.raises(NotEnoughBookies):
        await failed
    with pytest.raises(MetadataError):  # the close failed: no new ledger beside the open one
        await ml.add_entry(b"c")
    assert len(client.handles) == 1 and first not in client.closed and not ml.is_fenced
    client.fail_close = False
    assert (await ml.add_entry(b"c")).ledger_id > first
    assert client.closed[first].last_entry_id == 0
    await ml.close()


async def test_reopening_recovers_the_open_ledger_fences_the_old_owner_and_drops_empty_ledgers():
    client, store = FakeLedgerClient(), MemoryStore()
    old = await open_ml(client, store)
    done = [await old.add_entry(b"d%d" % i) for i in range(7)]
    # the old owner "crashes": nothing closed; a new owner takes over
    new = await open_ml(client, store)
    assert new.number_of_entries == 7 and new.last_confirmed_position == done[-1]
    assert [d for _, d in await new.read_entries(new.first_position, 100, 1 << 20)] == [b"d%d" % i for i in range(7)]
    with pytest.raises(LedgerFenced):
        await old.add_entry(b"too late")
    p = await new.add_entry(b"new")
    assert p.ledger_id > done[-1].ledger_id
    third = await open_ml(client, store)  # recovers new's ledger (fencing it) and leaves one empty
    await third.close()
    await new.close()
    await old.close()
    fourth = await open_ml(client, store)
    ids = [i.ledger_id for i in fourth.ledgers]
    assert ids[:2] == [done[0].ledger_id, p.ledger_id] and len(ids) == 3  # `third`'s empty ledger dropped
    assert fourth.number_of_entries == 8
    await fourth.close()


async def test_a_concurrent_takeover_is_not_clobbered():
    client, store = FakeLedgerClient(), MemoryStore()
    ml = await open_ml(client, store, max_entries_per_ledger=2)
    await ml.add_entry(b"a")
    # another broker changes the list behind our back
    doc, v = store.lists[NAME]
    store.lists[NAME] = (doc, v + 1)
    futs = [ml.add_entry(b"%d" % i) for i in range(3)]  # the second one triggers a rollover
    results = await asyncio.gather(*futs, return_exceptions=True)
    assert isinstance(results[0], Position)
    assert all(isinstance(r, MetadataVersionConflict) for r in results[1:])
    assert "another broker" in str(results[-1])
    assert store.lists[NAME] == (doc, v + 1)  # untouched
    await ml.close()


async def test_tailing_readers_wake_up_on_new_entries():
    client, store = FakeLedgerClient(), MemoryStore()
    ml = await open_ml(client, store)
    last = ml.last_confirmed_position
    assert not await ml.wait_for_new_entries(last, 0.01)
    waiter = asyncio.ensure_future(ml.wait_for_new_entries(last, 5))
    await asyncio.sleep(0)
    p = await ml.add_entry(b"hello")
    assert await waiter
    assert await ml.read_entries(ml.next_position(last), 10, 100) == [(p, b"hello")]
    blocked = asyncio.ensure_future(ml.wait_for_new_entries(p, 5))
    await asyncio.sleep(0)
    await ml.close()
    with pytest.raises(ServiceClosed):
        await blocked


async def test_trim_and_delete():
    client, store = FakeLedgerClient(), MemoryStore()
    ml = await open_ml(client, store, max_entries_per_ledger=3)
    positions = [await ml.add_entry(b"%d" % i) for i in range(9)]
    await asyncio.sleep(0.01)
    cursor = await ml.open_cursor("s", "earliest")
    assert await ml.trim_consumed() == []
    cursor.ack_cumulative(positions[4])
    assert await ml.trim_consumed() == [positions[0].ledger_id]
    assert positions[0].ledger_id not in client.data
    assert ml.number_of_entries == 6 and ml.first_position == positions[3]
    assert cursor.backlog() == 4
    assert [p for p, _ in await ml.read_entries(P(0, 0), 2, 100)] == positions[3:5]
    await ml.delete()
    assert NAME not in store.lists and not store.cursors
    assert not any(p.ledger_id in client.data for p in positions)


# -- cursors -------------------------------------------------------------------------


async def test_cursor_individual_and_cumulative_acks_move_mark_delete_and_backlog():
    client, store = FakeLedgerClient(), MemoryStore()
    ml = await open_ml(client, store, max_entries_per_ledger=4)
    pos = [await ml.add_entry(b"%d" % i) for i in range(10)]
    await asyncio.sleep(0.01)
    c = await ml.open_cursor("sub", "earliest")
    assert c.mark_delete_position == P(pos[0].ledger_id, -1)
    assert c.read_position == pos[0] and c.backlog() == 10
    c.ack([pos[2], pos[5], pos[3]])
    assert c.mark_delete_position == P(pos[0].ledger_id, -1)
    assert c.individually_acked == [(pos[2], pos[3]), (pos[5], pos[5])]
    assert c.backlog() == 7 and c.is_acked(pos[3]) and not c.is_acked(pos[4])
    c.ack([pos[4]])  # (0,3) -> (1,0) across the ledger boundary
    assert c.individually_acked == [(pos[2], pos[5])]
    c.ack([pos[0], pos[1]])
    assert c.mark_delete_position == pos[5] and c.individually_acked == [] and c.backlog() == 4
    c.ack([pos[9]])
    c.ack_cumulative(pos[7])
    assert c.mark_delete_position == pos[7] and c.individually_acked == [(pos[9], pos[9])]
    assert c.backlog() == 1 and c.read_position == pos[8]
    c.ack_cumulative(pos[2])  # behind mark-delete: nothing happens
    assert c.mark_delete_position == pos[7]
    with pytest.raises(InvalidArgument):
        c.ack([pos[8], P(pos[9].ledger_id, 50)])  # one bad position: nothing changes
    assert not c.is_acked(pos[8])
    with pytest.raises(InvalidArgument):
        c.ack_cumulative(P(99999, 0))
    c.ack([(pos[8].ledger_id, pos[8].entry_id)])  # plain tuples work too
    assert c.mark_delete_position == pos[9] and c.backlog() == 0
    await ml.close()


async def test_cursor_persists_debounced_and_reopens_with_the_same_state():
    client, store = FakeLedgerClient(), MemoryStore()
    ml = await open_ml(client, store, cursor_persist_interval_s=0.2)
    pos = [await ml.add_entry(b"%d" % i) for i in range(10)]
    c = await ml.open_cursor("sub", "earliest")
    writes = store.cursor_writes
    for p in (pos[1], pos[3], pos[4], pos[8]):
        c.ack([p])
    c.ack_cumulative(pos[0])
    await asyncio.sleep(0.05)
    assert store.cursor_writes <= writes + 1  # at most one write so far
    await asyncio.sleep(0.3)
    doc = store.cursors[(*NAME, "sub")][0]
    lid = pos[0].ledger_id
    assert doc == {
        "mark_delete": [lid, 1],
        "individually_acked": [[[lid, 3], [lid, 4]], [[lid, 8], [lid, 8]]],
        "properties": {},
        "read_position": [lid, 2],
    }
    c.ack([pos[9]])
    await c.flush()
    assert store.cursors[(*NAME, "sub")][0]["individually_acked"][-1] == [[lid, 8], [lid, 9]]
    backlog = c.backlog()
    await ml.close()
    again = await open_ml(client, store)
    assert set(again.cursors) == {"sub"}
    c2 = again.cursors["sub"]
    assert c2.mark_delete_position == P(lid, 1)
    assert c2.individually_acked == [(pos[3], pos[4]), (pos[8], pos[9])]
    assert c2.backlog() == backlog == 4 and c2.read_position == pos[2]
    assert await again.open_cursor("sub", "latest") is c2
    await again.close()


async def test_cursor_initial_positions_rewind_seek_and_read():
    client, store = FakeLedgerClient(), MemoryStore()
    ml = await open_ml(client, store)
    empty_latest = await ml.open_cursor("empty-latest", "latest")
    pos = [await ml.add_entry(b"%d" % i) for i in range(5)]
    latest = await ml.open_cursor("latest", "latest")
    earliest = await ml.open_cursor("earliest", "earliest")
    assert empty_latest.backlog() == 5 and latest.backlog() == 0 and earliest.backlog() == 5
    assert latest.read_position == ml.next_position(pos[-1])
    earliest.ack([pos[1]])
    got = await earliest.read_entries(10, 1 << 20)
    assert [p for p, _ in got] == [pos[0], pos[2], pos[3], pos[4]]
    assert await earliest.read_entries(10, 1 << 20) == [] and not earliest.has_more_entries()
    earliest.rewind()
    assert earliest.read_position == pos[0]
    earliest.seek(pos[3])
    assert earliest.read_position == pos[3]
    earliest.ack_cumulative(pos[3])
    earliest.seek(pos[0])  # not before the first unacknowledged entry
    assert earliest.read_position == pos[4]
    with pytest.raises(InvalidArgument):
        await ml.open_cursor("x", "middle")
    await ml.delete_cursor("latest")
    assert "latest" not in ml.cursors and (*NAME, "latest") not in store.cursors
    await ml.close()


async def test_cursor_changed_by_another_broker_stops_persisting():
    client, store = FakeLedgerClient(), MemoryStore()
    ml = await open_ml(client, store)
    pos = [await ml.add_entry(b"%d" % i) for i in range(3)]
    c = await ml.open_cursor("sub", "earliest")
    doc, v = store.cursors[(*NAME, "sub")]
    store.cursors[(*NAME, "sub")] = (doc, v + 5)
    c.ack([pos[0]])
    await asyncio.sleep(0.05)  # the debounced write fails and gives up
    with pytest.raises(MetadataVersionConflict):
        await c.flush()
    assert store.cursors[(*NAME, "sub")] == (doc, v + 5)
    await ml.close()  # logs, does not raise


async def test_a_new_owner_takes_cursors_over_so_the_old_owner_cannot_overwrite_them():
    client, store = FakeLedgerClient(), MemoryStore()
    old = await open_ml(client, store)
    pos = [await old.add_entry(b"%d" % i) for i in range(5)]
    c_old = await old.open_cursor("sub", "earliest")
    c_old.ack_cumulative(pos[1])
    await c_old.flush()
    new = await open_ml(client, store)
    c_new = new.cursors["sub"]
    assert c_new.mark_delete_position == pos[1]
    c_old.ack_cumulative(pos[3])  # the old owner has not noticed yet
    with pytest.raises(MetadataVersionConflict):
        await c_old.flush()
    c_new.ack_cumulative(pos[2])
    await c_new.flush()
    assert store.cursors[(*NAME, "sub")][0]["mark_delete"] == list(pos[2])
    await old.close()
    await new.close()


async def test_a_stale_owner_cannot_delete():
    client, store = FakeLedgerClient(), MemoryStore()
    old = await open_ml(client, store)
    await old.add_entry(b"x")
    new = await open_ml(client, store)
    with pytest.raises(MetadataVersionConflict):
        await old.delete()
    assert NAME in store.lists and all(i.ledger_id in client.data for i in new.ledgers)
    await new.close()
