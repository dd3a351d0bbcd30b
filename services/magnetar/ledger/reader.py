"""Reading ledger entries from their replicas.

Each wanted entry is asked of the first bookie of its write set; entries are grouped so
each bookie gets one request for all of its share. An entry a bookie does not have, or
that it could not serve (error, timeout), is asked of the next replica of its write set,
until one has it or every replica was tried.

A reader keeps the metadata it was opened with; the auditor may since have replaced lost
bookies in it (re-replication). When every replica of an entry failed, the reader reads
the metadata again and, if the ensembles changed, asks the new replicas (as BookKeeper's
client follows metadata changes). A broker that kept a reader open across two permanent
bookie losses otherwise asked the two dead bookies for ever (a chaos run: a Shared
subscription stopped delivering).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from typing import NamedTuple

from magnetar.common.errors import (
    InvalidArgument,
    MagnetarError,
    NoSuchEntry,
    NoSuchLedger,
    NotFound,
)
from magnetar.ledger.context import BookieConnections, ClientContext
from magnetar.ledger.framing import unframe
from magnetar.ledger.metadata import LedgerMetadata


class LedgerEntry(NamedTuple):
    ledger_id: int
    entry_id: int
    payload: bytes
    length: int  # of the ledger through this entry


async def read_from_replicas(
    pool: BookieConnections, ledger_id: int, metadata: LedgerMetadata, entry_ids: Sequence[int], timeout_s: float
) -> dict[int, bytes]:
    """Raw entry data by id, each from the first replica that has it.

    Raises:
        NoSuchEntry: no replica stores one of the entries.
        MagnetarError: the replicas that might store it failed (the last error).
    """
    attempt = dict.fromkeys(entry_ids, 0)
    write_sets = {e: metadata.write_set(e) for e in entry_ids}
    found: dict[int, bytes] = {}
    last_error: dict[int, MagnetarError] = {}
    while attempt:
        by_bookie: dict[str, list[int]] = defaultdict(list)
        for e, k in attempt.items():
            by_bookie[write_sets[e][k]].append(e)
        bookies = list(by_bookie)
        results = await asyncio.gather(
            *(asyncio.wait_for(pool.get(b).read_entry_list(ledger_id, by_bookie[b]), timeout_s) for b in bookies),
            return_exceptions=True,
        )
        for bookie, result in zip(bookies, results, strict=True):
            ids = by_bookie[bookie]
            if isinstance(result, BaseException):
                err = result if isinstance(result, MagnetarError) else MagnetarError(f"bookie {bookie}: {result!r}")
                if isinstance(result, TimeoutError):
                    err = MagnetarError(f"bookie {bookie} did not answer reads within {timeout_s:g} s")
                got: dict[int, bytes] = {}
            else:
                got = {x.entry_id: x.payload for x in result}
                err = NoSuchEntry(ledger_id, -1, bookie)
            for e in ids:
                if e in got:
                    found[e] = got[e]
                    del attempt[e]
                    continue
                last_error[e] = err if not isinstance(err, NotFound) else NoSuchEntry(ledger_id, e, bookie)
                attempt[e] += 1
                if attempt[e] >= len(write_sets[e]):
                    raise last_error[e]
    return found


def decode_entries(ledger_id: int, raw: dict[int, bytes], entry_ids: Sequence[int]) -> list[LedgerEntry]:
    out = []
    for e in entry_ids:
        length, payload = unframe(raw[e])
        out.append(LedgerEntry(ledger_id, e, payload, length))
    return out


async def read_lac(ctx: ClientContext, ledger_id: int, metadata: LedgerMetadata) -> int:
    """The highest LAC the bookies of the last fragment report (entries before that
    fragment were all confirmed when it was made).

    Raises:
        MagnetarError: no bookie of the fragment answered.
    """
    last = metadata.fragments[-1]
    results = await asyncio.gather(*(ctx.pool.get(b).read_lac(ledger_id) for b in last.bookies), return_exceptions=True)
    answers = [r for r in results if isinstance(r, int)]
    answers += [-1 for r in results if isinstance(r, NoSuchLedger)]
    if not answers:
        raise MagnetarError(f"ledger {ledger_id}: no bookie of {', '.join(last.bookies)} answered ReadLac: {results[0]}")
    return max([last.first_entry - 1, *answers])


class LedgerReader:
    """Reads a ledger: up to its last entry when closed, up to the LAC while open."""

    def __init__(self, ctx: ClientContext, ledger_id: int, metadata: LedgerMetadata, last_add_confirmed: int) -> None:
        self.ctx = ctx
        self.ledger_id = ledger_id
        self.metadata = metadata
        self.last_add_confirmed = last_add_confirmed

    @property
    def last_entry_id(self) -> int:
        return self.metadata.last_entry_id if self.metadata.is_closed else self.last_add_confirmed

    async def read(self, first: int, last: int) -> list[LedgerEntry]:
        """Entries first..last, in order.

        Raises:
            InvalidArgument: the range is empty or reaches past the last readable entry.
        """
        if first < 0 or last < first:
            raise InvalidArgument(f"bad entry range {first}..{last}")
        if last > self.last_entry_id:
            raise InvalidArgument(
                f"ledger {self.ledger_id}: entry {last} is past the last readable entry {self.last_entry_id}"
            )
        ids = list(range(first, last + 1))
        timeout_s = self.ctx.config.read_timeout_s
        try:
            raw = await read_from_replicas(self.ctx.pool, self.ledger_id, self.metadata, ids, timeout_s)
        except MagnetarError:
            if not await self._metadata_changed():
                raise
            raw = await read_from_replicas(self.ctx.pool, self.ledger_id, self.metadata, ids, timeout_s)
        return decode_entries(self.ledger_id, raw, ids)

    async def _metadata_changed(self) -> bool:
        """Read the metadata again; True (and use it) when its ensembles changed."""
        try:
            fresh, _ = await self.ctx.store.read(self.ledger_id)
        except MagnetarError:
            return False
        if fresh.fragments == self.metadata.fragments:
            return False
        if self.metadata.is_closed and not fresh.is_closed:
            return False  # not this ledger any more (never happens: closing is final)
        self.metadata = fresh
        return True

    async def refresh_lac(self) -> int:
        """Ask the bookies of the last fragment for the LAC (open ledgers)."""
        if not self.metadata.is_closed:
            self.last_add_confirmed = max(self.last_add_confirmed, await read_lac(self.ctx, self.ledger_id, self.metadata))
        return self.last_entry_id
