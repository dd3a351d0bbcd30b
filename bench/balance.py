"""Load balancing across 3 brokers (``make bench-balance``; docs/load-balancing.md).

The chaos run's cluster (tests/chaos/cluster.py): each broker and bookie in a network
namespace of its own when this machine allows (root, ``ip``, ``nsenter``, ``iptables``),
else everything on 127.0.0.1 (printed). 3 brokers with the load manager's intervals
short, 2 bookies (E=Qw=Qa=2), one namespace of ``--bundles`` bundles.

Skew first: every client looks its topic up through broker-1 only while no broker has
reported traffic, so broker-1 takes every bundle (placement's tie goes to the broker
asked). Then one producer and one Exclusive consumer per topic send and receive
``--rate`` messages/s each, numbered. The elected leader sheds bundles of the broker over
the average (ThresholdShedder, on each broker's own process CPU) and the clients' new
lookups (through broker-1 still) place them on the least loaded brokers.

Prints, every ``--interval`` s, each broker's CPU (percent of one core), message rate and
bundles from its load report; the convergence time (traffic start until, for 3 samples
running, no broker is over the average + threshold and every broker carries traffic); and
checks per topic that nothing acknowledged was lost or reordered (duplicates of a
redelivery are counted, not failed) and that every client followed its topic (each topic
received messages in the last seconds). Prints the verdict and the load average at start
and end; writes bench/results/balance.json.

    python bench/balance.py [--topics 48 --rate 20 --max-converge-s 180]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "chaos"))
from cluster import ChaosCluster, ClusterSettings  # noqa: E402

import magnetar.asyncio as mg  # noqa: E402
from magnetar.broker.loadbalance.report import LoadReport  # noqa: E402
from magnetar.common.bundles import bundle_of, bundle_ranges  # noqa: E402
from magnetar.metadata.loadbalance import ZkLoadReportStore  # noqa: E402
from magnetar.metadata.ownership import ZkOwnershipStore  # noqa: E402
from magnetar.metadata.session import ZkSession  # noqa: E402

NAMESPACE = ("public", "default")


def broker_settings(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "bundles_per_namespace": args.bundles, "stats_interval_s": 1.0,
        "load_balancer_host_usage_check_interval_s": 1.0, "load_balancer_report_update_threshold_percentage": 5.0,
        "load_balancer_shedding_interval_s": args.shedding_interval_s,
        "load_balancer_shedding_grace_period_s": args.grace_s,
        "load_balancer_history_resource_percentage": 0.5,
        "load_balancer_bundle_unload_min_throughput_threshold": 0.0,
        "load_balancer_broker_threshold_shedder_percentage": args.threshold,
        # Memory is each process's RSS of the whole machine's: the same for every broker here.
        "load_balancer_memory_resource_weight": 0.0,
    }


def topics_over_bundles(count: int, bundles: int) -> list[str]:
    """``count`` topic names spread evenly over the namespace's bundles."""
    per: dict[str, list[str]] = {b: [] for b in bundle_ranges(bundles)}
    i = 0
    while min(len(v) for v in per.values()) < -(-count // bundles):
        name = f"persistent://public/default/balance-{i}"
        per[bundle_of(name, bundles)].append(name)
        i += 1
    rounds = list(zip(*per.values(), strict=False))
    return [t for row in rounds for t in row][:count]


class Workload:
    def __init__(self, topics: list[str], rate: float) -> None:
        self.topics = topics
        self.rate = rate
        self.sent = dict.fromkeys(topics, 0)
        self.received: dict[str, list[int]] = {t: [] for t in topics}
        self.last_received: dict[str, float] = dict.fromkeys(topics, 0.0)
        self.stop = asyncio.Event()
        self.errors: list[str] = []

    async def run_topic(self, client: Any, topic: str, ready: asyncio.Event) -> None:
        producer = await client.create_producer(topic, batching_enabled=False, send_timeout_millis=0)
        consumer = await client.subscribe(topic, "bench", consumer_type=mg.ConsumerType.Exclusive)
        await ready.wait()  # every topic attached (the skew is made) before traffic

        async def produce() -> None:
            period = 1.0 / self.rate
            next_at = time.monotonic()
            while not self.stop.is_set():
                await producer.send(self.sent[topic].to_bytes(8, "big") + bytes(92))
                self.sent[topic] += 1
                next_at += period
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))

        async def consume() -> None:
            while not self.stop.is_set() or len(set(self.received[topic])) < self.sent[topic]:
                try:
                    msg = await consumer.receive(2_000)
                except mg.Timeout:
                    if self.stop.is_set() and time.monotonic() - self.last_received[topic] > 30:
                        self.errors.append(f"{topic}: stuck at {len(set(self.received[topic]))} of {self.sent[topic]}")
                        return
                    continue
                self.received[topic].append(int.from_bytes(msg.data()[:8], "big"))
                self.last_received[topic] = time.monotonic()
                await consumer.acknowledge(msg)

        try:
            await asyncio.gather(produce(), consume())
        finally:
            await producer.close()
            await consumer.close()


