"""Adds to one bookie gathered across ledgers (ledger/addbatcher.py), against in-memory bookies."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence

import pytest

from magnetar.common.errors import LedgerFenced, MetadataVersionConflict, NotConnected
from magnetar.ledger.bookie_client import AddFailure
from magnetar.ledger.context import ClientContext, LedgerClientConfig
from magnetar.ledger.framing import unframe
from magnetar.ledger.handle import LedgerHandle
from magnetar.ledger.metadata import Fragment, LedgerMetadata
from magnetar.proto.v1 import bookie_pb2 as pb


class RecordingBookie:
    """Stores entries by (ledger, entry); records every request's (ledger, entry) ids."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.entries: dict[tuple[int, int], bytes] = {}
        self.requests: list[list[tuple[int, int]]] = []
        self.fenced: set[int] = set()
        self.down = False
        self.delay = 0.0

    async def send_add_request(self, request: pb.AddRequest) -> asyncio.Future[list[AddFailure]]:
        if self.down:
            raise NotConnected(f"bookie {self.name} is down")
        ids = [(e.ledger_id, e.entry_id) for e in request.entries]
        self.requests.append(ids)
        fut: asyncio.Future[list[AddFailure]] = asyncio.get_running_loop().create_future()
        entries = list(request.entries)

        async def answer() -> None:
            await asyncio.sleep(self.delay)
            failed: list[AddFailure] = []
            for e in entries:
                if e.ledger_id in self.fenced and not request.recovery:
                    failed.append((e.ledger_id, e.entry_id, LedgerFenced(e.ledger_id)))
                else:
                    self.entries[(e.ledger_id, e.entry_id)] = e.payload
            fut.set_result(failed)

        asyncio.get_running_loop().create_task(answer())
        return fut


class Pool:
    def __init__(self, names: Sequence[str]) -> None:
        self.bookies = {n: RecordingBookie(n) for n in names}

    def get(self, address: str) -> RecordingBookie:
        return self.bookies[address]


class Store:
    def __init__(self) -> None:
        self.docs: dict[int, tuple[LedgerMetadata, int]] = {}

    async def write(self, ledger_id: int, metadata: LedgerMetadata, version: int) -> int:
        if self.docs[ledger_id][1] != version:
            raise MetadataVersionConflict("bad version")
        self.docs[ledger_id] = (metadata, version + 1)
        return version + 1

    async def read(self, ledger_id: int) -> tuple[LedgerMetadata, int]:
        return self.docs[ledger_id]

    async def update(self, ledger_id: int, fn: Callable[[LedgerMetadata], LedgerMetadata]) -> tuple[LedgerMetadata, int]:
        md, v = self.docs[ledger_id]
        return fn(md), await self.write(ledger_id, fn(md), v)


class Registry:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    async def list_writable(self) -> list[str]:
        return [n for n, b in self.pool.bookies.items() if not b.down]


def ledgers(n: int, ensemble: Sequence[str] = ("b0", "b1", "b2"), bookies: Sequence[str] = ("b0", "b1", "b2", "b3"),
            qw: int = 3, qa: int = 2) -> tuple[list[LedgerHandle], Pool, Store]:
    """``n`` open ledgers (ids 1..n) of one client, each on ``ensemble``."""
    random.seed(3)
    pool, store = Pool(bookies), Store()
    ctx = ClientContext(LedgerClientConfig(add_timeout_s=2), pool, Registry(pool), store)
    handles = []
    for lid in range(1, n + 1):
        md = LedgerMetadata(len(ensemble), qw, qa, fragments=(Fragment(0, tuple(ensemble)),))
        store.docs[lid] = (md, 0)
        handles.append(LedgerHandle(ctx, lid, md, 0))
    return handles, pool, store


async def test_adds_of_many_ledgers_made_in_one_turn_go_to_each_bookie_as_one_request():
    handles, pool, _ = ledgers(50)
    futs = [h.add_entry(b"m%d" % h.ledger_id) for h in handles]
    assert await asyncio.gather(*futs) == [0] * 50
    for name in ("b0", "b1", "b2"):
        b = pool.bookies[name]
        assert b.requests == [[(lid, 0) for lid in range(1, 51)]]
        assert {k: unframe(v)[1] for k, v in b.entries.items()} == {(lid, 0): b"m%d" % lid for lid in range(1, 51)}
    assert handles[0].ctx.adds.requests("b0") == 1
    await handles[0].ctx.adds.close()


