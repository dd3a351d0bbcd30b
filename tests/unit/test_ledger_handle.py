"""LedgerHandle logic against in-memory twins of bookies and the metadata store."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import pytest

from magnetar.common.errors import LedgerFenced, MetadataVersionConflict, NoSuchLedger, NotConnected
from magnetar.ledger.client import LedgerClientConfig
from magnetar.ledger.framing import unframe
from magnetar.ledger.handle import LedgerHandle
from magnetar.ledger.metadata import Fragment, LedgerMetadata, LedgerState


class FakeBookie:
    def __init__(self, name: str) -> None:
        self.name = name
        self.entries: dict[int, bytes] = {}
        self.down = False
        self.fenced = False
        self.delay = 0.0

    async def send_add_request(self, request):
        if self.down:
            raise NotConnected(f"bookie {self.name} is down")
        fut = asyncio.get_running_loop().create_future()

        async def answer() -> None:
            await asyncio.sleep(self.delay)
            if self.down:
                fut.set_exception(NotConnected(f"bookie {self.name} is down"))
                return
            failed = []
            for e in request.entries:
                if self.fenced:
                    failed.append((e.ledger_id, e.entry_id, LedgerFenced(e.ledger_id)))
                else:
                    self.entries[e.entry_id] = e.payload
            fut.set_result(failed)

        asyncio.get_running_loop().create_task(answer())
        return fut


class FakePool:
    def __init__(self, names):
        self.bookies = {n: FakeBookie(n) for n in names}

    def get(self, name):
        return self.bookies[name]


class FakeStore:
    def __init__(self):
        self.docs: dict[int, tuple[LedgerMetadata, int]] = {}

    async def write(self, ledger_id, metadata, version):
        current, v = self.docs[ledger_id]
        if v != version:
            raise MetadataVersionConflict("bad version")
        self.docs[ledger_id] = (metadata, v + 1)
        return v + 1

    async def read(self, ledger_id):
        if ledger_id not in self.docs:
            raise NoSuchLedger(ledger_id)
        return self.docs[ledger_id]


class FakeRegistry:
    def __init__(self, pool):
        self.pool = pool

    async def list_writable(self):
        return [n for n, b in self.pool.bookies.items() if not b.down]


@dataclass
class FakeClient:
    pool: FakePool
    store: FakeStore
    registry: FakeRegistry
    config: LedgerClientConfig


def make(bookies=("b0", "b1", "b2", "b3"), ensemble=("b0", "b1", "b2"), qw=2, qa=2):
    random.seed(7)
    pool = FakePool(bookies)
    store = FakeStore()
    client = FakeClient(pool, store, FakeRegistry(pool), LedgerClientConfig(add_timeout_s=2))
    md = LedgerMetadata(len(ensemble), qw, qa, fragments=(Fragment(0, tuple(ensemble)),))
    store.docs[1] = (md, 0)
    return LedgerHandle(client, 1, md, 0), pool, store  # type: ignore[arg-type]


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
