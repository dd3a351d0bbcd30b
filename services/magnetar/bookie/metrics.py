"""Prometheus metrics of a bookie, read from the core's own counters at scrape time
(nothing is counted twice and the add path pays nothing for them).

Besides Magnetar's ``magnetar_bookie_*`` names, the figures BookKeeper has are there under
the names its Prometheus provider gives them (scope and name joined by ``_``:
``bookie_SERVER_STATUS``, ``bookkeeper_server_ADD_ENTRY_REQUEST``, ``bookie_journal_*``,
``bookie_ledger_*``), so BookKeeper's and Pulsar's bookie dashboards read them. As there,
request latencies are in milliseconds, and counters carry no ``_total`` suffix (their
type is left untyped so the exposition keeps BookKeeper's exact names).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from magnetar.bookie.bookie import Bookie
from magnetar.bookie.opstats import ServerStats
from magnetar.common.opstats import OpStats


def ledger_dir_usage_name(path: str) -> str:
    """BookKeeper's name of a ledger directory's usage gauge (``/data/bk`` →
    ``bookie_ledger_dir__data_bk_usage``); characters Prometheus refuses become ``_``."""
    return "bookie_ledger_dir_" + re.sub(r"[^A-Za-z0-9_]", "_", path) + "_usage"


def _untyped(name: str, doc: str, value: float) -> Metric:
    metric = Metric(name, doc, "unknown")
    metric.add_sample(name, {}, value)
    return metric


def _op_stats(name: str, doc: str, op: OpStats) -> Metric:
    family = SummaryMetricFamily(name, doc, labels=["success"])
    family.add_metric(["true"], op.successes, op.success_sum * 1000)
    family.add_metric(["false"], op.failures, op.failure_sum * 1000)
    return family


class BookieCollector(Collector):
    def __init__(self, bookie: Bookie, server: ServerStats | None = None) -> None:
        self.bookie = bookie
        self.server = server

    def collect(self) -> Iterator[Metric]:
        b = self.bookie
        j = b.journal
        yield CounterMetricFamily("magnetar_bookie_journal_records", "Adds written to the journal.", value=j.records)
        yield CounterMetricFamily("magnetar_bookie_journal_fsyncs", "Journal group commits (fdatasync calls).", value=j.fsyncs)
        yield CounterMetricFamily("magnetar_bookie_journal_bytes", "Bytes written to the journal.", value=j.bytes_written)
        yield CounterMetricFamily("magnetar_bookie_flushes", "Write-cache flushes (checkpoints).", value=b.flushes)
        yield GaugeMetricFamily("magnetar_bookie_write_cache_bytes", "Bytes in the write cache.", value=b.storage.cache.active_bytes)
        yield GaugeMetricFamily("magnetar_bookie_ledgers", "Ledgers stored on this bookie.", value=len(b.storage.ledgers))
        yield GaugeMetricFamily("magnetar_bookie_entry_logs", "Entry log files on disk.", value=len(b.storage.entry_logs.log_ids()))
        yield GaugeMetricFamily("magnetar_bookie_read_only", "1 while the bookie refuses writes.", value=int(b.read_only))
        info = b.info()
        total, free = info["disk_total_bytes"], info["disk_free_bytes"]
        yield GaugeMetricFamily("magnetar_bookie_disk_total_bytes", "Size of the ledger directory's disk.", value=total)
        yield GaugeMetricFamily("magnetar_bookie_disk_free_bytes", "Free bytes on the ledger directory's disk.", value=free)
        # BookKeeper's names.
        yield GaugeMetricFamily(
            "bookie_SERVER_STATUS", "1 while the bookie is writable, 0 while it is read-only.", value=int(not b.read_only)
        )
        yield GaugeMetricFamily(
            "bookie_ledger_writable_dirs", "Ledger directories taking writes (0 while read-only).", value=int(not b.read_only)
        )
        yield GaugeMetricFamily(
            ledger_dir_usage_name(str(b.data_dir)), "Percent of the ledger directory's disk in use.",
            value=100.0 * (total - free) / total if total else 0.0,
        )
        yield GaugeMetricFamily("bookie_write_cache_size", "Bytes in the write cache.", value=b.storage.cache.active_bytes)
        yield _untyped("bookie_journal_JOURNAL_WRITE_BYTES", "Bytes written to the journal (counter).", j.bytes_written)
        yield _untyped("bookie_journal_JOURNAL_NUM_FORCE_WRITES", "Journal fsyncs (group commits) (counter).", j.fsyncs)
        if self.server is not None:
            yield _op_stats(
                "bookkeeper_server_ADD_ENTRY_REQUEST", "Add requests by outcome: count and latency in ms.",
                self.server.add_entry_request,
            )
            yield _op_stats(
                "bookkeeper_server_READ_ENTRY_REQUEST", "Read requests by outcome: count and latency in ms.",
                self.server.read_entry_request,
            )
