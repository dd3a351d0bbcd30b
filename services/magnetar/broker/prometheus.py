"""Pulsar's Prometheus metrics, with Pulsar's names and labels, made from the topic
stats the broker already keeps (:mod:`magnetar.broker.stats`) at scrape time.

As Pulsar's ``NamespaceStatsAggregator``: with ``topic_level`` (Pulsar's
``exposeTopicLevelMetricsInPrometheus``) each topic has its own series (labels
``cluster``, ``namespace``, ``topic``; subscription series add ``subscription``) and the
namespace only its ``pulsar_topics_count``; without it every figure is summed per
namespace (``cluster``, ``namespace``) and there are no subscription series. The
broker-wide ``pulsar_broker_*`` sums (label ``cluster``) are always there, so a broker
without topics still shows on the dashboards.

Every Pulsar topic figure is a gauge in Pulsar's exposition, the ``_total`` ones too;
they are here as well, so a query written for Pulsar reads the same series. Nothing here
runs per message: the figures are counters and rates the topics keep anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from magnetar.broker.stats import TopicStats

TOPIC_GAUGES: dict[str, str] = {
    "pulsar_subscriptions_count": "Subscriptions of the topic(s).",
    "pulsar_producers_count": "Connected producers.",
    "pulsar_consumers_count": "Connected consumers.",
    "pulsar_rate_in": "Messages published per second (last stats interval).",
    "pulsar_rate_out": "Messages delivered to consumers per second (last stats interval).",
    "pulsar_throughput_in": "Bytes published per second (last stats interval).",
    "pulsar_throughput_out": "Bytes delivered to consumers per second (last stats interval).",
    "pulsar_in_messages_total": "Messages published since the topic was loaded on this broker.",
    "pulsar_in_bytes_total": "Bytes published since the topic was loaded on this broker.",
    "pulsar_out_messages_total": "Messages delivered since the topic was loaded on this broker.",
    "pulsar_out_bytes_total": "Bytes delivered since the topic was loaded on this broker.",
    "pulsar_storage_size": "Bytes stored in bookies, every copy counted (logical size x write quorum).",
    "pulsar_storage_logical_size": "Bytes of the topic's ledgers, one copy.",
    "pulsar_storage_backlog_size": "Estimated bytes after the slowest durable subscription's mark-delete position.",
    "pulsar_msg_backlog": "Entries not acknowledged, summed over the subscriptions.",
    "pulsar_storage_write_rate": "Messages written to storage per second (last stats interval).",
    "pulsar_storage_read_rate": "Messages read from storage for consumers per second (last stats interval).",
    "pulsar_subscription_delayed": "Delayed messages not due yet, summed over the subscriptions.",
}
"""The per-topic (or per-namespace) figures, in Pulsar's names."""

SUBSCRIPTION_GAUGES: dict[str, str] = {
    "pulsar_subscription_back_log": "Entries of the subscription not acknowledged.",
    "pulsar_subscription_delayed": "Delayed messages of the subscription not due yet.",
    "pulsar_subscription_msg_rate_out": "Messages delivered per second (last stats interval).",
    "pulsar_subscription_msg_throughput_out": "Bytes delivered per second (last stats interval).",
    "pulsar_subscription_msg_rate_redeliver": "Messages its consumers failed (nack, ack timeout, redeliver-all) per second.",
    "pulsar_subscription_msg_ack_rate": "Messages its consumers acknowledged per second (last stats interval).",
    "pulsar_subscription_unacked_messages": "Messages delivered and not acknowledged yet.",
    "pulsar_subscription_blocked_on_unacked_messages": "1 while a consumer holds its maximum of unacked messages.",
    "pulsar_subscription_consumers_count": "Connected consumers of the subscription.",
    "pulsar_out_messages_total": "Messages delivered to the subscription's consumers.",
    "pulsar_out_bytes_total": "Bytes delivered to the subscription's consumers.",
}

BROKER_GAUGES: dict[str, str] = {
    "pulsar_broker_topics_count": "Topics served by this broker.",
    "pulsar_broker_subscriptions_count": "Subscriptions of the topics served by this broker.",
    "pulsar_broker_producers_count": "Producers connected to this broker.",
    "pulsar_broker_consumers_count": "Consumers connected to this broker.",
    "pulsar_broker_rate_in": "Messages published per second to this broker.",
    "pulsar_broker_rate_out": "Messages delivered per second by this broker.",
    "pulsar_broker_throughput_in": "Bytes published per second to this broker.",
    "pulsar_broker_throughput_out": "Bytes delivered per second by this broker.",
    "pulsar_broker_storage_size": "Bytes stored in bookies for this broker's topics, every copy counted.",
    "pulsar_broker_storage_logical_size": "Bytes of this broker's topics' ledgers, one copy.",
    "pulsar_broker_storage_write_rate": "Messages written to storage per second by this broker.",
    "pulsar_broker_storage_read_rate": "Messages read from storage per second by this broker.",
    "pulsar_broker_msg_backlog": "Entries not acknowledged over the subscriptions of this broker's topics.",
}

