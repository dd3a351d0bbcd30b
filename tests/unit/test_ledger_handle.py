"""LedgerHandle logic against in-memory twins of bookies and the metadata store."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence

import pytest

from magnetar.common.errors import (
    InvalidArgument,
    LedgerFenced,
    MetadataVersionConflict,
    NoSuchEntry,
    NoSuchLedger,
    NotConnected,
    NotEnoughBookies,
)
from magnetar.ledger.bookie_client import AddFailure, Entry
from magnetar.ledger.context import ClientContext, LedgerClientConfig
from magnetar.ledger.framing import unframe
from magnetar.ledger.handle import LedgerHandle
from magnetar.ledger.metadata import Fragment, LedgerMetadata, LedgerState
from magnetar.proto.v1 import bookie_pb2 as pb


class FakeBookie:
    """Keeps entries in memory; can be down, slow to answer adds, or fenced."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.entries: dict[int, bytes] = {}
        self.lac = -1
        self.down = False
        self.fenced = False
        self.delay = 0.0
        self.unreachable = False  # its address drops packets: the add stream never opens

    def _check_up(self) -> None:
        if self.down:
            raise NotConnected(f"bookie {self.name} is down")

    async def send_add_request(self, request: pb.AddRequest) -> asyncio.Future[list[AddFailure]]:
        entries = [Entry(e.ledger_id, e.entry_id, e.last_add_confirmed, e.payload) for e in request.entries]
        if self.unreachable:
            await asyncio.Event().wait()  # as gRPC connecting to a vanished address
        return await self.send_add(entries, request.recovery)

    async def send_add(self, entries: Sequence[Entry], recovery: bool = False) -> asyncio.Future[list[AddFailure]]:
        self._check_up()
        fut: asyncio.Future[list[AddFailure]] = asyncio.get_running_loop().create_future()

        async def answer() -> None:
            await asyncio.sleep(self.delay)
            if self.down:
                fut.set_exception(NotConnected(f"bookie {self.name} is down"))
                return
            failed: list[AddFailure] = []
            for e in entries:
                if self.fenced and not recovery:
                    failed.append((e.ledger_id, e.entry_id, LedgerFenced(e.ledger_id)))
                else:
                    self.entries[e.entry_id] = e.payload
                    self.lac = max(self.lac, e.last_add_confirmed)
            fut.set_result(failed)

        asyncio.get_running_loop().create_task(answer())
        return fut

    async def read_entry(self, ledger_id: int, entry_id: int, fence: bool = False) -> Entry:
        self._check_up()
        self.fenced = self.fenced or fence
        if entry_id not in self.entries:
            raise NoSuchEntry(ledger_id, entry_id, self.name)
        return Entry(ledger_id, entry_id, self.lac, self.entries[entry_id])

    async def read_entry_list(self, ledger_id: int, entry_ids: Sequence[int]) -> list[Entry]:
        self._check_up()
        return [Entry(ledger_id, e, self.lac, self.entries[e]) for e in entry_ids if e in self.entries]

    async def read_lac(self, ledger_id: int) -> int:
        self._check_up()
        return self.lac

    async def fence(self, ledger_id: int) -> int:
        self._check_up()
        self.fenced = True
        return self.lac


class FakePool:
    def __init__(self, names: Sequence[str]) -> None:
        self.bookies = {n: FakeBookie(n) for n in names}

    def get(self, address: str) -> FakeBookie:
        return self.bookies[address]


class FakeStore:
    def __init__(self) -> None:
        self.docs: dict[int, tuple[LedgerMetadata, int]] = {}

    async def write(self, ledger_id: int, metadata: LedgerMetadata, version: int) -> int:
        current, v = self.docs[ledger_id]
        if v != version:
            raise MetadataVersionConflict("bad version")
        self.docs[ledger_id] = (metadata, v + 1)
        return v + 1

    async def read(self, ledger_id: int) -> tuple[LedgerMetadata, int]:
        if ledger_id not in self.docs:
            raise NoSuchLedger(ledger_id)
        return self.docs[ledger_id]

    async def update(
        self, ledger_id: int, fn: Callable[[LedgerMetadata], LedgerMetadata]
    ) -> tuple[LedgerMetadata, int]:
        current, version = await self.read(ledger_id)
        updated = fn(current)
        return updated, await self.write(ledger_id, updated, version)