async def test_adds_made_while_requests_are_in_flight_go_out_together_in_order_per_ledger():
    handles, pool, _ = ledgers(20)
    pool.bookies["b0"].delay = 0.02
    futs = []
    for turn in range(10):  # ten loop turns, one entry per ledger each
        futs += [h.add_entry(b"%d:%d" % (h.ledger_id, turn)) for h in handles]
        await asyncio.sleep(0)
    await asyncio.gather(*futs)  # confirmed by b1 and b2 (Qa=2)
    await asyncio.gather(*(h.close() for h in handles))  # which lets b0's copies land
    b0 = pool.bookies["b0"]
    assert len(b0.requests) < 10  # the slow bookie got fewer, bigger requests
    assert sum(len(r) for r in b0.requests) == 200
    for h in handles:
        sent = [eid for r in b0.requests for lid, eid in r if lid == h.ledger_id]
        assert sent == list(range(10))
        assert h.last_add_confirmed == 9
    await handles[0].ctx.adds.close()


async def test_a_fenced_ledger_fails_alone_and_the_others_of_the_same_request_are_confirmed():
    handles, pool, _ = ledgers(3)
    await asyncio.gather(*(h.append(b"first") for h in handles))
    for b in pool.bookies.values():
        b.fenced.add(2)
    results = await asyncio.gather(*(h.add_entry(b"second") for h in handles), return_exceptions=True)
    assert results[0] == 1 and results[2] == 1
    assert isinstance(results[1], LedgerFenced)
    assert all(len(r) == 3 for r in pool.bookies["b0"].requests)  # the three ledgers in each request
    with pytest.raises(LedgerFenced):
        await handles[1].add_entry(b"third")
    assert await handles[0].append(b"third") == 2
    await handles[0].ctx.adds.close()


async def test_a_failed_bookie_replaces_it_in_every_ledger_whose_adds_it_carried():
    handles, pool, store = ledgers(4, qw=2, qa=2)
    await asyncio.gather(*(h.append(b"a") for h in handles))
    pool.bookies["b1"].down = True
    ids = await asyncio.wait_for(asyncio.gather(*(h.append(b"b") for h in handles)), 5)
    assert list(ids) == [1] * 4
    for h in handles:
        md = store.docs[h.ledger_id][0]
        assert "b1" not in md.current_ensemble and "b3" in md.current_ensemble
        assert all((h.ledger_id, 1) in pool.bookies[b].entries for b in md.write_set(1))
    await handles[0].ctx.adds.close()


async def test_close_drains_the_writes_beyond_the_ack_quorum():
    handles, pool, _ = ledgers(2)  # Qw=3, Qa=2
    pool.bookies["b2"].delay = 0.1  # confirmed without it; its copy still lands before close ends
    await asyncio.gather(*(h.append(b"x") for h in handles))
    assert not any(k[0] == 1 for k in pool.bookies["b2"].entries)
    await handles[0].close()
    assert (1, 0) in pool.bookies["b2"].entries
    await handles[0].ctx.adds.close()



async def test_a_request_carries_at_most_max_request_bytes_and_the_rest_follows_in_order(monkeypatch):
    from magnetar.ledger import addbatcher

    monkeypatch.setattr(addbatcher, "MAX_REQUEST_BYTES", 1000)
    handles, pool, _ = ledgers(10)
    futs = [h.add_entry(b"x" * 300) for h in handles] + [h.add_entry(b"y" * 300) for h in handles]
    assert await asyncio.gather(*futs) == [0] * 10 + [1] * 10
    await asyncio.gather(*(h.close() for h in handles))
    b0 = pool.bookies["b0"]
    sizes = [len(r) for r in b0.requests]
    assert max(sizes) == 3 and sum(sizes) == 20  # 3 framed 300 B payloads fit in 1000 B
    for h in handles:
        assert [eid for r in b0.requests for lid, eid in r if lid == h.ledger_id] == [0, 1]
    await handles[0].ctx.adds.close()
