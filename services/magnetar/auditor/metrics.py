"""The auditor's Prometheus metrics (served on ``metrics_port``).

Magnetar's ``magnetar_auditor_*`` names, and the figures BookKeeper's auditor and
replication worker have under the names BookKeeper's Prometheus provider gives them
(``auditor_*``, ``replication_worker_*``): operation stats as summaries with a
``success`` label, latencies in milliseconds, counters without a ``_total`` suffix
(untyped, so the exposition keeps BookKeeper's exact names).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

from magnetar.common.opstats import OpStats

UNDER_REPLICATED = Gauge(
    "magnetar_auditor_under_replicated_ledgers", "Ledgers marked under-replicated"
)
ENTRIES_COPIED = Counter(
    "magnetar_auditor_entries_copied", "Entries copied to new bookies by this replica"
)
LEDGERS_REPLICATED = Counter(
    "magnetar_auditor_ledgers_replicated", "Marked ledgers this replica brought back to Qw"
)
AUDIT_DURATION = Histogram(
    "magnetar_auditor_audit_duration_seconds",
    "Duration of the periodic check of every closed ledger",
    buckets=(0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600),
)
IS_LEADER = Gauge("magnetar_auditor_is_leader", "1 while this replica is the leading auditor")


class BookKeeperAuditorStats:
    """What BookKeeper's ``AuditorStats`` and ``ReplicationWorker`` count, kept as plain
    numbers by the auditor and read at scrape time."""

    def __init__(self) -> None:
        self.num_under_replicated_ledgers = OpStats()
        """Per audit (a lost bookie, a periodic check): the ledgers it marked (in the
        summary's sum, as BookKeeper's NUM_UNDER_REPLICATED_LEDGERS)."""
        self.check_all_ledgers_time = OpStats()
        self.url_publish_time_for_lost_bookie = OpStats()
        self.num_ledgers_checked = 0
        self.num_full_or_partial_ledgers_replicated = 0
        self.num_entries_written = 0


BOOKKEEPER = BookKeeperAuditorStats()


def _summary(name: str, doc: str, op: OpStats, scale: float) -> Metric:
    family = SummaryMetricFamily(name, doc, labels=["success"])
    family.add_metric(["true"], op.successes, op.success_sum * scale)
    family.add_metric(["false"], op.failures, op.failure_sum * scale)
    return family


def _untyped(name: str, doc: str, value: float) -> Metric:
    metric = Metric(name, doc, "unknown")
    metric.add_sample(name, {}, value)
    return metric


class BookKeeperAuditorCollector(Collector):
    def __init__(self, stats: BookKeeperAuditorStats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        s = self.stats
        yield _summary(
            "auditor_NUM_UNDER_REPLICATED_LEDGERS", "Ledgers marked under-replicated, per audit.",
            s.num_under_replicated_ledgers, 1.0,
        )
        yield _summary(
            "auditor_CHECK_ALL_LEDGERS_TIME", "Periodic checks of every closed ledger: count and ms.",
            s.check_all_ledgers_time, 1000.0,
        )
        yield _summary(
            "auditor_URL_PUBLISH_TIME_FOR_LOST_BOOKIE", "Marking the ledgers of a lost bookie: count and ms.",
            s.url_publish_time_for_lost_bookie, 1000.0,
        )
        yield _untyped("auditor_NUM_LEDGERS_CHECKED", "Ledgers checked by periodic checks (counter).", s.num_ledgers_checked)
        yield _untyped(
            "replication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED",
            "Marked ledgers this replica brought back to Qw (counter).", s.num_full_or_partial_ledgers_replicated,
        )
        yield _untyped(
            "replication_worker_NUM_ENTRIES_WRITTEN", "Entries this replica copied to new bookies (counter).",
            s.num_entries_written,
        )


REGISTRY.register(BookKeeperAuditorCollector(BOOKKEEPER))
