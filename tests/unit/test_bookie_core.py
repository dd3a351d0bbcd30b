"""The bookie core in process (no gRPC, no ZooKeeper): storage, fencing, LAC, GC, read-only."""

from collections import namedtuple

import pytest

from magnetar.bookie.bookie import Bookie
from magnetar.bookie.config import BookieConfig
from magnetar.common.errors import (
    BookieReadOnly,
    EntryTooLarge,
    InvalidArgument,
    LedgerFenced,
    NoSuchEntry,
    NoSuchLedger,
)

E = namedtuple("E", "ledger_id entry_id last_add_confirmed payload")
Usage = namedtuple("Usage", "total used free")


class FakeDisk:
    def __init__(self, free):
        self.free = free

    def __call__(self, path):
        return Usage(100 << 30, (100 << 30) - self.free, self.free)


def make(tmp_path, disk=None, **cfg):
    settings = dict(
        data_dir=str(tmp_path), min_free_disk_bytes=1 << 20, flush_interval_s=3600, gc_interval_s=3600,
        disk_check_interval_s=3600, entry_log_max_bytes=4096, index_map_bytes=1 << 26,
    )
    config = BookieConfig.load(**(settings | cfg))
    return Bookie(config, "127.0.0.1:1", disk_usage=disk or FakeDisk(10 << 30))


async def add(b, entries):
    fut, failed = b.add_entries(entries)
    if fut is not None:
        await fut
    return failed


def payload(lid, eid):
    return f"{lid}:{eid}:".encode() * 10


async def fill(b, lid, n, start=0):
    failed = await add(b, [E(lid, e, e - 1, payload(lid, e)) for e in range(start, start + n)])
    assert failed == []


async def stored(b, lid):
    return [(e.entry_id, e.payload) for e in await b.read_entries(lid, 0, -1)]


async def test_entries_readable_from_cache_then_from_entry_log_then_after_restart(tmp_path):
    b = make(tmp_path)
    await b.start()
    await fill(b, 1, 50)
    await fill(b, 2, 20)
    want1 = [(e, payload(1, e)) for e in range(50)]
    assert await stored(b, 1) == want1
    await b.flush()
    assert b.storage.cache.active == {}
    assert await stored(b, 1) == want1
    assert len(b.storage.entry_logs.log_ids()) > 1  # 4 KiB logs rolled
    await b.close()
    b = make(tmp_path)
    await b.start()
    assert await stored(b, 1) == want1
    assert await stored(b, 2) == [(e, payload(2, e)) for e in range(20)]
    assert b.list_ledgers() == [1, 2]
    await b.close()


async def test_unflushed_adds_come_back_from_the_journal(tmp_path):
    b = make(tmp_path)
    await b.start()
    await fill(b, 3, 30)
    await b.flush()
    await fill(b, 3, 30, start=30)
    # Simulate a crash: no flush, no close — only the journal has entries 30..59.
    await b.journal.close()
    b.storage.close()
    b2 = make(tmp_path)
    await b2.start()
    assert await stored(b2, 3) == [(e, payload(3, e)) for e in range(60)]
    assert b2.read_lac(3) == 58
    await b2.close()


async def test_lac_is_the_highest_seen(tmp_path):
    b = make(tmp_path)
    await b.start()
    await add(b, [E(4, 0, -1, b"a"), E(4, 1, 7, b"b"), E(4, 2, 3, b"c")])
    assert b.read_lac(4) == 7
    entry = await b.read_entry(4, 2)
    assert (entry.lac, entry.payload) == (3, b"c")
    await b.close()


async def test_fence_rejects_later_adds_and_survives_restart(tmp_path):
    b = make(tmp_path)
    await b.start()
    await fill(b, 5, 3)
    assert await b.fence(5) == 1
    failed = await add(b, [E(5, 3, 2, b"late"), E(6, 0, -1, b"other ledger")])
    assert [(lid, e, type(x)) for lid, e, x in failed] == [(5, 3, LedgerFenced)]
    assert await stored(b, 6) == [(0, b"other ledger")]
    await b.journal.close()  # crash without a flush: the fence was made durable at once
    b.storage.close()
    b = make(tmp_path)
    await b.start()
    failed = await add(b, [E(5, 3, 2, b"late")])
    assert isinstance(failed[0][2], LedgerFenced)
    assert [e for e, _ in await stored(b, 5)] == [0, 1, 2]
    await b.close()


async def test_fencing_read_and_unknown_ledger(tmp_path):
    b = make(tmp_path)
    await b.start()
    with pytest.raises(NoSuchEntry):
        await b.read_entry(8, 0, fence=True)  # fences even a ledger it never saw
    assert isinstance((await add(b, [E(8, 0, -1, b"x")]))[0][2], LedgerFenced)
    with pytest.raises(NoSuchLedger):
        b.read_lac(999)
    with pytest.raises(NoSuchLedger):
        await b.read_entry(999, 0)
    await b.close()


async def test_delete_and_garbage_collection(tmp_path):
    b = make(tmp_path)
    await b.start()
    await fill(b, 10, 200)  # ~18 KiB: several 4 KiB logs hold only ledger 10
    await b.flush()
    await fill(b, 11, 5)
    await b.flush()
    logs_before = b.storage.entry_logs.log_ids()
    assert await b.collect_garbage() == []  # nothing deleted yet
    await b.delete_ledger(10)
    with pytest.raises(NoSuchLedger):
        await b.read_entries(10, 0, -1)
    removed = await b.collect_garbage()
    assert removed, "logs holding only the deleted ledger are removed"
    logs_after = b.storage.entry_logs.log_ids()
    assert set(logs_after) == set(logs_before) - set(removed)
    assert await stored(b, 11) == [(e, payload(11, e)) for e in range(5)]
    failed = await add(b, [E(10, 201, 200, b"x")])
    assert isinstance(failed[0][2], NoSuchLedger)
    await b.close()
    b = make(tmp_path)
    await b.start()
    assert b.list_ledgers() == [11]
    await b.close()


