"""A broker's load report (Pulsar's ``LocalBrokerData``) and its bundles' stats
(``NamespaceBundleStats``), as pure values with their JSON document.

The document keeps Pulsar's field names, so ``/admin/v2/broker-stats/load-report`` serves
it as stored. Resource usages are percentages of their limits.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    """Pulsar's ``ResourceUsage``: ``usage`` of ``limit`` (same unit)."""

    usage: float = 0.0
    limit: float = 0.0

    @property
    def percent(self) -> float:
        """``usage`` as a percentage of ``limit`` (0 without a limit)."""
        return 100.0 * self.usage / self.limit if self.limit > 0 else 0.0

    def doc(self) -> dict[str, float]:
        return {"usage": self.usage, "limit": self.limit}

    @staticmethod
    def of(doc: Any) -> ResourceUsage:
        if not isinstance(doc, dict):
            return ResourceUsage()
        return ResourceUsage(_num(doc.get("usage")), _num(doc.get("limit")))


@dataclass(frozen=True, slots=True)
class BundleStats:
    """One bundle's traffic on its owner (Pulsar's ``NamespaceBundleStats``)."""

    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    msg_throughput_in: float = 0.0
    """Bytes per second."""
    msg_throughput_out: float = 0.0
    topics: int = 0
    producer_count: int = 0
    consumer_count: int = 0

    @property
    def sessions(self) -> int:
        """Producers and consumers (what ``loadBalancerNamespaceBundleMaxSessions`` counts)."""
        return self.producer_count + self.consumer_count

    @property
    def msg_rate(self) -> float:
        return self.msg_rate_in + self.msg_rate_out

    @property
    def throughput(self) -> float:
        """Bytes per second in and out."""
        return self.msg_throughput_in + self.msg_throughput_out

    def doc(self) -> dict[str, Any]:
        return {
            "msgRateIn": self.msg_rate_in, "msgRateOut": self.msg_rate_out,
            "msgThroughputIn": self.msg_throughput_in, "msgThroughputOut": self.msg_throughput_out,
            "topics": self.topics, "producerCount": self.producer_count, "consumerCount": self.consumer_count,
        }

    @staticmethod
    def of(doc: Any) -> BundleStats:
        if not isinstance(doc, dict):
            return BundleStats()
        return BundleStats(
            _num(doc.get("msgRateIn")), _num(doc.get("msgRateOut")), _num(doc.get("msgThroughputIn")),
            _num(doc.get("msgThroughputOut")), int(_num(doc.get("topics"))), int(_num(doc.get("producerCount"))),
            int(_num(doc.get("consumerCount"))),
        )


