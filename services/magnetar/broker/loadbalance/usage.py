"""What a broker measures for its load report: its own process's CPU and memory, and
its bundles' traffic from the served topics' meters.

Several brokers may share a machine (the tests, the chaos run, a laptop): the machine's
CPU would give each the others' load too, so each measures its own process (CPU time over
wall time, ``time.process_time``), as a share of the machine's cores, and its resident
memory of the machine's. Its network use is the bytes its topics took in and gave out
(the NIC is shared likewise), of ``load_balancer_override_broker_nic_speed_gbps``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from magnetar.broker.loadbalance.report import BundleStats, LoadReport, ResourceUsage


def bundle_stats(topics: Iterable[Any], bundle_key: Callable[[str], str]) -> dict[str, BundleStats]:
    """Each bundle's stats summed over its served topics, persistent or not (their
    ``meter_in``, ``meter_out``, ``producers`` and subscriptions' ``consumers``);
    ``bundle_key(topic name)``: ``tenant/namespace/range``."""
    sums: dict[str, list[float]] = {}
    for topic in topics:
        key = bundle_key(topic.name)
        acc = sums.setdefault(key, [0.0] * 7)
        m_in, m_out = topic.meter_in, topic.meter_out
        acc[0] += m_in.msg_rate
        acc[1] += m_out.msg_rate
        acc[2] += m_in.byte_rate
        acc[3] += m_out.byte_rate
        acc[4] += 1
        acc[5] += len(topic.producers)
        acc[6] += sum(len(s.consumers) for s in topic.subscriptions.values())
    return {k: BundleStats(a[0], a[1], a[2], a[3], int(a[4]), int(a[5]), int(a[6])) for k, a in sums.items()}


class ProcessUsage:
    """Samples this process's CPU (between two calls) and memory."""

    def __init__(self, nic_speed_gbps: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cores = os.cpu_count() or 1
        self._at = clock()
        self._cpu = time.process_time()
        self._nic_kib_s = nic_speed_gbps * 1e9 / 8 / 1024
        try:
            self._memory_mib = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**20
        except (ValueError, OSError):
            self._memory_mib = 0.0

    def cpu(self) -> ResourceUsage:
        """Percent of one core used since the previous call, of 100 × cores."""
        now, cpu = self._clock(), time.process_time()
        elapsed = now - self._at
        used = 100.0 * (cpu - self._cpu) / elapsed if elapsed > 0 else 0.0
        self._at, self._cpu = now, cpu
        return ResourceUsage(used, 100.0 * self._cores)

    def memory(self) -> ResourceUsage:
        try:
            with open("/proc/self/statm", encoding="ascii") as f:
                rss_pages = int(f.read().split()[1])
            rss = rss_pages * os.sysconf("SC_PAGE_SIZE") / 2**20
        except (OSError, ValueError, IndexError):
            rss = 0.0
        return ResourceUsage(rss, self._memory_mib)

    def report(self, broker: str, bundles: dict[str, BundleStats], pulsar_service_url: str = "") -> LoadReport:
        bytes_in = sum(b.msg_throughput_in for b in bundles.values())
        bytes_out = sum(b.msg_throughput_out for b in bundles.values())
        return LoadReport(
            broker, self.cpu(), self.memory(), ResourceUsage(bytes_in / 1024, self._nic_kib_s),
            ResourceUsage(bytes_out / 1024, self._nic_kib_s), bundles, pulsar_service_url, int(time.time() * 1000),
        )
