"""copy_fragment against in-memory bookies: what is read from where, and what lands."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from magnetar.auditor.copier import EntryLost, copy_fragment
from magnetar.auditor.fragments import FragmentRepair, entries_on
from magnetar.auditor.throttle import Throttle
from magnetar.common.errors import NotConnected, NotFound
from magnetar.ledger.bookie_client import Entry
from magnetar.ledger.metadata import write_set

L = 9
ENSEMBLE = ("a", "b", "c")


class FakeBookie:
    def __init__(self, name: str) -> None:
        self.name = name
        self.entries: dict[int, Entry] = {}
        self.down = False
        self.reads: list[int] = []
        self.recovery_adds = 0

    async def read_entry_list(self, ledger_id: int, entry_ids: Sequence[int]) -> list[Entry]:
        if self.down:
            raise NotConnected(f"{self.name} is down")
        self.reads += list(entry_ids)
        return [self.entries[e] for e in entry_ids if e in self.entries]

    async def read_entry(self, ledger_id: int, entry_id: int) -> Entry:
        if self.down:
            raise NotConnected(f"{self.name} is down")
        self.reads.append(entry_id)
        if entry_id not in self.entries:
            raise NotFound(f"no entry {entry_id}")
        return self.entries[entry_id]

    async def send_add(
        self, entries: Sequence[Entry], recovery: bool = False
    ) -> asyncio.Future[list]:
        assert recovery  # copies pass a fence the ledger may have
        self.recovery_adds += 1
        for e in entries:
            self.entries[e.entry_id] = e
        fut: asyncio.Future[list] = asyncio.get_running_loop().create_future()
        fut.set_result([])
        return fut


class FakePool:
    def __init__(self, names: Sequence[str]) -> None:
        self.bookies = {n: FakeBookie(n) for n in names}

    def get(self, address: str) -> FakeBookie:
        return self.bookies[address]


def striped_pool(last: int, qw: int = 2) -> FakePool:
    pool = FakePool([*ENSEMBLE, "d"])
    for e in range(last + 1):
        for b in write_set(ENSEMBLE, qw, e):
            pool.bookies[b].entries[e] = Entry(L, e, e - 1, b"payload-%d" % e)
    return pool


async def copy(pool: FakePool, missing: str, last: int = 99, **kw) -> int:
    repair = FragmentRepair(0, 0, last, ENSEMBLE, missing)
    copied: list[int] = []
    n = await copy_fragment(
        pool,
        L,
        repair,
        2,
        "d",
        {missing},
        kw.get("throttle", Throttle(0)),
        kw.get("batch", 7),
        copied.append,
    )  # type: ignore[arg-type]
    assert sum(copied) == n
    return n


async def test_copies_exactly_the_lost_bookies_entries_from_both_neighbours():
    pool = striped_pool(99)
    lost = dict(pool.bookies["b"].entries)
    pool.bookies["b"].down = True
    assert await copy(pool, "b") == len(lost) == len(entries_on(ENSEMBLE, 2, "b", 0, 99))
    assert pool.bookies["d"].entries == lost  # same ids, payloads and LACs
    assert pool.bookies["a"].reads and pool.bookies["c"].reads  # half from each neighbour
    assert not pool.bookies["b"].reads  # never from the lost bookie


async def test_an_entry_a_source_lacks_comes_from_the_other_replica():
    # with Qw=2 each entry has one survivor: Qw=3 gives a choice of two
    pool = FakePool([*ENSEMBLE, "d"])
    for e in range(31):
        for b in ENSEMBLE:
            pool.bookies[b].entries[e] = Entry(L, e, e - 1, b"p%d" % e)
    del pool.bookies["a"].entries[4]
    repair = FragmentRepair(0, 0, 30, ENSEMBLE, "b")
    await copy_fragment(pool, L, repair, 3, "d", {"b"}, Throttle(0), 5, lambda n: None)  # type: ignore[arg-type]
    assert sorted(pool.bookies["d"].entries) == list(range(31))
    assert 4 in pool.bookies["c"].reads


async def test_an_entry_on_no_live_replica_is_reported():
    pool = striped_pool(20)
    del pool.bookies["c"].entries[2]  # entry 2 is on c and a; a is the lost one
    with pytest.raises(EntryLost, match="entry 2"):
        await copy(pool, "a", last=20)


async def test_the_throttle_paces_the_copy():
    pool = striped_pool(299)
    loop = asyncio.get_running_loop()
    start = loop.time()
    n = await copy(pool, "b", last=299, throttle=Throttle(1000), batch=50)
    assert n == 200 and loop.time() - start >= 0.15  # 200 entries at 1,000/s, the first batch free


async def test_a_marked_bookie_that_is_back_is_a_source_again():
    # The chaos run: bookie c was marked lost (away past the grace period) but came back
    # with its data; then b was lost for good. Entries on (b, c) were "on no replica
    # left" for the replicator, which skipped every marked bookie, until c was lost for
    # good too and they were gone.
    from test_ledger_handle import FakeStore

    from magnetar.auditor.config import AuditorConfig
    from magnetar.auditor.replicator import LedgerReplicator, Outcome, Progress
    from magnetar.ledger.metadata import Fragment, LedgerMetadata
    from magnetar.metadata.underreplication import UnderReplicated

    pool = striped_pool(29)
    pool.bookies["b"].down = True
    store = FakeStore()
    store.docs[L] = (LedgerMetadata(3, 2, 2, fragments=(Fragment(0, ENSEMBLE),)).closed(29, 300), 0)

    class Registry:
        async def list_writable(self) -> list[str]:
            return ["a", "c", "d"]

        async def list_read_only(self) -> list[str]:
            return []

    class Markers:
        cleared = False

        async def get(self, ledger_id: int) -> UnderReplicated:
            return UnderReplicated(L, ("b", "c"), 0, 0)

        async def clear(self, marker: UnderReplicated) -> bool:
            self.cleared = True
            return True

    class Client:
        def __init__(self) -> None:
            self.pool, self.store, self.registry = pool, store, Registry()

    markers = Markers()
    replicator = LedgerReplicator(Client(), markers, AuditorConfig(), Throttle(0))  # type: ignore[arg-type]
    assert await replicator.replicate(L, Progress(L)) == Outcome.DONE
    metadata, _ = await store.read(L)
    assert metadata.fragments == (Fragment(0, ("a", "d", "c")),) and markers.cleared
    assert sorted(pool.bookies["d"].entries) == entries_on(ENSEMBLE, 2, "b", 0, 29)
    assert not pool.bookies["b"].reads
