"""Where an unowned bundle goes (Pulsar's ``ModularLoadManagerStrategy``): pure
functions over the brokers' reports.

``least_long_term_message_rate`` is Pulsar's default (``LeastLongTermMessageRate``): the
broker with the lowest message rate in and out, counting the bundles placed on it since its
last report; a broker over ``loadBalancerBrokerOverloadedThresholdPercentage`` is taken
only when every broker is. ``least_resource_usage_with_weight`` picks the lowest weighted
resource usage instead (Pulsar's ``LeastResourceUsageWithWeight``, made for the
``ThresholdShedder``).

Ties (an idle cluster: every rate 0) go to ``preferred``, the broker answering the lookup,
then to the lowest id: one broker alone, or brokers without traffic, take bundles as a
broker without a load manager does, and the choice is the same on every call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from magnetar.broker.loadbalance.report import BundleStats, LoadReport, ResourceWeights

Score = Callable[[LoadReport, list[BundleStats]], float]


def message_rate_score(report: LoadReport, placed: list[BundleStats]) -> float:
    return report.msg_rate_in + report.msg_rate_out + sum(b.msg_rate for b in placed)


def resource_usage_score(weights: ResourceWeights) -> Score:
    def score(report: LoadReport, placed: list[BundleStats]) -> float:
        usage = report.max_resource_usage(weights)
        if placed and report.bandwidth_in.limit > 0:
            kib = sum(b.throughput for b in placed) / 1024.0
            usage = max(usage, 100.0 * (report.bandwidth_in.usage + kib) / report.bandwidth_in.limit)
        return usage
    return score


def select_broker(
    candidates: Iterable[str], reports: Mapping[str, LoadReport], *, preferred: str, score: Score,
    overloaded_percent: float, placed: Mapping[str, list[BundleStats]] | None = None,
    weights: ResourceWeights | None = None,
) -> str:
    """The broker a new bundle goes to.

    Args:
        candidates: the live brokers (non-empty; ``preferred`` among them).
        reports: their last reports; a candidate without one counts as unloaded.
        preferred: the broker answering the lookup (wins ties).
        score: lower is less loaded (:func:`message_rate_score`, :func:`resource_usage_score`).
        overloaded_percent: a broker whose largest resource usage is over this is taken
            only when all are.
        placed: bundles placed on each broker since its report was written.
    """
    names = sorted(set(candidates))
    if not names:
        return preferred
    placed = placed or {}
    scored: list[tuple[bool, float, bool, str]] = []
    for name in names:
        report = reports.get(name) or LoadReport(name)
        over = report.max_resource_usage(weights) > overloaded_percent
        scored.append((over, score(report, placed.get(name, [])), name != preferred, name))
    return min(scored)[3]
