"""Orphan collection: the ledgers a bookie holds that the ledger metadata no longer places
on it (BookKeeper's ``ScanAndCompareGarbageCollector`` with ``verifyMetadataOnGc``).

Two kinds of copies are left behind by the cluster's own work and nothing else removes:

- **deleted**: the ledger's metadata is gone (deleted while this bookie was away, or the
  delete request never reached it). The ledger is deleted here as by ``DeleteLedger``:
  with a tombstone, as its id is never issued again.
- **over-replicated**: the ledger is closed and no fragment of it names this bookie (a
  copy written by the auditor whose metadata swap then lost its compare-and-set or whose
  replica died; a bookie that came back after its ledgers were re-replicated elsewhere).
  Its data is dropped *without* a tombstone: the auditor may choose this bookie for the
  same ledger again later.

A mistake here loses acknowledged data, so every step is conservative:

- ledgers at or above the metadata's id bound are never touched (never issued in this
  metadata: a wrong ZooKeeper root, ``bookiesanity``'s ids);
- an OPEN or IN_RECOVERY ledger is kept, whatever its ensembles say (its metadata may
  still change to include this bookie);
- a ledger is collected only after two scans found it garbage, the first at least
  ``wait_s`` before (deleted ledgers: any two scans);
- right before removing it, the metadata is read again (verify on GC); an over-replicated
  ledger is removed only while this collector holds its replication lock (no auditor
  worker can be copying it here) and has no under-replication marker.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LedgerPlacement:
    """What the collector needs of one ledger's metadata."""

    closed: bool
    bookies: frozenset[str]
    """Every bookie named by any fragment's ensemble."""


class LedgerMetadataView(Protocol):
    """The ledger metadata as the collector reads it (ZooKeeper in a bookie process)."""

    async def id_bound(self) -> int:
        """Every ledger id issued so far is below this."""

    async def ledger_ids(self) -> set[int]:
        """Every ledger that has metadata."""

    async def placement(self, ledger_id: int) -> LedgerPlacement | None:
        """The ledger's placement; None when it has no metadata."""

    async def under_replicated(self, ledger_id: int) -> bool:
        """Whether the ledger carries an under-replication marker."""

    async def try_lock(self, ledger_id: int) -> bool:
        """Take the ledger's replication lock; False when somebody holds it."""

    async def unlock(self, ledger_id: int) -> None:
        """Release the lock taken by :meth:`try_lock`."""


class Verdict(enum.Enum):
    KEEP = "keep"
    DELETED = "deleted"
    OVER_REPLICATED = "over-replicated"


def classify(ledger_id: int, id_bound: int, placement: LedgerPlacement | None, bookie_id: str) -> Verdict:
    """Whether this bookie's copy of ``ledger_id`` is garbage, by the metadata alone."""
    if ledger_id >= id_bound:
        return Verdict.KEEP
    if placement is None:
        return Verdict.DELETED
    if placement.closed and bookie_id not in placement.bookies:
        return Verdict.OVER_REPLICATED
    return Verdict.KEEP


@dataclass
class CollectResult:
    deleted: list[int]
    evicted: list[int]


class ScanAndCompareGarbageCollector:
    """Compares the ledgers a bookie holds with the metadata; removes orphans (see module)."""

    def __init__(
        self,
        bookie_id: str,
        metadata: LedgerMetadataView,
        held: Callable[[], Iterable[int]],
        delete: Callable[[int], Awaitable[None]],
        evict: Callable[[int], Awaitable[bool]],
        wait_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Args:
        held: the ledger ids the bookie holds now.
        delete: delete a ledger for good (tombstone).
        evict: drop a ledger's data, no tombstone; False when it was written meanwhile.
        wait_s: how long an over-replicated ledger must stay so before it is removed.
        """
        self.bookie_id = bookie_id
        self._metadata = metadata
        self._held = held
        self._delete = delete
        self._evict = evict
        self._wait_s = wait_s
        self._clock = clock
        self._suspects: dict[int, tuple[Verdict, float]] = {}
        """Ledgers found garbage by an earlier scan: verdict and when first found so."""

    async def collect(self) -> CollectResult:
        """One scan: find garbage, remove what was garbage long enough and still is."""
        result = CollectResult([], [])
        bound = await self._metadata.id_bound()
        known = await self._metadata.ledger_ids()
        now = self._clock()
        suspects: dict[int, tuple[Verdict, float]] = {}
        for ledger_id in sorted(self._held()):
            if ledger_id >= bound:
                continue
            placement = None if ledger_id not in known else await self._metadata.placement(ledger_id)
            verdict = classify(ledger_id, bound, placement, self.bookie_id)
            if verdict is Verdict.KEEP:
                continue
            before = self._suspects.get(ledger_id)
            first = before[1] if before is not None and before[0] is verdict else now
            suspects[ledger_id] = (verdict, first)
            if before is None or before[0] is not verdict:
                continue  # found now: look again at the next scan
            if verdict is Verdict.OVER_REPLICATED and now - first < self._wait_s:
                continue
            if await self._remove(ledger_id, verdict, bound):
                del suspects[ledger_id]
                (result.deleted if verdict is Verdict.DELETED else result.evicted).append(ledger_id)
        self._suspects = suspects
        return result

    async def _remove(self, ledger_id: int, verdict: Verdict, bound: int) -> bool:
        if verdict is Verdict.DELETED:
            # Verify on GC: the listing may be older than the ledger.
            if classify(ledger_id, bound, await self._metadata.placement(ledger_id), self.bookie_id) is not verdict:
                return False
            log.info("ledger %d has no metadata: deleting this bookie's copy", ledger_id)
            await self._delete(ledger_id)
            return True
        if not await self._metadata.try_lock(ledger_id):
            return False  # an auditor worker is replicating it (maybe onto this bookie)
        try:
            if await self._metadata.under_replicated(ledger_id):
                return False  # to be replicated: this bookie may be chosen as the target
            if classify(ledger_id, bound, await self._metadata.placement(ledger_id), self.bookie_id) is not verdict:
                return False
            log.info("ledger %d is closed and no fragment names %s: dropping its copy", ledger_id, self.bookie_id)
            return await self._evict(ledger_id)
        finally:
            await self._metadata.unlock(ledger_id)
