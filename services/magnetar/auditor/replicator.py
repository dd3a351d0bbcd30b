"""Re-replicate one marked ledger: every lost copy of every fragment to a new bookie.

For each (fragment, lost bookie): choose a writable bookie that is not in the
fragment's ensemble, copy the entries, then swap it into that fragment with one
compare-and-set of the ledger's metadata — which fails, changing nothing, if the
fragment was changed meanwhile. The metadata is therefore always either the old or
the new ensemble, never half of one. The marker is cleared (compare-and-set on the
version read at the start) only when no lost copy is left.

An open ledger: its earlier fragments are done as usual. Its current fragment is left
to the writer's own ensemble change while the writer lives; once the writer is gone
and the marker is ``open_ledger_grace_s`` old, the ledger is recovered (fenced and
closed) and its last fragment done like any other.
"""

from __future__ import annotations

import enum
import logging
import random
import time
from dataclasses import dataclass

from magnetar.auditor.config import AuditorConfig
from magnetar.auditor.copier import copy_fragment
from magnetar.auditor.fragments import (
    FragmentRepair,
    entries_on,
    open_last_fragment_affected,
    repairs,
)
from magnetar.auditor.metrics import BOOKKEEPER, ENTRIES_COPIED, LEDGERS_REPLICATED
from magnetar.auditor.throttle import Throttle
from magnetar.common.errors import MagnetarError, NoSuchLedger
from magnetar.ledger.client import LedgerClient
from magnetar.ledger.metadata import LedgerMetadata
from magnetar.metadata.underreplication import UnderReplicated, ZkUnderReplicationStore

log = logging.getLogger(__name__)


class Outcome(enum.Enum):
    DONE = "done"
    """Every lost copy is back; the marker is cleared."""
    AGAIN = "again"
    """The marker changed while working: look at it again now."""
    LATER = "later"
    """Something must happen first (a live writer, a grace period, a spare bookie)."""


@dataclass
class Progress:
    """What a replica is doing with one ledger (shown by the Auditor status RPC)."""

    ledger_id: int
    first_entry: int = -1
    missing: str = ""
    target: str = ""
    entries_total: int = 0
    entries_copied: int = 0
    note: str = ""


class LedgerReplicator:
    def __init__(
        self,
        client: LedgerClient,
        markers: ZkUnderReplicationStore,
        config: AuditorConfig,
        throttle: Throttle,
    ) -> None:
        self.client = client
        self.markers = markers
        self.config = config
        self.throttle = throttle
        self.entries_copied = 0
        self.ledgers_replicated = 0

    async def replicate(self, ledger_id: int, progress: Progress) -> Outcome:
        """Work on one marked ledger (the caller holds its lock).

        Raises:
            MagnetarError: a step failed (bookies unreachable, an entry lost …); the
                marker stays and the ledger is tried again later.
        """
        marker = await self.markers.get(ledger_id)
        if marker is None:
            return Outcome.DONE
        try:
            metadata, _ = await self.client.store.read(ledger_id)
        except NoSuchLedger:
            log.info("ledger %d was deleted; clearing its marker", ledger_id)
            return Outcome.DONE if await self.markers.clear(marker) else Outcome.AGAIN
        lost = set(marker.missing)
        waiting = ""
        if open_last_fragment_affected(metadata, lost):
            waiting = await self._open_ledger_wait(ledger_id, metadata, marker)
            if not waiting:
                progress.note = "recovering (fence and close)"
                reader = await self.client.open_ledger(ledger_id, recovery=True)
                metadata = reader.metadata
                log.info(
                    "ledger %d: writer gone or idle; recovered and closed at entry %d",
                    ledger_id,
                    metadata.last_entry_id,
                )
        done: set[tuple[int, str]] = set()
        while todo := [
            r for r in repairs(metadata, lost) if (r.first_entry, r.missing) not in done
        ]:
            metadata = await self._repair(ledger_id, todo[0], metadata, lost, progress)
            done.add((todo[0].first_entry, todo[0].missing))
        if waiting:
            progress.note = waiting
            return Outcome.LATER
        if not await self.markers.clear(marker):
            return Outcome.AGAIN
        if not done:
            log.info("ledger %d: no fragment names %s any more; marker cleared", ledger_id, ", ".join(marker.missing))
            return Outcome.DONE
        self.ledgers_replicated += 1
        LEDGERS_REPLICATED.inc()
        BOOKKEEPER.num_full_or_partial_ledgers_replicated += 1
        log.info(
            "ledger %d: fully replicated again (lost %s)", ledger_id, ", ".join(marker.missing)
        )
        return Outcome.DONE

    async def _open_ledger_wait(
        self, ledger_id: int, metadata: LedgerMetadata, marker: UnderReplicated
    ) -> str:
        """Why the current fragment of an open ledger must wait ("" : recover it now)."""
        age_s = time.time() - marker.marked_at_ms / 1000
        if metadata.writer and await self.client.store.writer_alive(metadata.writer):
            # A writer that writes replaces the lost bookie on its next add; one that does
            # not (an idle topic) would leave Qw unrestored for good.
            grace = self.config.live_writer_grace_s
            if age_s < grace:
                return f"open with a live writer: its ensemble change replaces the lost bookie, else recovery in {grace - age_s:.0f} s"
            return ""
        if age_s < self.config.open_ledger_grace_s:
            return f"open, writer gone: recovery in {self.config.open_ledger_grace_s - age_s:.0f} s"
        return ""

    async def _repair(
        self,
        ledger_id: int,
        repair: FragmentRepair,
        metadata: LedgerMetadata,
        lost: set[str],
        progress: Progress,
    ) -> LedgerMetadata:
        """Copy one lost copy and swap the new bookie into the fragment; the new metadata."""
        writable = await self.client.registry.list_writable()
        # A bookie the marker names may be back (it was away past the grace period: a
        # partition, a long pause) with its data: it is a source again. Skipping every
        # bookie ever marked left entries whose other copy was on such a bookie with
        # "no replica left", until it was lost for real (a chaos run lost entries so).
        registered = set(writable) | set(await self.client.registry.list_read_only())
        unusable = lost - registered
        spares = sorted(set(writable) - set(repair.bookies) - lost)
        if spares:
            target = random.choice(spares)
        elif repair.missing in writable:
            target = repair.missing  # it is back (empty): refill it in place
        else:
            raise MagnetarError(
                f"ledger {ledger_id}: no writable bookie outside {','.join(repair.bookies)} to replace {repair.missing}: "
                "add a bookie"
            )
        progress.first_entry, progress.missing, progress.target = (
            repair.first_entry,
            repair.missing,
            target,
        )
        progress.entries_copied, progress.note = 0, "copying"
        progress.entries_total = len(
            entries_on(repair.bookies, metadata.write_quorum, repair.missing, repair.first_entry, repair.last_entry)
        )

        def copied(n: int) -> None:
            progress.entries_copied += n
            self.entries_copied += n
            ENTRIES_COPIED.inc(n)
            BOOKKEEPER.num_entries_written += n

        count = await copy_fragment(
            self.client.pool, ledger_id, repair, metadata.write_quorum, target, unusable, self.throttle,
            self.config.batch_entries, copied,
        )  # fmt: skip
        if target == repair.missing:
            return metadata
        updated, _ = await self.client.store.update(
            ledger_id,
            lambda m: m.with_replaced_bookie(
                repair.first_entry, repair.bookies, repair.missing, target
            ),
        )
        log.info(
            "ledger %d: fragment at entry %d: %s replaced by %s (%d entries copied)",
            ledger_id, repair.first_entry, repair.missing, target, count,
        )  # fmt: skip
        return updated
