"""Prometheus metrics of a bookie, read from the core's own counters at scrape time
(nothing is counted twice and the add path pays nothing for them)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from magnetar.bookie.bookie import Bookie


class BookieCollector(Collector):
    def __init__(self, bookie: Bookie) -> None:
        self.bookie = bookie

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
