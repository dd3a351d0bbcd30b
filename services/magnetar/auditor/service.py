"""One auditor replica: contends for leadership (the leader runs :class:`AuditLeader`)
and runs replication workers, whether leading or not. Knows nothing of gRPC."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any

from magnetar.auditor.config import AuditorConfig
from magnetar.auditor.leader import AuditLeader
from magnetar.auditor.metrics import IS_LEADER, UNDER_REPLICATED
from magnetar.auditor.replicator import LedgerReplicator, Outcome, Progress
from magnetar.auditor.throttle import Throttle
from magnetar.common.errors import MagnetarError
from magnetar.common.tasks import BackgroundTasks
from magnetar.common.tls import client_tls
from magnetar.ledger.client import LedgerClient
from magnetar.ledger.context import LedgerClientConfig
from magnetar.metadata.election import LeaderElection
from magnetar.metadata.session import ZkSession
from magnetar.metadata.underreplication import UnderReplicated, ZkUnderReplicationStore

log = logging.getLogger(__name__)


class NotLeader(MagnetarError):
    """Only the leader runs the periodic check; ``leader`` says where it is."""

    code = "NOT_LEADER"
    grpc_status = "FAILED_PRECONDITION"

    def __init__(self, leader: str | None) -> None:
        where = (
            f"the leader is {leader}"
            if leader
            else "no auditor is leading yet: try again in a few seconds"
        )
        super().__init__(f"this auditor is not the leader; {where}")
        self.leader = leader


@dataclass
class Status:
    auditor_id: str
    leader_id: str
    is_leader: bool
    last_audit: dict[str, Any] | None
    under_replicated_count: int
    under_replicated: list[tuple[UnderReplicated, str]]
    in_progress: list[Progress]
    ledgers_replicated: int
    entries_copied: int
    lost_bookies: dict[str, float] = field(default_factory=dict)
    last_error: str = ""


class AuditorService:
    def __init__(self, config: AuditorConfig, auditor_id: str) -> None:
        self.config = config
        self.auditor_id = auditor_id
        self.zk = ZkSession(config.zookeeper, config.zk_root, config.zk_session_timeout_s)
        self.service_token = config.service_token()
        """Presented to bookies and to the leading replica (None: no authentication)."""
        self.client = LedgerClient(
            self.zk,
            LedgerClientConfig(
                add_timeout_s=config.ledger_add_timeout_s, read_timeout_s=config.ledger_read_timeout_s,
                auth_token=self.service_token,
            ),
            tls=client_tls(config),
        )
        self.markers = ZkUnderReplicationStore(self.zk)
        self.throttle = Throttle(config.throttle_entries_per_s)
        self.replicator = LedgerReplicator(self.client, self.markers, config, self.throttle)
        self.leader = AuditLeader(self.client, self.markers, config, auditor_id)
        self.election = LeaderElection(self.zk, self.zk.paths.auditor_election(), auditor_id)
        self.in_progress: dict[int, Progress] = {}
        self.last_error = ""
        self._retry_at: dict[int, float] = {}
        self._tasks = BackgroundTasks(f"auditor {auditor_id}")

    async def start(self) -> None:
        await self.zk.start()
        self._tasks.spawn(self.election.run(self._lead), name="auditor-election")
        for i in range(self.config.replication_workers):
            self._tasks.spawn(self._worker(), name=f"auditor-worker-{i}")

    async def stop(self) -> None:
        await self.election.close()
        await self._tasks.close()
        await self.leader.close()
        await self.client.close()
        await self.zk.close()

    async def _lead(self) -> None:
        IS_LEADER.set(1)
        try:
            await self.leader.run()
        finally:
            IS_LEADER.set(0)

    # -- replication workers ----------------------------------------------------
    async def _worker(self) -> None:
        while True:
            try:
                worked = await self._replicate_one()
            except MagnetarError as exc:
                log.warning("replication worker: %s", exc.message)
                worked = False
            except Exception:  # a bug: log it and keep the worker alive
                log.exception("replication worker failed")
                worked = False
            if not worked:
                await asyncio.sleep(self.config.poll_interval_s)

    async def _replicate_one(self) -> bool:
        """Lock and work on one marked ledger; False when there was none to take."""
        ids = await self.markers.list_ids()
        UNDER_REPLICATED.set(len(ids))
        random.shuffle(ids)
        now = time.monotonic()
        for ledger_id in ids:
            if ledger_id in self.in_progress or self._retry_at.get(ledger_id, 0) > now:
                continue
            progress = self.in_progress[ledger_id] = Progress(ledger_id)
            try:
                if not await self.markers.try_lock(ledger_id, self.auditor_id):
                    continue
                try:
                    outcome = await self.replicator.replicate(ledger_id, progress)
                finally:
                    await self.markers.unlock(ledger_id)
            except MagnetarError as exc:
                self.last_error = f"ledger {ledger_id}: {exc.message}"
                log.warning(
                    "replicating ledger %d failed: %s; trying again in %g s",
                    ledger_id,
                    exc.message,
                    self.config.retry_interval_s,
                )
                self._retry_at[ledger_id] = time.monotonic() + self.config.retry_interval_s
                continue
            finally:
                self.in_progress.pop(ledger_id, None)
            if outcome is Outcome.LATER:
                log.info("ledger %d: %s", ledger_id, progress.note)
                self._retry_at[ledger_id] = time.monotonic() + self.config.retry_interval_s
                continue
            self._retry_at.pop(ledger_id, None)
            return True
        return False

    # -- what the RPCs ask ------------------------------------------------------
    async def trigger_audit(self) -> dict[str, object]:
        """Run the periodic check now; the report.

        Raises:
            NotLeader: this replica does not lead (the caller forwards to the leader).
        """
        if not self.election.is_leader:
            raise NotLeader(await self.election.leader())
        return await self.leader.audit()

    async def status(self, max_ledgers: int = 1000) -> Status:
        ids = await self.markers.list_ids()
        listed: list[tuple[UnderReplicated, str]] = []
        for ledger_id in ids[:max_ledgers]:
            marker = await self.markers.get(ledger_id)
            if marker is not None:
                listed.append((marker, await self.markers.lock_owner(ledger_id) or ""))
        last = await self.markers.last_audit()
        is_leader = self.election.is_leader
        return Status(
            auditor_id=self.auditor_id,
            leader_id=await self.election.leader() or "",
            is_leader=is_leader,
            last_audit=last,
            under_replicated_count=len(ids),
            under_replicated=listed,
            in_progress=[p for p in self.in_progress.values() if p.target or p.note],
            ledgers_replicated=self.replicator.ledgers_replicated,
            entries_copied=self.replicator.entries_copied,
            lost_bookies=self.leader.lost.pending(time.monotonic()) if is_leader else {},
            last_error=self.last_error,
        )