@dataclass(frozen=True, slots=True)
class LoadReport:
    """What a broker reports of itself (Pulsar's ``LocalBrokerData``)."""

    broker: str
    """Its id (``host:port``)."""
    cpu: ResourceUsage = ResourceUsage()
    """This broker process's CPU, percent of one core summed over the machine's cores
    (limit: 100 × cores): brokers sharing a host each count their own process only."""
    memory: ResourceUsage = ResourceUsage()
    """Resident memory of the process, MiB, of the machine's (or cgroup's) memory."""
    bandwidth_in: ResourceUsage = ResourceUsage()
    """Bytes its topics took in per second, KiB/s, of ``load_balancer_override_broker_nic_speed_gbps``."""
    bandwidth_out: ResourceUsage = ResourceUsage()
    bundles: dict[str, BundleStats] = field(default_factory=dict)
    """Owned bundle (``tenant/namespace/0x…_0x…``) → its stats."""
    pulsar_service_url: str = ""
    last_update_ms: int = 0

    @property
    def msg_rate_in(self) -> float:
        return sum(b.msg_rate_in for b in self.bundles.values())

    @property
    def msg_rate_out(self) -> float:
        return sum(b.msg_rate_out for b in self.bundles.values())

    @property
    def msg_throughput_in(self) -> float:
        return sum(b.msg_throughput_in for b in self.bundles.values())

    @property
    def msg_throughput_out(self) -> float:
        return sum(b.msg_throughput_out for b in self.bundles.values())

    @property
    def topics(self) -> int:
        return sum(b.topics for b in self.bundles.values())

    def max_resource_usage(self, weights: ResourceWeights | None = None) -> float:
        """The largest weighted usage, percent (Pulsar's ``getMaxResourceUsageWithWeight``)."""
        w = weights or ResourceWeights()
        return max(
            self.cpu.percent * w.cpu, self.memory.percent * w.memory,
            self.bandwidth_in.percent * w.bandwidth_in, self.bandwidth_out.percent * w.bandwidth_out,
        )

    def changed_by(self, other: LoadReport) -> float:
        """How much this report differs from ``other``, percent (Pulsar's
        ``LocalBrokerData.update`` threshold check): the largest change of the resource
        usages (percentage points), and of the message rates, throughput, topics and
        bundles (relative)."""
        changes = [
            abs(self.cpu.percent - other.cpu.percent), abs(self.memory.percent - other.memory.percent),
            abs(self.bandwidth_in.percent - other.bandwidth_in.percent),
            abs(self.bandwidth_out.percent - other.bandwidth_out.percent),
        ]
        for mine, theirs in (
            (self.msg_rate_in + self.msg_rate_out, other.msg_rate_in + other.msg_rate_out),
            (self.msg_throughput_in + self.msg_throughput_out, other.msg_throughput_in + other.msg_throughput_out),
            (self.topics, other.topics), (len(self.bundles), len(other.bundles)),
        ):
            if mine != theirs:
                changes.append(100.0 * abs(mine - theirs) / max(abs(theirs), 1.0))
        return max(changes)

    def doc(self) -> dict[str, Any]:
        """The JSON document (Pulsar's LocalBrokerData field names)."""
        bundles = {name: stats.doc() for name, stats in sorted(self.bundles.items())}
        return {
            "loadReportType": "LocalBrokerData",
            "brokerId": self.broker,
            "pulsarServiceUrl": self.pulsar_service_url,
            "cpu": self.cpu.doc(), "memory": self.memory.doc(),
            "bandwidthIn": self.bandwidth_in.doc(), "bandwidthOut": self.bandwidth_out.doc(),
            "msgRateIn": self.msg_rate_in, "msgRateOut": self.msg_rate_out,
            "msgThroughputIn": self.msg_throughput_in, "msgThroughputOut": self.msg_throughput_out,
            "numTopics": self.topics, "numBundles": len(self.bundles),
            "numProducers": sum(b.producer_count for b in self.bundles.values()),
            "numConsumers": sum(b.consumer_count for b in self.bundles.values()),
            "bundles": sorted(self.bundles), "lastStats": bundles,
            "maxResourceUsage": self.max_resource_usage() / 100.0,
            "lastUpdate": self.last_update_ms,
        }

    @staticmethod
    def of(broker: str, doc: dict[str, Any]) -> LoadReport:
        """Read a stored document (missing or malformed fields count as zero)."""
        stats = doc.get("lastStats")
        bundles = {str(k): BundleStats.of(v) for k, v in stats.items()} if isinstance(stats, dict) else {}
        return LoadReport(
            broker, ResourceUsage.of(doc.get("cpu")), ResourceUsage.of(doc.get("memory")),
            ResourceUsage.of(doc.get("bandwidthIn")), ResourceUsage.of(doc.get("bandwidthOut")), bundles,
            str(doc.get("pulsarServiceUrl") or ""), int(_num(doc.get("lastUpdate"))),
        )

    def with_bundles(self, bundles: dict[str, BundleStats]) -> LoadReport:
        return replace(self, bundles=bundles)


@dataclass(frozen=True, slots=True)
class ResourceWeights:
    """Pulsar's ``loadBalancer{CPU,Memory,BandwithIn,BandwithOut}ResourceWeight``."""

    cpu: float = 1.0
    memory: float = 1.0
    bandwidth_in: float = 1.0
    bandwidth_out: float = 1.0


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
