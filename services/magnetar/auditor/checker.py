"""The periodic check: do the bookies of every fragment of every closed ledger still hold
their entries? By default each bookie is asked for the first and the last entry it
should hold in each fragment (BookKeeper's check); ``full`` asks for every entry."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from magnetar.auditor.fragments import entries_on, first_and_last_on
from magnetar.common.errors import MagnetarError, NoSuchLedger, NotFound
from magnetar.ledger.client import LedgerClient
from magnetar.ledger.metadata import LedgerMetadata
from magnetar.metadata.underreplication import ZkUnderReplicationStore

log = logging.getLogger(__name__)

_CONCURRENT_LEDGERS = 8


@dataclass(frozen=True)
class AuditReport:
    started_ms: int
    duration_s: float
    ledgers_checked: int
    fragments_checked: int
    ledgers_marked: int
    full: bool

    def to_dict(self) -> dict[str, object]:
        return {
            "started_ms": self.started_ms,
            "finished_ms": self.started_ms + int(self.duration_s * 1000),
            "duration_s": round(self.duration_s, 3),
            "ledgers_checked": self.ledgers_checked,
            "fragments_checked": self.fragments_checked,
            "ledgers_marked": self.ledgers_marked,
            "full": self.full,
        }


async def missing_copies(
    client: LedgerClient, ledger_id: int, metadata: LedgerMetadata, full: bool, live: set[str]
) -> set[str]:
    """The registered bookies of ``metadata`` that lack an entry they should hold.

    Bookies not registered are left to the death watch; one that does not answer is
    logged and not marked (it may be busy).
    """
    asks: list[tuple[str, list[int]]] = []
    for i, f in enumerate(metadata.fragments):
        last = metadata.fragment_last_entry(i)
        if last < f.first_entry:
            continue
        for b in f.bookies:
            if b not in live:
                continue
            pick = entries_on if full else first_and_last_on
            ids = pick(f.bookies, metadata.write_quorum, b, f.first_entry, last)
            if ids:
                asks.append((b, ids))

    async def ask(bookie: str, ids: list[int]) -> str | None:
        try:
            got = await client.pool.get(bookie).read_entry_list(ledger_id, ids)
        except NotFound:  # it does not know the ledger at all
            return bookie
        except MagnetarError as exc:
            log.warning(
                "check of ledger %d: bookie %s did not answer: %s", ledger_id, bookie, exc.message
            )
            return None
        return bookie if len(got) < len(ids) else None

    found = await asyncio.gather(*(ask(b, ids) for b, ids in asks))
    return {b for b in found if b is not None}


async def check_all(
    client: LedgerClient, markers: ZkUnderReplicationStore, live: set[str], full: bool
) -> AuditReport:
    """Check every closed ledger, mark what is missing; the summary."""
    started, t0 = int(time.time() * 1000), time.monotonic()
    limit = asyncio.Semaphore(_CONCURRENT_LEDGERS)
    counts = {"ledgers": 0, "fragments": 0, "marked": 0}

    async def one(ledger_id: int) -> None:
        async with limit:
            try:
                metadata, _ = await client.store.read(ledger_id)
            except NoSuchLedger:
                return
            if not metadata.is_closed:
                return
            counts["ledgers"] += 1
            counts["fragments"] += len(metadata.fragments)
            missing = await missing_copies(client, ledger_id, metadata, full, live)
            if missing:
                log.warning(
                    "check: ledger %d is missing entries on %s; marking it",
                    ledger_id,
                    ", ".join(sorted(missing)),
                )
                await markers.mark(ledger_id, missing)
                counts["marked"] += 1

    await asyncio.gather(*(one(lid) for lid in await client.list_ledgers()))
    return AuditReport(
        started,
        time.monotonic() - t0,
        counts["ledgers"],
        counts["fragments"],
        counts["marked"],
        full,
    )
