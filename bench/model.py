"""A capacity model of a Magnetar cluster from the CPU each component spends per message.

Every Magnetar service is one Python process with one event loop: a process uses at most
about one core (gRPC's C threads add a little), whatever the machine has. A message costs
each component a measured number of CPU µs (``bench/profile.py`` and ``bench/scaleout.py``
measure them: broker, the bookies together, the clients). So a cluster's throughput is the
smallest of:

- brokers: ``broker_processes / broker_us`` (each broker process at most one core);
- bookies: ``bookie_processes / bookies_us`` (``bookies_us`` is what all bookies together
  spend per message, so it already counts the write quorum's copies; each bookie holds
  ``Qw / E`` of the adds when ensembles are spread evenly);
- clients: ``client_processes / clients_us``;
- machines: ``cores / (sum of the per-message costs of the processes placed on them)``, when
  several processes share cores (on this project's 2-core machine, all of them do).

ZooKeeper is not on the data path (lookups, ledger rolls and lease pings only) and the disk
is not a limit while the journal's group commit takes one fsync for many adds (what
``bench/bookie_add.py`` measures); both are left out. docs/performance.md ("A model of a
cluster") applies it to real machines and checks it against the 1-, 2- and 3-broker runs
of ``bench/scaleout.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

CORE_PER_PROCESS = 1.0
"""What one event-loop process can use, in cores."""


@dataclass(frozen=True)
class Costs:
    """CPU µs per message of each kind of process, summed over the processes of that kind."""

    broker_us: float
    bookies_us: float
    clients_us: float

    @property
    def total_us(self) -> float:
        return self.broker_us + self.bookies_us + self.clients_us


@dataclass(frozen=True)
class Cluster:
    brokers: int
    bookies: int
    clients: int
    cores: float | None = None
    """Cores all of them share (one machine); None: each process has a core of its own."""


def limits(costs: Costs, cluster: Cluster) -> dict[str, float]:
    """Messages/s each resource allows."""
    found = {
        "brokers": cluster.brokers * CORE_PER_PROCESS / costs.broker_us * 1e6,
        "bookies": cluster.bookies * CORE_PER_PROCESS / costs.bookies_us * 1e6,
        "clients": cluster.clients * CORE_PER_PROCESS / costs.clients_us * 1e6,
    }
    if cluster.cores is not None:
        found["shared cores"] = cluster.cores / costs.total_us * 1e6
    return found


def throughput(costs: Costs, cluster: Cluster) -> tuple[float, str]:
    """(msgs/s, the resource that binds)."""
    found = limits(costs, cluster)
    bound = min(found, key=found.__getitem__)
    return found[bound], bound
