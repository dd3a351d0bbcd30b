"""Idle SDK clients (issue 35): what N idle consumers cost the process that holds them.

Starts a real ZooKeeper, one bookie and one broker (E=1 Qw=1 Qa=1, a 30 s ZooKeeper
session: the bench is about the client process, not the storage, and a broker starved by
other work on a shared machine should not drop its topics meanwhile), creates ``--consumers`` (10,000) non-partitioned topics
through the admin API (the broker loads each; ``--domain non-persistent``: none, such a
topic is made by its first consumer, in the broker's memory only), then attaches one SDK consumer
(``aio.Client.subscribe``, Exclusive) to each topic, all in this one process and one
``aio.Client``: N topics with one consumer each, not one topic's N subscriptions, as the
issue's idle topics are. The first 100 and the last 100 attach one at a time and each is
timed (subscribe call to its return); the ones between attach ``--concurrency`` at a
time. Then nothing happens for ``--idle-seconds`` (30) and the process's CPU time
(/proc/self/stat, every thread: asyncio's and gRPC's) over that window is its idle cost.

Targets: idle CPU <= 2 % of one core; the last 100 attach as fast as the first 100
(their p50 at most 1.2 times the first 100's, or 1 ms more, whichever is larger).
Prints the verdict, the load average at start and end; writes bench/results/idle_clients.json.

    python bench/idle_clients.py [--consumers 10000] [--idle-seconds 30] [--concurrency 32]
                                 [--domain persistent|non-persistent]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from magnetar.client import aio
from magnetar.client.admin import AdminClient
from magnetar.common.errors import AlreadyExists, MagnetarError
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.testing.processes import BookieProcess, BrokerProcess

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procstats import cpu_seconds  # noqa: E402

TARGET_IDLE_CPU_PCT = 2.0
ATTACH_RATIO = 1.2
ATTACH_SLACK_MS = 1.0
TIMED = 100  # attaches timed one by one at the start and at the end
NAMESPACE = "idle/bench"
PROGRESS_EVERY = 1000


def raise_nofile() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def summary(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(ms), 2), "max_ms": round(max(ms), 2)} if ms else {}


async def run_bench(url: str, n: int, idle_s: float, concurrency: int, domain: str) -> dict[str, Any]:
    topics = [f"{domain}://{NAMESPACE}/idle-{i:06d}" for i in range(n)]
    async with AdminClient(url, 120) as admin:
        for create in (lambda: admin.create_tenant(NAMESPACE.split("/")[0]), lambda: admin.create_namespace(NAMESPACE)):
            try:
                await create()
            except AlreadyExists:
                pass
        started = time.monotonic()
        todo = iter(topics if domain == "persistent" else [])  # a non-persistent topic is made on subscribing

        async def creator() -> None:
            for t in todo:
                try:
                    await admin.create_topic(t)
                except AlreadyExists:
                    pass

        await asyncio.gather(*(creator() for _ in range(concurrency)))
        created_s = time.monotonic() - started
    if domain == "persistent":
        print(f"  {n:,} topics created in {created_s:.1f} s", flush=True)

    client = aio.Client(url, operation_timeout_seconds=120)
    consumers: list[aio.Consumer] = []
    failures: dict[str, int] = {}

    async def attach(topic: str) -> float:
        """The time of the attach that worked (a failed one, e.g. a lookup timed out on
        a starved broker, is counted in the result and tried again, up to 3 times)."""
        for attempt in range(3):
            t0 = time.perf_counter()
            try:
                consumers.append(await client.subscribe(topic, "idle"))
            except MagnetarError as exc:
                failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1
                if attempt == 2:
                    raise
                continue
            return (time.perf_counter() - t0) * 1000
        raise AssertionError("unreachable")

    try:
        head = min(TIMED, n)
        tail = min(TIMED, n - head)
        first = [await attach(t) for t in topics[:head]]
        middle = iter(topics[head : n - tail])
        started = time.monotonic()

        async def attacher() -> None:
            for t in middle:
                await attach(t)
                if len(consumers) % PROGRESS_EVERY == 0:
                    took = time.monotonic() - started
                    print(f"    {len(consumers):,} attached, {took:.1f} s", flush=True)

        await asyncio.gather(*(attacher() for _ in range(concurrency)))
        middle_s = time.monotonic() - started
        last = [await attach(t) for t in topics[n - tail :]]
        print(f"  {len(consumers):,} consumers attached (the middle {n - head - tail:,} in {middle_s:.1f} s)",
              flush=True)  # fmt: skip

        await asyncio.sleep(1.0)  # let the last subscribes' permits and answers settle
        pid = os.getpid()
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        await asyncio.sleep(idle_s)
        cpu1, t1 = cpu_seconds(pid), time.monotonic()
        idle_pct = (cpu1 - cpu0) / (t1 - t0) * 100
    finally:
        await client.close()
    return {
        "consumers": len(consumers), "attach_failures": failures, "topics_created_s": round(created_s, 1),
        "attach_first": summary(first), "attach_last": summary(last),
        "attach_middle_per_s": round((n - head - tail) / middle_s, 1) if n > head + tail and middle_s else None,
        "idle_seconds": round(t1 - t0, 1), "idle_cpu_pct": round(idle_pct, 3),
    }  # fmt: skip


def verdict(result: dict[str, Any]) -> list[str]:
    lines = []
    if result["attach_failures"]:
        lines.append(f"  attaches that failed and were tried again: {result['attach_failures']}")
    pct = result["idle_cpu_pct"]
    ok = pct <= TARGET_IDLE_CPU_PCT
    lines.append(f"  idle CPU of {result['consumers']:,} consumers: {pct:.2f} % of a core "
                 f"(target <= {TARGET_IDLE_CPU_PCT:g} %): {'pass' if ok else 'FAIL'}")  # fmt: skip
    first, last = result["attach_first"], result["attach_last"]
    if first and last:
        limit = max(first["p50_ms"] * ATTACH_RATIO, first["p50_ms"] + ATTACH_SLACK_MS)
        ok = last["p50_ms"] <= limit
        lines.append(f"  attach, first {TIMED}: p50 {first['p50_ms']:.2f} ms, max {first['max_ms']:.2f} ms; "
                     f"last {TIMED}: p50 {last['p50_ms']:.2f} ms, max {last['max_ms']:.2f} ms "
                     f"(target: last p50 <= {limit:.2f} ms): {'pass' if ok else 'FAIL'}")  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--consumers", type=int, default=10_000)
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--domain", choices=("persistent", "non-persistent"), default="persistent",
                        help="non-persistent: topics the broker keeps in memory only (no ledger, no cursor in "
                        "ZooKeeper), so the broker's cost of each attach is small and the client's shows")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "idle_clients.json"))
    args = parser.parse_args()
    raise_nofile()
    load_start = os.getloadavg()[0]
    print(f"idle clients: {args.consumers:,} consumers on {args.domain} topics, {os.cpu_count()} CPUs, "
          f"load average {load_start:.2f}", flush=True)  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="magnetar-idle-"))
    zk = ZooKeeperServer(work / "zk", force_sync=False)
    bookie: BookieProcess | None = None
    broker: BrokerProcess | None = None
    try:
        zk.start()
        bookie = BookieProcess(zk.connect_string, "/bench", work / "bookie",
                               config={"min_free_disk_bytes": 0, "log_level": "WARNING"}).start(60)  # fmt: skip
        broker = BrokerProcess(zk.connect_string, "/bench", work / "broker", config={
            "ensemble_size": 1, "write_quorum": 1, "ack_quorum": 1, "log_level": "WARNING",
            "zk_session_timeout_s": 30.0}).start(60)  # fmt: skip
        broker_cpu0 = cpu_seconds(broker.process.pid)
        result = asyncio.run(run_bench(f"magnetar://{broker.address}", args.consumers, args.idle_seconds,
                                       args.concurrency, args.domain))  # fmt: skip
        result["domain"] = args.domain
        result["broker_cpu_s"] = round(cpu_seconds(broker.process.pid) - broker_cpu0, 1)
    finally:
        for proc in (broker, bookie):
            if proc is not None:
                proc.stop()
        zk.stop()
        shutil.rmtree(work, ignore_errors=True)
    result["load_average_start"] = load_start
    result["load_average_end"] = os.getloadavg()[0]
    result["cluster"] = "ZooKeeper, 1 bookie, 1 broker; E=1 Qw=1 Qa=1"
    print("verdict:")
    for line in verdict(result):
        print(line)
    print(f"  load average {result['load_average_start']:.2f} at start, {result['load_average_end']:.2f} at end")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
