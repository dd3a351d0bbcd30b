"""Ledger recovery: close a ledger whose writer is gone, at the last entry that may have
been confirmed to it, so every confirmed entry stays in the ledger.

1. Mark the metadata IN_RECOVERY (compare-and-set).
2. Fence the ledger on the bookies of the last fragment. At least E - Qa + 1 must answer:
   then fewer than Qa unfenced bookies remain, so the old writer can never again gather
   Qa acks for any write set; its adds fail with LEDGER_FENCED.
3. Start from the highest LAC the fenced bookies report: everything up to it was confirmed.
4. Read forward from LAC + 1. An entry found on any replica is re-written to its write set
   (recovery adds pass the fence) and recovery goes on; an entry is absent when
   (Qw - Qa) + 1 replicas say they do not have it — then Qa of them cannot have had it,
   so it was never confirmed. Anything else (too many replicas unreachable) aborts.
   When fewer than Qa replicas of a write set take a re-written entry because some are
   down, those are replaced (a new fragment from that entry, like a writer's ensemble
   change) and the entry is written again; reads keep using the fenced ensemble.
5. Close with the last recovered entry and the ledger length recorded in it.
"""

from __future__ import annotations

import asyncio
import logging

from magnetar.common.errors import MagnetarError, NotConnected, NotEnoughBookies, NotFound, Timeout
from magnetar.ledger.bookie_client import Entry
from magnetar.ledger.context import ClientContext
from magnetar.ledger.framing import unframe
from magnetar.ledger.metadata import LedgerMetadata, LedgerState
from magnetar.ledger.placement import replace_bookies

log = logging.getLogger(__name__)


class RecoveryError(MagnetarError):
    code = "RECOVERY_FAILED"
    grpc_status = "UNAVAILABLE"
    retriable = True


async def recover(ctx: ClientContext, ledger_id: int) -> LedgerMetadata:
    """Recover and close ``ledger_id``; returns the closed metadata (as is if already closed)."""
    store = ctx.store
    metadata, version = await store.read(ledger_id)
    if metadata.is_closed:
        return metadata
    if metadata.state is LedgerState.OPEN:
        metadata, version = await store.update(
            ledger_id, lambda m: m if m.state is not LedgerState.OPEN else m.with_state(LedgerState.IN_RECOVERY)
        )
        if metadata.is_closed:
            return metadata

    ensemble = metadata.current_ensemble
    fenced = await asyncio.gather(*(ctx.pool.get(b).fence(ledger_id) for b in ensemble), return_exceptions=True)
    lacs = [r for r in fenced if isinstance(r, int)]
    needed = metadata.ensemble_size - metadata.ack_quorum + 1
    if len(lacs) < needed:
        errors = "; ".join(str(r) for r in fenced if not isinstance(r, int))
        raise NotEnoughBookies(needed, len(lacs)) from RecoveryError(f"ledger {ledger_id}: could not fence: {errors}")
    lac = max(lacs)
    length = 0
    if lac >= 0:
        data = await _read_one(ctx, ledger_id, metadata, lac)
        if data is None:
            raise RecoveryError(f"ledger {ledger_id}: entry {lac} (the LAC) is missing from every replica")
        length = unframe(data)[0]

    entry_id = lac + 1
    write_md = metadata
    while True:
        data = await _read_one(ctx, ledger_id, metadata, entry_id)
        if data is None:
            break
        write_md = await _rewrite(ctx, ledger_id, write_md, entry_id, entry_id - 1, data)
        length = unframe(data)[0]
        entry_id += 1
    last = entry_id - 1

    def close(m: LedgerMetadata) -> LedgerMetadata:
        return m if m.is_closed else m.closed(last, length)

    closed, _ = await store.update(ledger_id, close)
    log.info("ledger %d recovered: LAC was %d, closed at entry %d", ledger_id, lac, closed.last_entry_id)
    return closed


async def _read_one(ctx: ClientContext, ledger_id: int, metadata: LedgerMetadata, entry_id: int) -> bytes | None:
    """The entry from any replica; None when (Qw - Qa) + 1 replicas say it is absent."""
    write_set = metadata.write_set(entry_id)
    timeout = ctx.config.read_timeout_s
    results = await asyncio.gather(
        *(asyncio.wait_for(ctx.pool.get(b).read_entry(ledger_id, entry_id, fence=True), timeout) for b in write_set),
        return_exceptions=True,
    )
    absent = 0
    for r in results:
        if isinstance(r, Entry):
            return r.payload
        if isinstance(r, NotFound):
            absent += 1
    if absent >= metadata.write_quorum - metadata.ack_quorum + 1:
        return None
    errors = "; ".join(f"{b}: {r}" for b, r in zip(write_set, results, strict=True))
    raise RecoveryError(f"ledger {ledger_id}: cannot tell whether entry {entry_id} exists ({errors})")


async def _rewrite(
    ctx: ClientContext, ledger_id: int, metadata: LedgerMetadata, entry_id: int, lac: int, data: bytes
) -> LedgerMetadata:
    """Write the entry to Qa or more of its write set; returns the metadata to write the
    next entries with (a new last fragment when unreachable bookies were replaced)."""
    entry = Entry(ledger_id, entry_id, lac, data)

    async def one(bookie: str) -> None:
        answer = await ctx.pool.get(bookie).send_add([entry], recovery=True)
        failed = await asyncio.wait_for(answer, ctx.config.add_timeout_s)
        if failed:
            raise failed[0][2]

    for _ in range(3):
        write_set = metadata.write_set(entry_id)
        results = await asyncio.gather(*(one(b) for b in write_set), return_exceptions=True)
        ok = sum(1 for r in results if r is None)
        if ok >= metadata.ack_quorum:
            return metadata
        down = {b for b, r in zip(write_set, results, strict=True) if isinstance(r, NotConnected | Timeout | TimeoutError)}
        errors = "; ".join(f"{b}: {r}" for b, r in zip(write_set, results, strict=True) if r is not None)
        if not down:
            break
        writable = await ctx.registry.list_writable()
        try:
            bookies = tuple(replace_bookies(metadata.current_ensemble, down, writable))
        except NotEnoughBookies as exc:
            raise RecoveryError(f"ledger {ledger_id}: cannot replace {', '.join(sorted(down))} to re-replicate entry {entry_id}: {exc}") from exc

        def change(m: LedgerMetadata, bookies: tuple[str, ...] = bookies) -> LedgerMetadata:
            return m if m.is_closed else m.with_fragment(entry_id, bookies)

        metadata, _ = await ctx.store.update(ledger_id, change)
        log.info("ledger %d: recovery replaced %s from entry %d", ledger_id, ",".join(sorted(down)), entry_id)
    raise RecoveryError(f"ledger {ledger_id}: could not re-replicate entry {entry_id} to {metadata.ack_quorum} bookies ({errors})")