LEASE_GAUGES: dict[str, str] = {
    "pulsar_broker_lease_valid": (
        "1 while this broker's ZooKeeper session lease is held and it serves topics; "
        "0 after the lease ran out or the session was lost (it serves nothing)."
    ),
    "pulsar_broker_lease_remaining_seconds": "Seconds the lease has left (negative: expired that long ago).",
    "pulsar_broker_lease_lost_total": "Times this broker stopped serving because its lease ran out or its session was lost.",
}
"""Not Pulsar's (its brokers have no lease): named as a Pulsar user would look for them."""

_BROKER_FROM_TOPIC = {
    "pulsar_broker_subscriptions_count": "pulsar_subscriptions_count",
    "pulsar_broker_producers_count": "pulsar_producers_count",
    "pulsar_broker_consumers_count": "pulsar_consumers_count",
    "pulsar_broker_rate_in": "pulsar_rate_in",
    "pulsar_broker_rate_out": "pulsar_rate_out",
    "pulsar_broker_throughput_in": "pulsar_throughput_in",
    "pulsar_broker_throughput_out": "pulsar_throughput_out",
    "pulsar_broker_storage_size": "pulsar_storage_size",
    "pulsar_broker_storage_logical_size": "pulsar_storage_logical_size",
    "pulsar_broker_storage_write_rate": "pulsar_storage_write_rate",
    "pulsar_broker_storage_read_rate": "pulsar_storage_read_rate",
    "pulsar_broker_msg_backlog": "pulsar_msg_backlog",
}


@dataclass(frozen=True, slots=True)
class TopicSample:
    """One topic's stats as the scrape took them, with what :class:`TopicStats` lacks."""

    stats: TopicStats
    write_quorum: int = 1
    """Copies of each entry in bookies (``pulsar_storage_size`` counts them all)."""
    delayed: Mapping[str, int] = field(default_factory=dict)
    """Delayed messages not due yet, by subscription."""


@dataclass(frozen=True, slots=True)
class LeaseSample:
    valid: bool
    remaining_s: float
    lost: int


def namespace_of(topic: str) -> str:
    """``tenant/namespace`` of ``persistent://tenant/namespace/topic``."""
    rest = topic.split("://", 1)[-1]
    return rest.rsplit("/", 1)[0]


def topic_figures(sample: TopicSample) -> dict[str, float]:
    """A topic's values of :data:`TOPIC_GAUGES` (Pulsar's ``TopicStats`` of one topic)."""
    t = sample.stats
    return {
        "pulsar_subscriptions_count": len(t.subscriptions),
        "pulsar_producers_count": len(t.publishers),
        "pulsar_consumers_count": sum(s.consumers for s in t.subscriptions),
        "pulsar_rate_in": t.msg_rate_in,
        "pulsar_rate_out": t.msg_rate_out,
        "pulsar_throughput_in": t.msg_throughput_in,
        "pulsar_throughput_out": t.msg_throughput_out,
        "pulsar_in_messages_total": t.msg_in_counter,
        "pulsar_in_bytes_total": t.bytes_in_counter,
        "pulsar_out_messages_total": t.msg_out_counter,
        "pulsar_out_bytes_total": t.bytes_out_counter,
        "pulsar_storage_size": t.storage_size * sample.write_quorum,
        "pulsar_storage_logical_size": t.storage_size,
        "pulsar_storage_backlog_size": t.backlog_size,
        "pulsar_msg_backlog": sum(s.backlog for s in t.subscriptions),
        "pulsar_storage_write_rate": t.msg_rate_in,
        "pulsar_storage_read_rate": t.msg_rate_out,
        "pulsar_subscription_delayed": sum(sample.delayed.values()),
    }


