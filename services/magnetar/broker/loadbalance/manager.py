"""The load manager of one broker (Pulsar's ``ModularLoadManagerImpl``).

Every broker writes its :class:`~magnetar.broker.loadbalance.report.LoadReport` to
ZooKeeper (when it changed by more than ``load_balancer_report_update_threshold_percentage``
or is ``load_balancer_report_update_max_interval_s`` old, looked at every
``load_balancer_host_usage_check_interval_s``) and keeps every live broker's report in a
watched cache. A lookup of an unowned bundle asks :meth:`LoadManager.select` for the
least loaded broker (no ZooKeeper read). One broker, elected, is the leader: every
``load_balancer_shedding_interval_s`` it asks overloaded brokers to unload bundles (the
next lookups place them) and has hot bundles split.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from magnetar.broker.config import BrokerConfig
from magnetar.broker.loadbalance.placement import (
    message_rate_score,
    resource_usage_score,
    select_broker,
)
from magnetar.broker.loadbalance.report import BundleStats, LoadReport, ResourceWeights
from magnetar.broker.loadbalance.shedder import (
    OverloadShedder,
    ShedderInput,
    ShedderSettings,
    ThresholdShedder,
    Unload,
)
from magnetar.broker.loadbalance.splitter import BundleSplitter, SplitLimits, hot_bundles
from magnetar.common.errors import MagnetarError
from magnetar.metadata.election import LeaderElection
from magnetar.metadata.loadbalance import LoadReportCache, ZkLoadReportStore
from magnetar.metadata.session import ZkSession

log = logging.getLogger(__name__)


class LoadPeers(Protocol):
    """How a broker asks another one (a network adapter: broker/rpc/load_peers.py)."""

    async def take_bundle(self, broker_id: str, topic: str) -> str:
        """Ask ``broker_id`` to own ``topic``'s bundle (an authoritative lookup: it takes
        the bundle itself when unowned); the owner it answers."""

    async def unload_bundle(self, broker_id: str, namespace: str, bundle: str) -> None:
        """Ask the owner ``broker_id`` to unload a bundle."""

    async def split_bundle(self, broker_id: str, namespace: str, bundle: str, algorithm: str) -> None:
        """Ask the owner ``broker_id`` to split a bundle (a hot one)."""

    async def close(self) -> None: ...


def weights_of(config: BrokerConfig) -> ResourceWeights:
    return ResourceWeights(
        config.load_balancer_cpu_resource_weight, config.load_balancer_memory_resource_weight,
        config.load_balancer_bandwith_in_resource_weight, config.load_balancer_bandwith_out_resource_weight,
    )


class LoadManager:
    def __init__(
        self, config: BrokerConfig, broker_id: str, session: ZkSession, *,
        measure: Callable[[], LoadReport], unload_local: Callable[[str, str], Awaitable[None]],
        peers: LoadPeers | None = None, splitter: BundleSplitter | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Args: measure: this broker's report now; unload_local: unload one of its
        bundles (``namespace``, ``range``); peers: calls other brokers (None: placement
        and shedding stay on this broker); splitter: splits hot bundles (None: none are)."""
        self.config = config
        self.broker_id = broker_id
        self._measure = measure
        self._unload_local = unload_local
        self.peers = peers
        self.splitter = splitter
        self._clock = clock
        self._session = session
        self.store: ZkLoadReportStore | None = None
        self.cache: LoadReportCache | None = None
        self.election: LeaderElection | None = None
        self.weights = weights_of(config)
        self.reports: dict[str, LoadReport] = {}
        """Every live broker's last report (this broker's as last written)."""
        self._placed: dict[str, list[BundleStats]] = {}
        self._known: dict[str, BundleStats] = {}
        self._written: LoadReport | None = None
        self._written_at = 0.0
        settings = ShedderSettings(
            config.load_balancer_broker_threshold_shedder_percentage,
            config.load_balancer_broker_overloaded_threshold_percentage,
            config.load_balancer_history_resource_percentage,
            config.load_balancer_bundle_unload_min_throughput_threshold * 1024 * 1024,
            self.weights,
        )
        self.shedder: ThresholdShedder | OverloadShedder = (
            ThresholdShedder(settings) if config.load_balancer_load_shedding_strategy == "ThresholdShedder"
            else OverloadShedder(settings)
        )
        self.split_limits = SplitLimits(
            config.load_balancer_namespace_bundle_max_topics, config.load_balancer_namespace_bundle_max_sessions,
            config.load_balancer_namespace_bundle_max_msg_rate,
            config.load_balancer_namespace_bundle_max_bandwidth_mbytes,
            config.load_balancer_namespace_maximum_bundles,
        )
        self._unloaded: dict[str, float] = {}  # bundle → when the leader had it unloaded
        self._shed_at: dict[str, int] = {}  # broker → wall ms of its last shedding
        self._tasks: list[asyncio.Task[None]] = []
        self.unloads = 0
        """Bundles this broker, as leader, had unloaded."""
        self.splits = 0

    # -- reports -------------------------------------------------------------------
    async def start(self) -> None:
        session = self._session
        self.store = ZkLoadReportStore(session)
        self.cache = LoadReportCache(self.store, self.config.load_balancer_host_usage_check_interval_s, self._refreshed)
        self.election = LeaderElection(session, session.paths.load_manager_election(), self.broker_id)
        await self.write_report(force=True)
        await self.cache.refresh()
        self.cache.start()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._report_loop(), name="load-report"))
        if self.config.load_balancer_shedding_enabled or self.config.load_balancer_auto_bundle_split_enabled:
            self._tasks.append(loop.create_task(self.election.run(self._lead), name="load-manager-election"))

    async def write_report(self, force: bool = False) -> bool:
        """Measure; write the report when it changed enough or is old (``force``: now).
        Returns whether it was written."""
        report = self._measure()
        now = self._clock()
        before = self._written
        due = (before is None or force
               or now - self._written_at >= self.config.load_balancer_report_update_max_interval_s
               or report.changed_by(before) > self.config.load_balancer_report_update_threshold_percentage)
        if not due or self.store is None:
            return False
        await self.store.write(self.broker_id, report.doc())
        self._written, self._written_at = report, now
        self.reports[self.broker_id] = report
        self._placed.pop(self.broker_id, None)
        return True

    async def _report_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.load_balancer_host_usage_check_interval_s)
            try:
                await self.write_report()
            except MagnetarError as exc:
                log.debug("writing the load report: %s", exc.message)

    def _refreshed(self, docs: dict[str, dict[str, Any]]) -> None:
        reports = {broker: LoadReport.of(broker, doc) for broker, doc in docs.items()}
        for broker, report in reports.items():
            old = self.reports.get(broker)
            if old is None or old.last_update_ms != report.last_update_ms:
                self._placed.pop(broker, None)  # its report now counts what was placed
            self._known.update(report.bundles)
        self.reports = reports

    def report_doc(self, broker_id: str = "") -> dict[str, Any] | None:
        """A broker's last report as stored (None: it has none); "": this broker's."""
        report = self.reports.get(broker_id or self.broker_id)
        return None if report is None else report.doc()

    # -- placement -----------------------------------------------------------------
    def select(self, bundle: str) -> str:
        """The broker a lookup of the unowned ``bundle`` (``tenant/ns/range``) places it
        on; it counts as placed there until that broker's next report."""
        if self.config.load_balancer_load_placement_strategy == "LeastResourceUsageWithWeight":
            score = resource_usage_score(self.weights)
        else:
            score = message_rate_score
        chosen = select_broker(
            [*self.reports, self.broker_id], self.reports, preferred=self.broker_id, score=score,
            overloaded_percent=self.config.load_balancer_broker_overloaded_threshold_percentage,
            placed=self._placed, weights=self.weights,
        )
        self._placed.setdefault(chosen, []).append(self._known.get(bundle, BundleStats()))
        return chosen

    def forget(self, broker_id: str) -> None:
        """``broker_id`` could not be asked: leave it out until its next report."""
        self.reports.pop(broker_id, None)

    # -- the leader's duties -------------------------------------------------------------
    async def _lead(self) -> None:
        while True:
            await asyncio.sleep(self.config.load_balancer_shedding_interval_s)
            try:
                if self.config.load_balancer_shedding_enabled:
                    await self.shed_once()
                if self.config.load_balancer_auto_bundle_split_enabled and self.splitter is not None:
                    await self.split_once()
            except MagnetarError as exc:
                log.warning("load manager round: %s", exc.message)

    def decide_unloads(self) -> list[Unload]:
        """The shedder's choice over the reports now (within the grace period, and brokers
        not reported since their last shedding, left alone)."""
        now = self._clock()
        grace = self.config.load_balancer_shedding_grace_period_s
        for bundle in [b for b, t in self._unloaded.items() if now - t >= grace]:
            del self._unloaded[bundle]
        unsettled = {b for b, at in self._shed_at.items() if b in self.reports and self.reports[b].last_update_ms <= at}
        return self.shedder.find(ShedderInput(dict(self.reports), set(self._unloaded), unsettled))

    async def shed_once(self) -> list[Unload]:
        """One shedding round; the unloads asked (those that failed are logged)."""
        done: list[Unload] = []
        for unload in self.decide_unloads():
            namespace, _, bundle = unload.bundle.rpartition("/")
            try:
                if unload.broker == self.broker_id:
                    await self._unload_local(namespace, bundle)
                elif self.peers is not None:
                    await self.peers.unload_bundle(unload.broker, namespace, bundle)
                else:
                    continue
            except MagnetarError as exc:
                log.warning("shedding %s from %s: %s", unload.bundle, unload.broker, exc.message)
                continue
            log.info("load manager: %s unloaded %s (overloaded)", unload.broker, unload.bundle)
            self._unloaded[unload.bundle] = self._clock()
            self._shed_at[unload.broker] = int(time.time() * 1000)
            self.unloads += 1
            done.append(unload)
        return done

    async def split_once(self) -> list[tuple[str, str]]:
        """Split the hot bundles (by the splitter); those split."""
        assert self.splitter is not None
        done: list[tuple[str, str]] = []
        for namespace, bundle in hot_bundles(self.reports.values(), self.split_limits):
            try:
                await self.splitter.split_bundle(
                    namespace, bundle, self.config.default_namespace_bundle_split_algorithm
                )
            except MagnetarError as exc:
                log.warning("splitting hot bundle %s/%s: %s", namespace, bundle, exc.message)
                continue
            log.info("load manager: split hot bundle %s/%s", namespace, bundle)
            self.splits += 1
            done.append((namespace, bundle))
        return done

    async def close(self) -> None:
        if self.election is not None:
            await self.election.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self.cache is not None:
            await self.cache.close()
        if self.peers is not None:
            await self.peers.close()
