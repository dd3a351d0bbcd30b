"""What the leading auditor does: watch bookie registrations and mark the ledgers of a
bookie gone longer than the grace period; run the periodic check when it is due."""

from __future__ import annotations

import asyncio
import logging
import time

from magnetar.auditor.bookiewatch import LostBookies
from magnetar.auditor.checker import check_all
from magnetar.auditor.config import AuditorConfig
from magnetar.auditor.metrics import AUDIT_DURATION, BOOKKEEPER
from magnetar.common.errors import MagnetarError, NoSuchLedger
from magnetar.common.tasks import BackgroundTasks
from magnetar.ledger.client import LedgerClient
from magnetar.metadata.underreplication import ZkUnderReplicationStore

log = logging.getLogger(__name__)


class AuditLeader:
    def __init__(
        self,
        client: LedgerClient,
        markers: ZkUnderReplicationStore,
        config: AuditorConfig,
        auditor_id: str,
    ) -> None:
        self.auditor_id = auditor_id
        self.client = client
        self.markers = markers
        self.config = config
        self.lost = LostBookies(config.grace_period_s)
        self._audit_lock = asyncio.Lock()
        # The callers of a check get its error; a check nobody waits for any more is not logged.
        self._audits = BackgroundTasks(f"auditor {auditor_id} checks", on_error=lambda _task, _exc: None)
        self._next_audit: asyncio.Task[dict[str, object]] | None = None

    async def run(self) -> None:
        """The leader's loop; runs until cancelled (leadership ends)."""
        self.lost = LostBookies(self.config.grace_period_s)
        referenced = await self._referenced_bookies()
        next_audit = await self._next_audit_time()
        changed = asyncio.Event()
        while True:
            changed.clear()
            try:
                registered = await self.client.registry.watch_registered(changed)
                for bookie in self.lost.observe(registered, time.monotonic(), referenced):
                    await self._mark_ledgers_of(bookie)
                    self.lost.done(bookie)
                referenced = set()
            except MagnetarError as exc:  # ZooKeeper busy or briefly away: look again soon
                log.warning("death watch: %s; looking again in %g s", exc.message, self.config.poll_interval_s)
                await asyncio.sleep(self.config.poll_interval_s)
                continue
            if time.time() >= next_audit:
                try:
                    await self.audit()
                except MagnetarError as exc:
                    log.warning(
                        "periodic check failed: %s; trying again in %g s",
                        exc.message,
                        self.config.poll_interval_s,
                    )
                else:
                    next_audit = time.time() + self.config.audit_interval_s
            try:
                await asyncio.wait_for(changed.wait(), self.config.poll_interval_s)
            except TimeoutError:
                pass

    async def audit(self) -> dict[str, object]:
        """Run the periodic check now and record it in ZooKeeper; its report.

        One check runs at a time, and each caller is answered by a check that started
        after it asked. Callers that ask while a check runs share the next one: a burst
        of triggers (clients retrying, or hostile ones) costs at most two checks instead
        of one per call queued behind the lock (a hundred concurrent TriggerAudit calls
        once kept the auditor checking for minutes and most of them passed their
        deadline). A caller that gives up does not cancel the check the others wait for.
        """
        task = self._next_audit
        if task is None or task.done():  # done: cancelled (close) before it began
            task = self._next_audit = self._audits.spawn(self._audit_next(), name="audit")
        return await asyncio.shield(task)

    async def close(self) -> None:
        """Cancel a check under way or queued, and wait for it."""
        await self._audits.close()

    async def _audit_next(self) -> dict[str, object]:
        async with self._audit_lock:
            self._next_audit = None  # who asks from now on waits for the check after this one
            return await self._audit_once()

    async def _audit_once(self) -> dict[str, object]:
        registered = set(await self.client.registry.list_writable()) | set(
            await self.client.registry.list_read_only()
        )
        report = await check_all(
            self.client, self.markers, registered, self.config.full_entry_check
        )
        AUDIT_DURATION.observe(report.duration_s)
        BOOKKEEPER.check_all_ledgers_time.record(True, report.duration_s)
        BOOKKEEPER.num_ledgers_checked += report.ledgers_checked
        BOOKKEEPER.num_under_replicated_ledgers.record(True, report.ledgers_marked)
        summary = {**report.to_dict(), "auditor_id": self.auditor_id}
        await self.markers.record_audit(summary)
        log.info(
            "periodic check: %d closed ledgers, %d fragments, %d marked, in %.2f s",
            report.ledgers_checked, report.fragments_checked, report.ledgers_marked, report.duration_s,
        )  # fmt: skip
        return summary

    async def _next_audit_time(self) -> float:
        last = await self.markers.last_audit()
        if last is None:
            return time.time() + self.config.audit_interval_s
        return float(last.get("finished_ms", 0)) / 1000 + self.config.audit_interval_s

    async def _referenced_bookies(self) -> set[str]:
        """Every bookie some ledger's fragments name (watched even if never seen alive)."""
        found: set[str] = set()
        for ledger_id in await self.client.list_ledgers():
            try:
                found |= (await self.client.ledger_metadata(ledger_id)).bookies()
            except NoSuchLedger:
                continue
        return found

    async def _mark_ledgers_of(self, bookie: str) -> None:
        started = time.monotonic()
        marked = 0
        for ledger_id in await self.client.list_ledgers():
            try:
                metadata = await self.client.ledger_metadata(ledger_id)
            except NoSuchLedger:
                continue
            if bookie in metadata.bookies():
                await self.markers.mark(ledger_id, {bookie})
                marked += 1
        BOOKKEEPER.url_publish_time_for_lost_bookie.record(True, time.monotonic() - started)
        BOOKKEEPER.num_under_replicated_ledgers.record(True, marked)
        log.warning(
            "bookie %s is gone for more than %g s: %d ledgers marked under-replicated",
            bookie, self.config.grace_period_s, marked,
        )  # fmt: skip
