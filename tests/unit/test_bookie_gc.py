"""Orphan collection on the bookie core (no ZooKeeper: the metadata view in memory)."""

from collections import namedtuple

import pytest

from magnetar.bookie.bookie import Bookie
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.garbagecollector import LedgerPlacement, Verdict, classify
from magnetar.common.errors import NoSuchLedger

ME = "127.0.0.1:1"
E = namedtuple("E", "ledger_id entry_id last_add_confirmed payload")
Usage = namedtuple("Usage", "total used free")
WAIT_S = 100.0


class Metadata:
    """The ledger metadata, markers and locks in memory."""

    def __init__(self, bound=1000):
        self.bound = bound
        self.ledgers = {}
        self.markers = set()
        self.locked = set()
        self.locks_taken = []

    async def id_bound(self):
        return self.bound

    async def ledger_ids(self):
        return set(self.ledgers)

    async def placement(self, ledger_id):
        return self.ledgers.get(ledger_id)

    async def under_replicated(self, ledger_id):
        return ledger_id in self.markers

    async def try_lock(self, ledger_id):
        if ledger_id in self.locked:
            return False
        self.locked.add(ledger_id)
        self.locks_taken.append(ledger_id)
        return True

    async def unlock(self, ledger_id):
        self.locked.discard(ledger_id)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def closed(*bookies):
    return LedgerPlacement(closed=True, bookies=frozenset(bookies))


def open_(*bookies):
    return LedgerPlacement(closed=False, bookies=frozenset(bookies))


def make(tmp_path, metadata, clock):
    config = BookieConfig.load(
        data_dir=str(tmp_path), min_free_disk_bytes=0, flush_interval_s=3600, gc_interval_s=3600,
        disk_check_interval_s=3600, entry_log_max_bytes=4096, index_map_bytes=1 << 26,
        gc_metadata_interval_s=3600, gc_overreplicated_ledger_wait_s=WAIT_S,
    )
    b = Bookie(config, ME, disk_usage=lambda _p: Usage(1 << 40, 0, 1 << 40), ledger_metadata=metadata)
    b.orphans._clock = clock  # time is the collector's injectable clock
    return b


async def fill(b, lid, n=20, recovery=False):
    fut, failed = b.add_entries([E(lid, e, e - 1, b"%d:%d" % (lid, e) * 50) for e in range(n)], recovery=recovery)
    assert failed == []
    await fut


def test_classify():
    assert classify(5, 10, None, ME) is Verdict.DELETED
    assert classify(10, 10, None, ME) is Verdict.KEEP  # never issued in this metadata
    assert classify(5, 10, closed("b:1", "b:2"), ME) is Verdict.OVER_REPLICATED
    assert classify(5, 10, closed("b:1", ME), ME) is Verdict.KEEP
    assert classify(5, 10, open_("b:1", "b:2"), ME) is Verdict.KEEP  # may still change to include it


async def test_deleted_ledger_is_collected_at_the_second_scan_and_stays_deleted(tmp_path):
    md, clock = Metadata(), Clock()
    b = make(tmp_path, md, clock)
    await b.start()
    try:
        await fill(b, 7)
        await fill(b, 8)
        md.ledgers[8] = closed(ME, "b:2")
        await b.flush()
        first = await b.collect_orphans()
        assert (first.deleted, first.evicted) == ([], [])
        assert b.list_ledgers() == [7, 8]
        second = await b.collect_orphans()
        assert second.deleted == [7]
        assert b.list_ledgers() == [8]
        with pytest.raises(NoSuchLedger):
            await b.read_entries(7, 0, -1)
        _, failed = b.add_entries([E(7, 99, -1, b"x")])
        assert [(lid, eid, type(x)) for lid, eid, x in failed] == [(7, 99, NoSuchLedger)]  # tombstone
        assert await b.collect_garbage()  # its entry logs go
        assert len(await b.read_entries(8, 0, -1)) == 20
    finally:
        await b.close()


