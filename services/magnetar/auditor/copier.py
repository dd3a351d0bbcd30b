"""Copy one lost copy of a fragment: the entries the lost bookie held, read from the
surviving replicas of each entry's write set, added to the new bookie.

Reads and adds overlap: up to ``_MAX_READS_IN_FLIGHT`` batch reads run ahead of the
adds, taking the sources in turn (with E=3, Qw=2 a lost bookie's entries come half from
each neighbour), so the copy is not held to one read round trip at a time; up to
``_MAX_ADDS_IN_FLIGHT`` add batches wait for the target's answer meanwhile.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable, Collection

from magnetar.auditor.fragments import FragmentRepair, entries_on
from magnetar.auditor.throttle import Throttle
from magnetar.common.errors import MagnetarError, NotFound
from magnetar.ledger.bookie_client import AddFailure, BookiePool, Entry
from magnetar.ledger.metadata import write_set

_MAX_ADDS_IN_FLIGHT = 8
_MAX_READS_IN_FLIGHT = 4


class EntryLost(MagnetarError):
    """No live replica holds an entry the ledger's metadata says exists."""

    code = "ENTRY_LOST"
    grpc_status = "DATA_LOSS"


async def copy_fragment(
    pool: BookiePool,
    ledger_id: int,
    repair: FragmentRepair,
    write_quorum: int,
    target: str,
    unusable: Collection[str],
    throttle: Throttle,
    batch: int,
    on_copied: Callable[[int], None],
) -> int:
    """Copy the entries ``repair.missing`` held to ``target``; returns how many.

    Args:
        unusable: bookies not to read from (lost ones). ``repair.missing`` itself is read
            from when it is not one of them (back, perhaps with the entries).
        on_copied: called with the count after each batch is durable on ``target``.

    Raises:
        EntryLost: an entry is on no readable replica.
        MagnetarError: ``target`` refused or could not be reached.
    """
    ids = entries_on(
        repair.bookies, write_quorum, repair.missing, repair.first_entry, repair.last_entry
    )
    skip = set(unusable) | {target}
    by_source: dict[str, list[int]] = {}
    for e in ids:
        # The missing bookie last: back, it may be empty (then every entry would be a
        # second, single read).
        sources = sorted((b for b in write_set(repair.bookies, write_quorum, e) if b not in skip),
                         key=lambda b: b == repair.missing)  # fmt: skip
        if not sources:
            raise EntryLost(
                f"ledger {ledger_id}: entry {e} has no replica left to copy from (write set without {', '.join(sorted(skip))})"
            )
        by_source.setdefault(sources[0], []).append(e)

    # Batches per source, then taken in turn so the reads in flight go to different bookies.
    per_source = [
        [(src, got[i : i + batch]) for i in range(0, len(got), batch)]
        for src, got in by_source.items()
    ]
    chunks = iter(
        [c for group in itertools.zip_longest(*per_source) for c in group if c is not None]
    )
    target_client = pool.get(target)
    reads: deque[asyncio.Task[list[Entry]]] = deque()
    in_flight: deque[tuple[asyncio.Future[list[AddFailure]], int]] = deque()

    def read_next() -> None:
        chunk = next(chunks, None)
        if chunk is not None:
            reads.append(
                asyncio.create_task(
                    _read(pool, ledger_id, repair, write_quorum, chunk[0], chunk[1], skip)
                )
            )

    async def settle() -> None:
        fut, n = in_flight.popleft()
        failed = await fut
        if failed:
            raise failed[0][2]
        on_copied(n)

    try:
        for _ in range(_MAX_READS_IN_FLIGHT):
            read_next()
        while reads:
            entries = await reads.popleft()
            read_next()
            await throttle.acquire(len(entries))
            in_flight.append((await target_client.send_add(entries, recovery=True), len(entries)))
            while len(in_flight) > _MAX_ADDS_IN_FLIGHT:
                await settle()
        while in_flight:
            await settle()
    finally:
        for task in reads:
            task.cancel()
        await asyncio.gather(*reads, return_exceptions=True)
        for fut, _ in in_flight:
            if fut.done() and not fut.cancelled():
                fut.exception()
            fut.cancel()
    return len(ids)


async def _read(
    pool: BookiePool,
    ledger_id: int,
    repair: FragmentRepair,
    write_quorum: int,
    source: str,
    chunk: list[int],
    skip: set[str],
) -> list[Entry]:
    """``chunk`` from ``source``; what it lacks (or all, if it fails) from the other replicas."""
    try:
        got = await pool.get(source).read_entry_list(ledger_id, chunk)
    except MagnetarError:
        got = []
    have = {e.entry_id for e in got}
    for e in chunk:
        if e in have:
            continue
        got.append(await _read_elsewhere(pool, ledger_id, repair, write_quorum, e, skip | {source}))
    return got


async def _read_elsewhere(
    pool: BookiePool,
    ledger_id: int,
    repair: FragmentRepair,
    write_quorum: int,
    entry_id: int,
    skip: set[str],
) -> Entry:
    errors = []
    for b in write_set(repair.bookies, write_quorum, entry_id):
        if b in skip:
            continue
        try:
            return await pool.get(b).read_entry(ledger_id, entry_id)
        except NotFound:
            errors.append(f"{b}: not there")
        except MagnetarError as exc:
            errors.append(f"{b}: {exc.message}")
    raise EntryLost(
        f"ledger {ledger_id}: entry {entry_id} is on no readable replica ({'; '.join(errors) or 'none left'})"
    )
