"""Which bundles overloaded brokers give up (Pulsar's ``LoadSheddingStrategy``): pure
decisions over the brokers' reports; the leader asks the owners to unload them and the
next lookups place them on the least loaded brokers.

``ThresholdShedder`` (Pulsar's default): a broker whose usage (the largest of its weighted
CPU, memory and bandwidth usages, smoothed over rounds by
``loadBalancerHistoryResourcePercentage``) is more than
``loadBalancerBrokerThresholdShedderPercentage`` points over the brokers' average sheds
bundles worth (usage − average − threshold + 5) percent of its throughput, busiest first,
at least one. ``OverloadShedder``: a broker over
``loadBalancerBrokerOverloadedThresholdPercentage`` sheds its busiest bundle.

Both leave alone: a bundle unloaded within the grace period
(``loadBalancerSheddingGracePeriodMinutes``; so nothing moves twice in a row), a broker's
only bundle, a broker whose report predates its last shedding (it has not told yet what
it carries now), and an offload under
``loadBalancerBundleUnloadMinThroughputThreshold`` bytes/s.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field

from magnetar.broker.loadbalance.report import LoadReport, ResourceWeights

MARGIN_PERCENT = 5.0
"""Shed this many points more than the excess (Pulsar's ADDITIONAL_THRESHOLD_PERCENT_MARGIN)."""


@dataclass(frozen=True, slots=True)
class Unload:
    """Ask ``broker`` to unload ``bundle`` (``tenant/namespace/0x…_0x…``)."""

    broker: str
    bundle: str


@dataclass(slots=True)
class ShedderSettings:
    threshold_percent: float = 10.0
    overloaded_percent: float = 85.0
    history_fraction: float = 0.9
    min_throughput_bytes: float = 10 * 1024 * 1024
    weights: ResourceWeights = field(default_factory=ResourceWeights)


@dataclass(slots=True)
class ShedderInput:
    reports: Mapping[str, LoadReport]
    recently_unloaded: Set[str] = frozenset()
    """Bundles within their grace period."""
    unsettled: Set[str] = frozenset()
    """Brokers whose report predates their last shedding."""


class ThresholdShedder:
    """Keeps each broker's smoothed usage between rounds (Pulsar's ``brokerAvgResourceUsage``)."""

    def __init__(self, settings: ShedderSettings) -> None:
        self.settings = settings
        self.usage: dict[str, float] = {}

    def _smoothed(self, broker: str, now: float) -> float:
        before = self.usage.get(broker)
        h = self.settings.history_fraction
        value = now if before is None else before * h + now * (1 - h)
        self.usage[broker] = value
        return value

    def find(self, data: ShedderInput) -> list[Unload]:
        s = self.settings
        usage = {b: self._smoothed(b, r.max_resource_usage(s.weights)) for b, r in data.reports.items()}
        for gone in set(self.usage) - set(usage):
            del self.usage[gone]
        if len(usage) < 2:
            return []
        average = sum(usage.values()) / len(usage)
        out: list[Unload] = []
        for broker, used in sorted(usage.items()):
            if used <= average + s.threshold_percent or broker in data.unsettled:
                continue
            report = data.reports[broker]
            share = (used - average - s.threshold_percent + MARGIN_PERCENT) / 100.0
            out += _busiest(report, share, s.min_throughput_bytes, data.recently_unloaded, at_least_one=True)
        return out


class OverloadShedder:
    def __init__(self, settings: ShedderSettings) -> None:
        self.settings = settings

    def find(self, data: ShedderInput) -> list[Unload]:
        s = self.settings
        out: list[Unload] = []
        for broker, report in sorted(data.reports.items()):
            used = report.max_resource_usage(s.weights)
            if used <= s.overloaded_percent or broker in data.unsettled:
                continue
            share = (used - s.overloaded_percent + MARGIN_PERCENT) / 100.0
            out += _busiest(report, share, s.min_throughput_bytes, data.recently_unloaded, at_least_one=True)[:1]
        return out


def _busiest(
    report: LoadReport, share: float, min_bytes: float, recent: Set[str], *, at_least_one: bool,
) -> list[Unload]:
    """Bundles of ``report`` worth ``share`` of its throughput, busiest first."""
    if len(report.bundles) < 2:
        return []  # its only bundle would just move the whole load elsewhere
    target = (report.msg_throughput_in + report.msg_throughput_out) * share
    if target < min_bytes:
        return []
    chosen: list[Unload] = []
    marked = 0.0
    ranked = sorted(report.bundles.items(), key=lambda kv: (-kv[1].throughput, -kv[1].msg_rate, kv[0]))
    for name, stats in ranked[: len(ranked) - 1]:  # one always stays
        if name in recent:
            continue
        if marked + stats.throughput <= target or (at_least_one and not chosen):
            chosen.append(Unload(report.broker, name))
            marked += stats.throughput
        if marked >= target:
            break
    return chosen