async def test_ledger_recreated_between_scans_is_kept(tmp_path):
    md, clock = Metadata(), Clock()
    b = make(tmp_path, md, clock)
    await b.start()
    try:
        await fill(b, 7)
        await b.collect_orphans()
        md.ledgers[7] = open_(ME)  # the listing was older than the ledger
        assert (await b.collect_orphans()).deleted == []
        assert b.list_ledgers() == [7]
    finally:
        await b.close()


async def test_ids_at_or_above_the_bound_are_never_touched(tmp_path):
    md, clock = Metadata(bound=0), Clock()  # e.g. a wrong ZooKeeper root: nothing issued there
    b = make(tmp_path, md, clock)
    await b.start()
    try:
        await fill(b, 3)
        await fill(b, 1 << 62)
        for _ in range(3):
            clock.now += 2 * WAIT_S
            assert (await b.collect_orphans()).deleted == []
        assert b.list_ledgers() == [3, 1 << 62]
    finally:
        await b.close()


async def test_over_replicated_closed_ledger_is_dropped_after_the_wait_and_may_come_back(tmp_path):
    md, clock = Metadata(), Clock()
    b = make(tmp_path, md, clock)
    await b.start()
    await fill(b, 5)
    md.ledgers[5] = closed("b:2", "b:3")  # a copy whose metadata swap lost
    await b.collect_orphans()
    clock.now += WAIT_S / 2
    assert (await b.collect_orphans()).evicted == []
    assert b.list_ledgers() == [5]
    clock.now += WAIT_S / 2
    assert (await b.collect_orphans()).evicted == [5]
    assert md.locks_taken == [5] and md.locked == set()
    assert b.list_ledgers() == []
    await fill(b, 6)  # rolls the entry log that holds ledger 5's entries
    await b.flush()
    assert await b.collect_garbage()
    # No tombstone: the auditor may copy it here again.
    await fill(b, 5, n=3, recovery=True)
    assert [e.entry_id for e in await b.read_entries(5, 0, -1)] == [0, 1, 2]
    await b.close()

    # A restart replays the journal from the LastLogMark: the dropped entries stay dropped.
    again = make(tmp_path, md, clock)
    await again.start()
    try:
        assert [e.entry_id for e in await again.read_entries(5, 0, -1)] == [0, 1, 2]
        assert again.list_ledgers() == [5, 6]
    finally:
        await again.close()


@pytest.mark.parametrize(
    "change",
    ["open", "named", "marker", "locked", "reopened_before_removal"],
)
async def test_over_replicated_ledger_is_kept_when_in_doubt(tmp_path, change):
    md, clock = Metadata(), Clock()
    b = make(tmp_path, md, clock)
    await b.start()
    try:
        await fill(b, 5)
        md.ledgers[5] = closed("b:2", "b:3")
        if change == "open":
            md.ledgers[5] = open_("b:2", "b:3")  # a writer's ensemble change may name it again
        elif change == "named":
            md.ledgers[5] = LedgerPlacement(True, frozenset({"b:2", ME}))  # in an earlier fragment
        elif change == "marker":
            md.markers.add(5)  # to be replicated: this bookie may be the target
        elif change == "locked":
            md.locked.add(5)  # a worker is copying it, maybe here
        await b.collect_orphans()
        clock.now += 2 * WAIT_S
        if change == "reopened_before_removal":
            real = md.placement

            async def placement(ledger_id):  # the scan saw it closed; the verify read does not
                md.placement = lambda lid: _named(lid)
                return await real(ledger_id)

            async def _named(_lid):
                return closed("b:2", ME)

            md.placement = placement
        assert (await b.collect_orphans()).evicted == []
        assert b.list_ledgers() == [5]
        assert len(await b.read_entries(5, 0, -1)) == 20
    finally:
        await b.close()


async def test_ledger_written_while_being_dropped_is_kept(tmp_path):
    md, clock = Metadata(), Clock()
    b = make(tmp_path, md, clock)
    await b.start()
    try:
        await fill(b, 5)
        real_flush = b.flush

        async def flush_then_write():
            await real_flush()
            await fill(b, 5, n=25, recovery=True)  # a late add arrives during the checkpoint

        b.flush = flush_then_write
        assert await b.evict_ledger(5) is False
        b.flush = real_flush
        assert len(await b.read_entries(5, 0, -1)) == 25
    finally:
        await b.close()