class FakeRegistry:
    def __init__(self, pool: FakePool) -> None:
        self.pool = pool

    async def list_writable(self) -> list[str]:
        return [n for n, b in self.pool.bookies.items() if not b.down]


def make(
    bookies: Sequence[str] = ("b0", "b1", "b2", "b3"),
    ensemble: Sequence[str] = ("b0", "b1", "b2"),
    qw: int = 2,
    qa: int = 2,
) -> tuple[LedgerHandle, FakePool, FakeStore]:
    random.seed(7)
    pool = FakePool(bookies)
    store = FakeStore()
    ctx = ClientContext(LedgerClientConfig(add_timeout_s=2), pool, FakeRegistry(pool), store)
    md = LedgerMetadata(len(ensemble), qw, qa, fragments=(Fragment(0, tuple(ensemble)),))
    store.docs[1] = (md, 0)
    return LedgerHandle(ctx, 1, md, 0), pool, store


async def test_striped_writes_confirm_in_order_even_when_acks_come_out_of_order():
    handle, pool, store = make()
    pool.bookies["b0"].delay = 0.05  # entries on b0 are acked last
    order: list[int] = []
    futs = [handle.add_entry(b"p%d" % e) for e in range(30)]
    for f in futs:
        f.add_done_callback(lambda f: order.append(f.result()))
    await asyncio.gather(*futs)
    assert order == list(range(30))
    for e in range(30):
        holders = {n for n, b in pool.bookies.items() if e in b.entries}
        assert holders == {("b0", "b1", "b2")[(e + k) % 3] for k in range(2)}
        assert unframe(pool.bookies[min(holders)].entries[e])[1] == b"p%d" % e
    closed = await handle.close()
    assert (closed.state, closed.last_entry_id, closed.length) == (LedgerState.CLOSED, 29, sum(len(b"p%d" % e) for e in range(30)))
    assert store.docs[1][0] == closed


async def test_a_failed_bookie_is_replaced_from_the_first_unconfirmed_entry():
    handle, pool, store = make()
    await asyncio.gather(*(handle.add_entry(b"x") for e in range(10)))
    pool.bookies["b1"].down = True
    ids = await asyncio.gather(*(handle.add_entry(b"y") for e in range(10)))
    assert list(ids) == list(range(10, 20))
    md = store.docs[1][0]
    assert [f.first_entry for f in md.fragments] == [0, 10]
    assert md.fragments[1].bookies == ("b0", "b3", "b2")
    for e in range(10, 20):  # every new entry is on both bookies of its new write set
        assert all(e in pool.bookies[b].entries for b in md.write_set(e))


async def test_a_bookie_whose_address_vanished_is_replaced_within_the_add_timeout():
    handle, pool, store = make()  # add_timeout_s=2
    await asyncio.gather(*(handle.add_entry(b"x") for e in range(3)))
    pool.bookies["b1"].unreachable = True
    loop = asyncio.get_running_loop()
    started = loop.time()
    ids = await asyncio.wait_for(asyncio.gather(*(handle.add_entry(b"y") for e in range(6))), 10)
    took = loop.time() - started
    assert list(ids) == list(range(3, 9))
    assert handle.ctx.config.add_timeout_s <= took < handle.ctx.config.add_timeout_s + 1.5
    md = store.docs[1][0]
    assert md.fragments[-1].bookies == ("b0", "b3", "b2")


async def test_a_bookie_replaced_once_counts_again_when_chosen_later():
    handle, pool, store = make(bookies=("b0", "b1", "b2", "b3"))
    pool.bookies["b1"].down = True
    await asyncio.gather(*(handle.add_entry(b"a") for _ in range(5)))
    pool.bookies["b1"].down = False
    pool.bookies["b3"].down = True  # b1 is the only spare now
    await asyncio.wait_for(asyncio.gather(*(handle.add_entry(b"b") for _ in range(5))), 5)
    md = store.docs[1][0]
    assert "b1" in md.current_ensemble and "b3" not in md.current_ensemble
    assert await asyncio.wait_for(handle.append(b"c"), 5) == 10


