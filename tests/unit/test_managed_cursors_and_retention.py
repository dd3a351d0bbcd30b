"""ManagedLedger: cursors from a start position, non-durable cursors, finding a position
by publish time, and retention-aware trimming, against the in-memory twins."""

from __future__ import annotations

import asyncio

import pytest
from test_managed_ledger_core import NAME, FakeLedgerClient, MemoryStore, open_ml

from magnetar.common.errors import AlreadyExists, InvalidArgument
from magnetar.managedledger import ManagedLedger, ManagedLedgerConfig, Position
from magnetar.managedledger.layout import LedgerInfo, LedgerList
from magnetar.managedledger.retention import ledgers_to_delete

P = Position
LATEST = P(2**63 - 1, 2**63 - 1)


async def filled(n: int = 10, per_ledger: int = 4, **settings):
    client, store = FakeLedgerClient(), MemoryStore()
    ml = await open_ml(client, store, max_entries_per_ledger=per_ledger, **settings)
    pos = [await ml.add_entry(b"%d" % i) for i in range(n)]
    await asyncio.sleep(0.01)
    return client, store, ml, pos


# -- cursors from a start position -----------------------------------------------------


async def test_new_cursors_start_where_asked():
    _, _, ml, pos = await filled()
    cases = {
        "in": (pos[5], True, pos[5]),
        "ex": (pos[5], False, pos[6]),
        "ex-boundary": (pos[3], False, pos[4]),  # last entry of a ledger
        "in-boundary": (pos[4], True, pos[4]),  # entry 0 of a ledger
        "earliest": ((-1, -1), False, pos[0]),
        "earliest-in": (P(-1, -1), True, pos[0]),
        "before-first": (P(0, 0), False, pos[0]),
        "past-closed-end": (P(pos[3].ledger_id, 50), True, pos[4]),
        "last-in": (pos[9], True, pos[9]),
    }
    for name, (start, inclusive, first_read) in cases.items():
        c = await ml.open_cursor(name, start=start, inclusive=inclusive)
        assert c.read_position == first_read, name
        assert ml.next_position(c.mark_delete_position) == first_read, name
        assert c.backlog() == 10 - pos.index(first_read), name
        assert [p for p, _ in await c.read_entries(1, 100)] == [first_read], name
    for name, start in {"latest": LATEST, "after-last": ml.next_position(pos[9]), "last-ex": pos[9]}.items():
        c = await ml.open_cursor(name, "earliest", start=start, inclusive=True if name != "last-ex" else False)
        assert c.mark_delete_position == pos[9] and c.backlog() == 0, name
    p = await ml.add_entry(b"new")
    assert ml.cursors["latest"].backlog() == 1 and ml.cursors["latest"].read_position == p
    await ml.close()


