"""The auditor's Prometheus metrics (served on ``metrics_port``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

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