async def test_fenced_bookies_stop_the_writer():
    handle, pool, store = make()
    await handle.append(b"ok")
    for b in pool.bookies.values():
        b.fenced = True
    futs = [handle.add_entry(b"late") for _ in range(3)]
    for f in futs:
        with pytest.raises(LedgerFenced):
            await f
    with pytest.raises(LedgerFenced):
        await handle.add_entry(b"later")


async def test_close_after_recovery_began_is_fenced():
    handle, pool, store = make()
    await handle.append(b"ok")
    md, v = store.docs[1]
    store.docs[1] = (md.with_state(LedgerState.IN_RECOVERY), v + 1)
    with pytest.raises(LedgerFenced):
        await handle.close()


async def test_no_spare_bookie_fails_the_adds_with_a_clear_error():
    handle, pool, store = make(bookies=("b0", "b1", "b2"))
    pool.bookies["b2"].down = True
    with pytest.raises(Exception, match="not enough writable bookies"):
        await asyncio.gather(*(handle.add_entry(b"x") for _ in range(5)))


async def test_a_writer_that_found_no_spare_bookie_closes_at_its_last_confirmed_entry():
    """As BookKeeper's: the failed adds stay failed, and the ledger can still be closed,
    so its owner can go on in a new ledger without anything past the LAC being read."""
    handle, pool, store = make(bookies=("b0", "b1", "b2"))
    confirmed = [await handle.append(b"ok%d" % i) for i in range(4)]
    pool.bookies["b2"].down = True
    results = await asyncio.gather(*(handle.add_entry(b"x") for _ in range(5)), return_exceptions=True)
    assert [type(r).__name__ for r in results] == ["NotEnoughBookies"] * 5
    with pytest.raises(NotEnoughBookies):
        await handle.add_entry(b"later")
    closed = await handle.close()
    assert (closed.state, closed.last_entry_id, closed.length) == (LedgerState.CLOSED, confirmed[-1], 4 * len(b"ok0"))
    assert store.docs[1][0] == closed


async def test_the_writer_reads_confirmed_entries_back_from_any_replica():
    handle, pool, _ = make()
    await asyncio.gather(*(handle.add_entry(b"e%d" % e) for e in range(6)))
    pool.bookies["b1"].down = True  # its share is read from the other replica
    entries = await handle.read(0, 5)
    assert [(x.entry_id, x.payload) for x in entries] == [(e, b"e%d" % e) for e in range(6)]
    with pytest.raises(InvalidArgument):
        await handle.read(0, 6)  # past the LAC


async def test_a_reader_follows_the_auditors_replacements_when_every_replica_it_knows_fails():
    # The chaos run: a broker's reader, opened before two permanent bookie losses, asked
    # the two dead bookies for ever; the auditor had put the entries on others meanwhile.
    from magnetar.ledger.framing import frame
    from magnetar.ledger.reader import LedgerReader

    pool = FakePool(("b0", "b1", "b2", "b3"))
    store = FakeStore()
    ctx = ClientContext(LedgerClientConfig(read_timeout_s=1), pool, FakeRegistry(pool), store)
    opened = LedgerMetadata(2, 2, 2, fragments=(Fragment(0, ("b0", "b1")),)).closed(9, 100)
    for e in range(10):
        for b in ("b0", "b1", "b2", "b3"):
            pool.bookies[b].entries[e] = frame(10 * (e + 1), b"e%d" % e)
    store.docs[1] = (opened, 0)
    reader = LedgerReader(ctx, 1, opened, opened.last_entry_id)
    pool.bookies["b0"].down = pool.bookies["b1"].down = True
    with pytest.raises(NotConnected):  # the metadata did not change: the error stands
        await reader.read(0, 9)
    replaced = opened.with_replaced_bookie(0, ("b0", "b1"), "b0", "b2")
    replaced = replaced.with_replaced_bookie(0, ("b2", "b1"), "b1", "b3")
    store.docs[1] = (replaced, 1)
    got = await reader.read(0, 9)
    assert [(x.entry_id, x.payload) for x in got] == [(e, b"e%d" % e) for e in range(10)]
    assert reader.metadata == replaced