async def test_deleted_ledger_is_not_resurrected_by_journal_replay(tmp_path):
    b = make(tmp_path)
    await b.start()
    await fill(b, 12, 10)  # only in the journal
    await b.delete_ledger(12)
    await b.journal.close()
    b.storage.close()
    b = make(tmp_path)
    await b.start()
    assert b.list_ledgers() == []
    await b.close()


async def test_read_only_when_disk_is_low_and_writable_again(tmp_path):
    disk = FakeDisk(10 << 30)
    changes = []
    b = make(tmp_path, disk)
    await b.start()
    b.on_read_only_change = changes.append
    await fill(b, 20, 2)
    disk.free = 1000
    b._check_disk()
    assert b.read_only and b.info()["read_only"]
    with pytest.raises(BookieReadOnly, match="read-only"):
        b.add_entries([E(20, 2, 1, b"x")])
    assert [e for e, _ in await stored(b, 20)] == [0, 1]  # reads still work
    disk.free = 10 << 30
    b._check_disk()
    assert not b.read_only
    await fill(b, 20, 1, start=2)
    assert changes == [True, False]
    await b.close()


async def test_bad_input_is_rejected_and_changes_nothing(tmp_path):
    b = make(tmp_path, max_entry_bytes=100)
    await b.start()
    failed = await add(b, [E(-1, 0, -1, b"x"), E(1, -5, -1, b"x"), E(1, 0, -1, b"y" * 101)])
    assert [type(x) for _, _, x in failed] == [InvalidArgument, InvalidArgument, EntryTooLarge]
    assert b.list_ledgers() == []
    assert b.journal.records == 0
    with pytest.raises(InvalidArgument):
        await b.read_entry(-3, 0)
    with pytest.raises(InvalidArgument):
        await b.fence(-1)
    await b.close()


async def test_range_reads_cross_windows_and_stop_at_max_bytes(tmp_path):
    b = make(tmp_path, entry_log_max_bytes=1 << 20)
    await b.start()
    await fill(b, 30, 1500)
    await b.flush()
    await fill(b, 30, 300, start=1500)  # the tail is still in the cache
    got = await b.read_entries(30, 0, -1)
    assert [e.entry_id for e in got] == list(range(1800))
    assert all(e.payload == payload(30, e.entry_id) for e in got)
    some = await b.read_entries(30, 700, -1, max_bytes=len(payload(30, 700)) * 3)
    assert [e.entry_id for e in some] == [700, 701, 702]
    assert [e.entry_id for e in await b.read_entries(30, 1495, 1505)] == list(range(1495, 1506))
    await b.close()


async def test_a_read_jumps_the_gaps_of_a_sparse_ledger(tmp_path):
    # Entry ids far apart (a writer may choose them: the RPC fuzzer added 0 and 2**62): a
    # read walked the gap window by window, and later gave up after 2,048 empty windows.
    b = make(tmp_path, entry_log_max_bytes=1 << 20)
    await b.start()
    flushed = [0, 1, 5_000_000, 2**40]
    cached = [2**40 + 1, 2**62, 2**63 - 1]
    assert await add(b, [E(31, e, -1, payload(31, e)) for e in flushed]) == []
    await b.flush()
    assert await add(b, [E(31, e, -1, payload(31, e)) for e in cached]) == []
    assert await add(b, [E(32, 7, -1, payload(32, 7))]) == []  # another ledger's entries are not its
    every = flushed + cached
    for last in (-1, 2**63 - 1):
        got = await b.read_entries(31, 0, last)
        assert [(e.entry_id, e.payload) for e in got] == [(e, payload(31, e)) for e in every]
    assert [e.entry_id for e in await b.read_entries(31, 2, 2**40)] == [5_000_000, 2**40]
    assert [e.entry_id for e in await b.read_entries(31, 2**40 + 2, 2**62 - 1)] == []
    assert [e.entry_id for e in await b.read_entries(32, 0, -1)] == [7]
    await b.close()


async def test_the_inlined_add_path_writes_exactly_the_record_format(tmp_path):
    from magnetar.bookie.record import encode_add

    b = make(tmp_path)
    await b.start()
    await add(b, [E(40, 3, 2, b"payload"), E(40, 4, 3, b"")])
    assert b.storage.cache.active[(40, 3)] == encode_add(40, 3, 2, b"payload")
    assert b.storage.cache.active[(40, 4)] == encode_add(40, 4, 3, b"")
    await b.close()


async def test_an_add_request_of_many_ledgers_is_one_journal_write_and_one_fsync(tmp_path):
    """What the ledger client's cross-ledger batching relies on (BookKeeper's journal
    groups adds the same way): one request, whatever its ledgers, one group commit."""
    b = make(tmp_path)
    await b.start()
    try:
        before = (b.journal.records, b.journal.fsyncs)
        assert await add(b, [E(lid, 0, -1, payload(lid, 0)) for lid in range(1, 201)]) == []
        assert (b.journal.records - before[0], b.journal.fsyncs - before[1]) == (200, 1)
        assert [await stored(b, lid) for lid in (1, 200)] == [[(0, payload(1, 0))], [(0, payload(200, 0))]]
    finally:
        await b.close()