async def sample(session: ZkSession, brokers: list[str], bundles: int) -> dict[str, Any]:
    reports = await ZkLoadReportStore(session).read_all()
    owners = ZkOwnershipStore(session)
    owned = await asyncio.gather(*(owners.owner(*NAMESPACE, b) for b in bundle_ranges(bundles)))
    row: dict[str, Any] = {}
    for broker in brokers:
        doc = reports.get(broker)
        report = LoadReport.of(broker, doc) if doc else LoadReport(broker)
        row[broker] = {
            "cpu": round(report.cpu.usage, 1), "usage": round(report.max_resource_usage(), 1),
            "msg_rate": round(report.msg_rate_in + report.msg_rate_out, 1),
            "bundles": sum(1 for o in owned if o == broker),
        }
    return row


def converged(row: dict[str, Any], threshold: float) -> bool:
    usages = [v["usage"] for v in row.values()]
    average = sum(usages) / len(usages)
    return all(u <= average + threshold for u in usages) and all(v["msg_rate"] > 0 for v in row.values())


async def drive(cluster: ChaosCluster, args: argparse.Namespace) -> dict[str, Any]:
    brokers = [m.address for m in cluster.of_kind("broker")]
    topics = topics_over_bundles(args.topics, args.bundles)
    work = Workload(topics, args.rate)
    session = ZkSession(cluster.zk_connect, cluster.zk_root, 10.0)
    await session.start()
    samples: list[dict[str, Any]] = []
    result: dict[str, Any] = {"brokers": brokers, "topics": len(topics), "rate_per_topic": args.rate}
    try:
        async with mg.Client(brokers[0]) as client:  # every lookup asks broker-1
            ready = asyncio.Event()
            tasks = [asyncio.create_task(work.run_topic(client, t, ready)) for t in topics]
            while True:  # all attached: every bundle with a topic is owned
                first = await sample(session, brokers, args.bundles)
                if sum(v["bundles"] for v in first.values()) >= min(args.bundles, len(topics)):
                    break
                await asyncio.sleep(0.2)
            await asyncio.sleep(1.0)  # the last attachments
            ready.set()
            start = time.monotonic()
            print(f"skew: bundles per broker {[first[b]['bundles'] for b in brokers]}", flush=True)
            result["initial_bundles"] = {b: first[b]["bundles"] for b in brokers}
            streak, converged_at = 0, None
            deadline = start + args.max_converge_s
            while time.monotonic() < deadline:
                await asyncio.sleep(args.interval)
                row = await sample(session, brokers, args.bundles)
                t = time.monotonic() - start
                samples.append({"t": round(t, 1), **row})
                cells = "  ".join(f"{b}: cpu {v['cpu']:5.1f}% rate {v['msg_rate']:7.1f}/s bundles {v['bundles']:2d}"
                                  for b, v in row.items())
                print(f"{t:6.1f}s  {cells}", flush=True)
                streak = streak + 1 if converged(row, args.threshold) else 0
                if streak >= 3:
                    converged_at = samples[-3]["t"]
                    break
            result["converged_s"] = converged_at
            await asyncio.sleep(args.interval)  # traffic after the last move
            tail_from = time.monotonic() - args.interval
            work.stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 120)
    finally:
        await session.close()
    lost = reordered = duplicates = 0
    for topic in topics:
        got = work.received[topic]
        firsts = list(dict.fromkeys(got))
        duplicates += len(got) - len(firsts)
        lost += work.sent[topic] - len(set(got) & set(range(work.sent[topic])))
        reordered += sum(1 for a, b in zip(firsts, firsts[1:], strict=False) if b < a)
    stuck = [t for t in topics if work.last_received[t] < tail_from] + work.errors
    result.update(samples=samples, sent=sum(work.sent.values()), lost=lost, reordered=reordered,
                  duplicates=duplicates, stuck=stuck, final_bundles={b: samples[-1][b]["bundles"] for b in brokers}
                  if samples else {})
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=48)
    parser.add_argument("--rate", type=float, default=20.0, help="messages/s per topic")
    parser.add_argument("--bundles", type=int, default=16)
    parser.add_argument("--threshold", type=float, default=5.0,
                        help="ThresholdShedder's points over the average (Pulsar's default 10; each broker's CPU is a "
                             "share of all cores, so on 2 cores a busy broker here is ~20 points)")
    parser.add_argument("--shedding-interval-s", type=float, default=5.0)
    parser.add_argument("--grace-s", type=float, default=30.0)
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--max-converge-s", type=float, default=180.0, help="the target: converged within this")
    parser.add_argument("--netns", choices=("auto", "off"), default="auto")
    args = parser.parse_args()
    load_start = os.getloadavg()
    print(f"load average at start: {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}", flush=True)
    settings = ClusterSettings(bookies=2, brokers=3, auditors=0, gateway=False, ensemble_size=2, write_quorum=2,
                               ack_quorum=2, small_disks=False, use_netns=False if args.netns == "off" else None,
                               broker_config=broker_settings(args))
    with tempfile.TemporaryDirectory(prefix="bench-balance-") as work_dir:
        cluster = ChaosCluster(Path(work_dir), settings)
        if cluster.lab is None:
            print(f"network namespaces unavailable ({cluster.netns_reason or 'turned off'}): all on 127.0.0.1", flush=True)
        else:
            print("each broker and bookie in a network namespace of its own", flush=True)
        with cluster:
            result = asyncio.run(drive(cluster, args))
    load_end = os.getloadavg()
    result.update(load_average_start=load_start, load_average_end=load_end, netns=settings.use_netns,
                  date=time.strftime("%Y-%m-%d %H:%M:%S"), args=vars(args))
    checks = {
        f"converged within {args.max_converge_s:g} s": result["converged_s"] is not None,
        "nothing lost": result["lost"] == 0,
        "nothing reordered": result["reordered"] == 0,
        "no client stuck": not result["stuck"],
    }
    print(f"sent {result['sent']} messages on {result['topics']} topics; bundles per broker at start "
          f"{result['initial_bundles']}, at end {result['final_bundles']}")
    print(f"converged after: {result['converged_s']} s; lost {result['lost']}, reordered {result['reordered']}, "
          f"duplicates (redelivered) {result['duplicates']}, stuck {result['stuck'][:5]}")
    for name, ok in checks.items():
        print(f"  {name}: {'pass' if ok else 'FAIL'}")
    print(f"load average at end: {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")
    verdict = all(checks.values())
    print(f"verdict: {'PASS' if verdict else 'FAIL'}")
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "balance.json").write_text(json.dumps(result, indent=2))
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main())