def _escape(value: str) -> str:
    """A label value as the text format writes it."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


class _Exposition:
    """Series by metric name (the text format wants a metric's lines together), written
    straight as text: a scrape of 10,000 topics makes a quarter of a million series."""

    def __init__(self) -> None:
        self.lines: dict[str, list[str]] = {}
        self.docs: dict[str, str] = {}

    def add(self, name: str, doc: str, labels: str, value: float) -> None:
        lines = self.lines.get(name)
        if lines is None:
            lines = self.lines[name] = []
            self.docs[name] = doc
        lines.append(f"{name}{{{labels}}} {_number(value)}\n")

    def text(self) -> str:
        out = []
        for name, lines in self.lines.items():
            out.append(f"# HELP {name} {self.docs[name]}\n# TYPE {name} gauge\n")
            out.extend(lines)
        return "".join(out)


def pulsar_exposition(
    cluster: str, topics: Iterable[TopicSample], topic_level: bool = True, lease: LeaseSample | None = None,
) -> str:
    """Pulsar's metrics of a broker serving ``topics``, in Prometheus's text format (0.0.4).

    Args:
        cluster: the ``cluster`` label (the broker's ``cluster_name``).
        topics: each served topic's sample.
        topic_level: series per topic (and subscription), else per namespace.
        lease: this broker's lease, for the ``pulsar_broker_lease_*`` gauges.
    """
    out = _Exposition()
    cl = f'cluster="{_escape(cluster)}"'
    broker = dict.fromkeys(BROKER_GAUGES, 0.0)
    broker["pulsar_broker_topics_count"] = 0
    namespaces: dict[str, dict[str, float]] = {}
    topic_counts: dict[str, int] = {}
    topic_only = [n for n in TOPIC_GAUGES if n not in SUBSCRIPTION_GAUGES]  # Pulsar has the rest per subscription
    for sample in topics:
        t = sample.stats
        ns = namespace_of(t.topic)
        figures = topic_figures(sample)
        broker["pulsar_broker_topics_count"] += 1
        for b, name in _BROKER_FROM_TOPIC.items():
            broker[b] += figures[name]
        topic_counts[ns] = topic_counts.get(ns, 0) + 1
        if not topic_level:
            sums = namespaces.setdefault(ns, dict.fromkeys(TOPIC_GAUGES, 0.0))
            for name, value in figures.items():
                sums[name] += value
            continue
        labels = f'{cl},namespace="{_escape(ns)}",topic="{_escape(t.topic)}"'
        for name in topic_only:
            out.add(name, TOPIC_GAUGES[name], labels, figures[name])
        for s in t.subscriptions:
            sub = f'{labels},subscription="{_escape(s.name)}"'
            for name, value in (
                ("pulsar_subscription_back_log", s.backlog),
                ("pulsar_subscription_delayed", sample.delayed.get(s.name, 0)),
                ("pulsar_subscription_msg_rate_out", s.msg_rate_out),
                ("pulsar_subscription_msg_throughput_out", s.msg_throughput_out),
                ("pulsar_subscription_msg_rate_redeliver", s.msg_rate_redeliver),
                ("pulsar_subscription_msg_ack_rate", s.message_ack_rate),
                ("pulsar_subscription_unacked_messages", s.unacked),
                ("pulsar_subscription_blocked_on_unacked_messages", 1 if s.blocked_consumers else 0),
                ("pulsar_subscription_consumers_count", s.consumers),
                ("pulsar_out_messages_total", s.msg_out_counter),
                ("pulsar_out_bytes_total", s.bytes_out_counter),
            ):
                out.add(name, SUBSCRIPTION_GAUGES[name], sub, value)
    for ns, count in topic_counts.items():
        out.add("pulsar_topics_count", "Topics of the namespace served by this broker.",
                f'{cl},namespace="{_escape(ns)}"', count)
    for ns, sums in namespaces.items():
        labels = f'{cl},namespace="{_escape(ns)}"'
        for name, value in sums.items():
            # Pulsar labels the namespace's backlog with the cluster it is kept for.
            extra = ',remote_cluster="local"' if name == "pulsar_msg_backlog" else ""
            out.add(name, TOPIC_GAUGES[name], labels + extra, value)
    for name, value in broker.items():
        out.add(name, BROKER_GAUGES[name], cl, value)
    if lease is not None:
        out.add("pulsar_broker_lease_valid", LEASE_GAUGES["pulsar_broker_lease_valid"], cl, int(lease.valid))
        out.add("pulsar_broker_lease_remaining_seconds", LEASE_GAUGES["pulsar_broker_lease_remaining_seconds"],
                cl, lease.remaining_s)
        out.add("pulsar_broker_lease_lost_total", LEASE_GAUGES["pulsar_broker_lease_lost_total"], cl, lease.lost)
    return out.text()
