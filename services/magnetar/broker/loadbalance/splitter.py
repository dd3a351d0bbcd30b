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


class SplittingBroker(Protocol):
    """What :class:`OwnerSplitter` needs of the broker it runs in (BrokerService)."""

    broker_id: str

    async def bundle_owners(self, namespace: str, bundle: str = "") -> list[tuple[str, str]]: ...

    async def split_bundle(self, namespace: str, bundle: str, algorithm: str) -> list[str]: ...


class SplitPeers(Protocol):
    async def split_bundle(self, broker_id: str, namespace: str, bundle: str, algorithm: str) -> None:
        """Ask the owner ``broker_id`` to split one of its bundles."""


class OwnerSplitter:
    """The leader's :class:`BundleSplitter`: the bundle's owner splits it (Pulsar's
    ``splitAndOwnBundle`` runs on the owner), this broker itself or another one asked
    through ``peers``; a bundle nobody owns now is left (the next round sees it again)."""

    def __init__(self, broker: SplittingBroker, peers: SplitPeers | None) -> None:
        self._broker = broker
        self._peers = peers

    async def split_bundle(self, namespace: str, bundle: str, algorithm: str) -> None:
        owner = (await self._broker.bundle_owners(namespace, bundle))[0][1]
        if owner == self._broker.broker_id:
            await self._broker.split_bundle(namespace, bundle, algorithm)
        elif owner and self._peers is not None:
            await self._peers.split_bundle(owner, namespace, bundle, algorithm)


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
