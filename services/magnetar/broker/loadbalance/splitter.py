"""Hot bundles to split (Pulsar's ``BundleSplitterTask``): a pure choice over the reports,
and the :class:`BundleSplitter` the leader asks to split them.

A bundle is hot when it has more than ``loadBalancerNamespaceBundleMaxTopics`` topics,
``…MaxSessions`` producers and consumers, ``…MaxMsgRate`` messages/s in and out or
``…MaxBandwidthMbytes`` MB/s in and out; one with a single topic cannot be split, and a
namespace stops splitting at ``loadBalancerNamespaceMaximumBundles`` bundles.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from magnetar.broker.loadbalance.report import LoadReport


class BundleSplitter(Protocol):
    """Splits a bundle of a namespace on its owner (``algorithm``: Pulsar's
    ``range_equally_divide``, ``topic_count_equally_divide`` …)."""

    async def split_bundle(self, namespace: str, bundle: str, algorithm: str) -> None: ...


@dataclass(frozen=True, slots=True)
class SplitLimits:
    max_topics: int = 1000
    max_sessions: int = 1000
    max_msg_rate: float = 30000.0
    max_bandwidth_mbytes: float = 100.0
    max_bundles: int = 128


def hot_bundles(reports: Iterable[LoadReport], limits: SplitLimits) -> list[tuple[str, str]]:
    """``(namespace, bundle range)`` of each bundle to split, in a stable order."""
    bundles_of: dict[str, int] = {}
    reports = list(reports)
    for report in reports:
        for name in report.bundles:
            ns, _ = _split_name(name)
            bundles_of[ns] = bundles_of.get(ns, 0) + 1
    out: list[tuple[str, str]] = []
    for report in sorted(reports, key=lambda r: r.broker):
        for name, stats in sorted(report.bundles.items()):
            if stats.topics < 2:
                continue
            hot = (stats.topics > limits.max_topics or stats.sessions > limits.max_sessions
                   or stats.msg_rate > limits.max_msg_rate
                   or stats.throughput / (1024 * 1024) > limits.max_bandwidth_mbytes)
            ns, bundle = _split_name(name)
            if hot and bundles_of.get(ns, 0) < limits.max_bundles:
                out.append((ns, bundle))
                bundles_of[ns] += 1  # each split adds one
    return out


def _split_name(name: str) -> tuple[str, str]:
    ns, _, bundle = name.rpartition("/")
    return ns, bundle