async def test_an_existing_durable_cursor_ignores_start_and_bad_starts_are_refused():
    client, store, ml, pos = await filled()
    c = await ml.open_cursor("sub", start=pos[5], inclusive=True)
    c.ack_cumulative(pos[7])
    assert await ml.open_cursor("sub", start=pos[1], inclusive=True) is c
    await ml.close()
    ml = await open_ml(client, store, max_entries_per_ledger=4)
    again = await ml.open_cursor("sub", start=pos[1], inclusive=True)
    assert again.mark_delete_position == pos[7]
    for bad in ((-1, 0), (-2, -2), (1, 2, 3), "x", (1.0, 2)):
        with pytest.raises(InvalidArgument):
            await ml.open_cursor("new", start=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        await ml.open_cursor("new", start=pos[1], inclusive="yes")  # type: ignore[arg-type]
    assert "new" not in ml.cursors and (*NAME, "new") not in store.cursors
    await ml.close()


async def test_start_on_an_empty_managed_ledger():
    client, store = FakeLedgerClient(), MemoryStore()
    ml = await open_ml(client, store)
    a = await ml.open_cursor("a", start=(-1, -1))
    b = await ml.open_cursor("b", start=LATEST, inclusive=True)
    p = await ml.add_entry(b"x")
    assert a.read_position == b.read_position == p and a.backlog() == b.backlog() == 1
    await ml.close()


# -- non-durable cursors ---------------------------------------------------------------


async def test_non_durable_cursors_are_never_stored_and_hold_nothing_back():
    _, store, ml, pos = await filled()
    writes = store.cursor_writes
    r = await ml.open_cursor("reader-1", start=pos[2], inclusive=True, durable=False)
    assert not r.durable and r.read_position == pos[2]
    assert "reader-1" not in ml.cursors and ml.non_durable_cursors == {"reader-1": r}
    assert await ml.open_cursor("reader-1", durable=False) is r
    r.ack([pos[2]])
    r.ack_batch(pos[3], 2, 1)
    r.add_redeliveries([pos[5]])
    assert r.redelivery_count(pos[5]) == 1 and not r.counts_dirty
    r.reset_to(pos[4])
    r.add_redeliveries([pos[5]])
    await r.persist_counts()
    await r.persist()
    await r.flush()
    await asyncio.sleep(0.05)
    assert store.cursor_writes == writes and (*NAME, "reader-1") not in store.cursors
    # it does not hold data back: without durable cursors every closed ledger is consumed
    assert await ml.trim_consumed() == [pos[0].ledger_id, pos[4].ledger_id]
    assert await r.read_entries(10, 1 << 20) == [(pos[8], b"8"), (pos[9], b"9")]
    await ml.delete_cursor("reader-1")
    assert ml.non_durable_cursors == {} and r.closed and store.cursor_writes == writes
    await ml.close()
    assert store.cursor_writes == writes


async def test_a_name_is_either_durable_or_not():
    _, store, ml, _ = await filled()
    await ml.open_cursor("sub")
    await ml.open_cursor("reader", durable=False)
    with pytest.raises(AlreadyExists):
        await ml.open_cursor("sub", durable=False)
    with pytest.raises(AlreadyExists):
        await ml.open_cursor("reader")
    assert (*NAME, "reader") not in store.cursors
    await ml.close()
    assert ml.non_durable_cursors["reader"].closed


# -- finding a position by publish time ------------------------------------------------


async def test_find_position_by_time_searches_every_ledger():
    client, store = FakeLedgerClient(), MemoryStore()
    ml = await open_ml(client, store, max_entries_per_ledger=3)
    times = [100, 100, 105, 110, 110, 110, 120, 130, 131, 140]
    pos = [await ml.add_entry(b"%d" % t) for t in times]
    await asyncio.sleep(0.01)
    reads = []

    def publish_time(data: bytes) -> int:
        reads.append(data)
        return int(data)

    for ts, expected in [(0, 0), (100, 0), (101, 2), (110, 3), (111, 6), (125, 7), (131, 8), (140, 9)]:
        assert await ml.find_position_by_time(ts, publish_time) == pos[expected], ts
    after = await ml.find_position_by_time(141, publish_time)
    assert after == ml.next_position(pos[-1]) and after > pos[-1]
    assert len(reads) <= 9 * 4  # log2(10) reads per search
    c = await ml.open_cursor("sub", "earliest")
    c.reset_to(after)
    assert c.backlog() == 0
    with pytest.raises(InvalidArgument):
        await ml.find_position_by_time("soon", publish_time)  # type: ignore[arg-type]
    await ml.close()


async def test_find_position_by_time_on_an_empty_or_trimmed_managed_ledger():
    client, store = FakeLedgerClient(), MemoryStore()
    ml = await open_ml(client, store, max_entries_per_ledger=2)
    found = await ml.find_position_by_time(5, int)
    assert found == ml.next_position(ml.last_confirmed_position)
    p = await ml.add_entry(b"7")
    assert p == found
    pos = [p] + [await ml.add_entry(b"%d" % t) for t in (8, 9, 10)]
    await asyncio.sleep(0.01)
    c = await ml.open_cursor("sub", "earliest")
    c.ack_cumulative(pos[1])
    assert await ml.trim_consumed() == [pos[0].ledger_id]
    assert await ml.find_position_by_time(0, int) == pos[2]
    assert await ml.find_position_by_time(10, int) == pos[3]
    await ml.close()


# -- retention ---------------------------------------------------------------------------


async def clocked(now: list[float], n: int, per_ledger: int, payload: bytes = b"x" * 10):
    """Adds ``n`` entries, one clock second apart (ledgers are created at clock time)."""
    client, store = FakeLedgerClient(), MemoryStore()
    config = ManagedLedgerConfig(max_entries_per_ledger=per_ledger, cursor_persist_interval_s=0.01)
    ml = await ManagedLedger.open(*NAME, client, store, config, clock=lambda: now[0])
    pos = []
    for _ in range(n):
        pos.append(await ml.add_entry(payload))
        now[0] += 1
        await asyncio.sleep(0.005)
    return client, store, ml, pos


async def test_without_durable_cursors_every_closed_ledger_is_consumed():
    client, _, ml, pos = await filled(10, 4)
    assert await ml.trim_consumed(None, None) == []  # unlimited retention keeps everything
    assert await ml.trim_consumed() == [pos[0].ledger_id, pos[4].ledger_id]  # 0/0
    assert pos[0].ledger_id not in client.data and ml.first_position == pos[8]
    assert ml.current_ledger_id == pos[8].ledger_id  # the open ledger stays
    assert await ml.trim_consumed() == []
    await ml.close()


async def test_only_ledgers_every_durable_cursor_acked_are_consumed():
    _, _, ml, pos = await filled(12, 4)
    a = await ml.open_cursor("a", "earliest")
    b = await ml.open_cursor("b", "earliest")
    await ml.open_cursor("reader", "earliest", durable=False)
    a.ack_cumulative(pos[9])
    b.ack_cumulative(pos[2])
    assert await ml.trim_consumed() == []
    b.ack([pos[3]])  # b's mark-delete reaches the end of the first ledger
    assert await ml.trim_consumed() == [pos[0].ledger_id]
    b.ack_cumulative(pos[11])  # the last ledger is closed but no later ledger holds entries
    assert await ml.trim_consumed() == [pos[4].ledger_id]
    assert [i.ledger_id for i in ml.ledgers][0] == pos[8].ledger_id
    await ml.close()


async def test_retention_time_counts_from_when_a_ledger_stopped_receiving_writes():
    now = [1000.0]
    _, _, ml, pos = await clocked(now, 9, 3)  # ledgers created at 1000, ~1003, ~1006
    ids = sorted({p.ledger_id for p in pos})
    created = {i.ledger_id: i.created_ms for i in ml.ledgers}
    assert len(ids) == 3 and ml.current_ledger_id not in ids  # a 4th, open and empty
    now[0] = created[ids[1]] / 1000 + 100  # first ledger: stopped 100 s ago
    assert await ml.trim_consumed(100.5, None) == []
    assert await ml.trim_consumed(99.5, None) == [ids[0]]
    now[0] = created[ids[2]] / 1000 + 50
    assert await ml.trim_consumed(51, None) == []
    assert await ml.trim_consumed(50, 10**9) == [ids[1]]  # time alone is enough
    await ml.close()


async def test_retention_size_keeps_the_newest_consumed_ledgers_within_the_limit():
    now = [1000.0]
    _, _, ml, pos = await clocked(now, 12, 3)  # 4 closed ledgers of 30 bytes, 1 open
    ids = sorted({p.ledger_id for p in pos})
    assert [i.size for i in ml.ledgers][:4] == [30] * 4
    assert await ml.trim_consumed(None, 120) == []
    assert await ml.trim_consumed(None, 90) == [ids[0]]
    assert await ml.trim_consumed(None, 31) == [ids[1], ids[2]]  # 60 > 31, then 30 fits
    assert await ml.trim_consumed(10**6, 30) == []  # both limits allow keeping it
    assert await ml.trim_consumed(10**6, 29) == [ids[3]]
    await ml.close()


async def test_retention_arguments_are_checked():
    _, _, ml, _ = await filled(2)
    for bad in ((-1, 0), (0, -1), ("1", 0), (0, 1.5), (True, 0), (0, False), (float("nan"), 0)):
        with pytest.raises(InvalidArgument):
            await ml.trim_consumed(*bad)  # type: ignore[arg-type]
    await ml.close()


def test_retention_rule_on_a_list():
    ledgers = LedgerList(
        [LedgerInfo(1, 5, 100, 0), LedgerInfo(2, 5, 100, 10_000), LedgerInfo(3, 0, 0, 20_000), LedgerInfo(4, 5, 100, 30_000)],
        open_ledger_id=4,
    )
    ids = lambda victims: [i.ledger_id for i in victims]  # noqa: E731
    assert ids(ledgers_to_delete(ledgers, None, 40_000, 0, 0)) == [1, 2, 3]
    assert ids(ledgers_to_delete(ledgers, P(2, 3), 40_000, 0, 0)) == [1]  # 2 not wholly acked
    assert ids(ledgers_to_delete(ledgers, P(2, 4), 40_000, 0, 0)) == [1, 2, 3]  # the empty 3 too
    assert ids(ledgers_to_delete(ledgers, P(0, -1), 40_000, 0, 0)) == []
    # ledger 1 stopped at 10 s, 2 at 20 s, 3 at 30 s; now 40 s
    assert ids(ledgers_to_delete(ledgers, None, 40_000, 25, None)) == [1]
    assert ids(ledgers_to_delete(ledgers, None, 40_000, 20, None)) == [1, 2]
    assert ids(ledgers_to_delete(ledgers, None, 40_000, None, 150)) == [1]
    assert ids(ledgers_to_delete(ledgers, None, 40_000, None, 100)) == [1]  # 100 left: not over
    assert ids(ledgers_to_delete(ledgers, None, 40_000, None, 99)) == [1, 2]  # then 3 is 0 bytes
    assert ids(ledgers_to_delete(ledgers, None, 40_000, None, None)) == []
    ledgers.open_ledger_id = None  # between rollovers: the last ledger stays anyway
    assert ids(ledgers_to_delete(ledgers, None, 40_000, 0, 0)) == [1, 2, 3]


def test_retention_of_delayed_messages_counts_from_their_delivery_time():
    # Ledger 1 stopped at 10 s but holds a message due at 35 s; 2 stopped at 20 s.
    ledgers = LedgerList(
        [LedgerInfo(1, 5, 100, 0, max_deliver_at_ms=35_000), LedgerInfo(2, 5, 100, 10_000),
         LedgerInfo(3, 5, 100, 20_000)],
        open_ledger_id=3,
    )  # fmt: skip
    ids = lambda victims: [i.ledger_id for i in victims]  # noqa: E731
    # Now 40 s: ledger 1 is 5 s old (from its delivery), ledger 2 20 s old.
    assert ids(ledgers_to_delete(ledgers, None, 40_000, 6, None)) == []  # 1 first, in order
    assert ids(ledgers_to_delete(ledgers, None, 40_000, 5, None)) == [1, 2]
    assert ids(ledgers_to_delete(ledgers, None, 40_000, 0, 0)) == [1, 2]
    # Not due yet: kept whatever the limits say, and so is everything after it.
    assert ids(ledgers_to_delete(ledgers, None, 30_000, 0, 0)) == []
    assert ids(ledgers_to_delete(ledgers, None, 35_000, 0, 0)) == [1, 2]  # due now: age 0
    # A delivery time before the ledger's end changes nothing.
    ledgers.ledgers[0].max_deliver_at_ms = 5_000
    assert ids(ledgers_to_delete(ledgers, None, 40_000, 30, None)) == [1]
    assert ids(ledgers_to_delete(ledgers, None, 40_000, 31, None)) == []


async def test_the_latest_delivery_time_of_a_ledger_is_recorded_and_stored():
    client, store, ml, _ = await filled(0, 3)
    first = ml.current_ledger_id
    await ml.add_entry(b"a", 5_000)
    await ml.add_entry(b"b", 9_000)
    await ml.add_entry(b"c")  # not delayed; the ledger is full and rolls over
    await asyncio.sleep(0.01)
    await ml.add_entry(b"d")
    infos = {i.ledger_id: i for i in ml.ledgers}
    assert infos[first].max_deliver_at_ms == 9_000
    assert infos[ml.current_ledger_id].max_deliver_at_ms == 0
    await ml.close()
    reopened = await open_ml(client, store, max_entries_per_ledger=3)
    infos = {i.ledger_id: i for i in reopened.ledgers}
    assert infos[first].max_deliver_at_ms == 9_000
    assert sum(1 for i in infos.values() if i.max_deliver_at_ms) == 1
    await reopened.close()
