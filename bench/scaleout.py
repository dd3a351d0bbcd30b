"""Do more brokers add throughput on this machine? Unbatched sends (one message per
request, 1,000 in flight per producer) to 6 topics at once, with 1, 2 and 3 brokers.

The same cluster as ``make bench-compare`` (3 bookies, E=3 Qw=2 Qa=2), plus a broker more
for each run; 3 producer processes with 2 topics each (so the bench's own CPU is spread
too), process i through broker i mod the brokers running, in a namespace of its own. The
topics are looked up first and their owners printed. Prints the aggregate produce msgs/s
per run, the CPU µs per message of each process kind and what the capacity model
(``bench/model.py``) predicts for each run from the first run's costs; writes
bench/results/scaleout.json.

On 2 cores the brokers, the bookies and the producers share the same CPUs, so this shows
whether one broker process is the limit or the machine is.

    python bench/scaleout.py [--messages 20000] [--brokers 1 2 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model import Cluster, Costs, throughput  # noqa: E402
from procstats import cpu_seconds  # noqa: E402
from systems.magnetar_cluster import MagnetarSystem  # noqa: E402

from magnetar.client import aio  # noqa: E402
from magnetar.client.admin import AdminClient  # noqa: E402
from magnetar.testing.processes import BrokerProcess  # noqa: E402

TOPICS = 6
PROCESSES = 3


def producer_main(url: str, topics: list[str], messages: int) -> None:
    """A child: send ``messages`` unbatched messages to each of ``topics`` at once."""

    async def one(client: aio.Client, topic: str) -> None:
        producer = await client.create_producer(topic, batching_enabled=False, max_pending_messages=1000, block_if_queue_full=True)
        for _ in range(messages):
            await producer.enqueue(b"x" * 100)
        await producer.flush()
        await producer.close()

    async def run() -> dict[str, float]:
        async with aio.Client(url) as client:
            for topic in topics:  # opened before the clock starts
                await (await client.create_producer(topic)).close()
            print("ready", flush=True)
            sys.stdin.readline()
            start, cpu = time.time(), time.process_time()
            await asyncio.gather(*(one(client, t) for t in topics))
            return {"start": start, "end": time.time(), "cpu": time.process_time() - cpu}

    print(json.dumps(asyncio.run(run())), flush=True)


def run_once(system: MagnetarSystem, messages: int) -> dict[str, object]:
    """Producer process i sends to its own namespace through broker i (mod the brokers
    running): the broker a lookup reaches first takes the namespace's bundles, so with
    two brokers each serves one process's topics."""
    stamp = time.time_ns()
    brokers = list(system.brokers)
    urls = [f"magnetar://{brokers[i % len(brokers)].address}" for i in range(PROCESSES)]
    namespaces = [f"public/scaleout-{stamp}-{i}" for i in range(PROCESSES)]
    topics = [[f"persistent://{namespaces[i]}/t-{j}" for j in range(TOPICS // PROCESSES)] for i in range(PROCESSES)]

    async def place() -> dict[str, str]:
        placed = {}
        for i in range(PROCESSES):
            async with AdminClient(urls[i], 15) as admin:
                await admin.create_namespace(namespaces[i])
                for t in topics[i]:
                    placed[t] = await admin.lookup(t)
        return placed

    placed = asyncio.run(place())
    cpu0 = {"brokers": sum(cpu_seconds(b.process.pid) for b in brokers),
            "bookies": sum(cpu_seconds(b.process.pid) for b in system.bookies)}  # fmt: skip
    procs = [
        subprocess.Popen([sys.executable, __file__, "--produce", urls[i], str(messages), *topics[i]],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
        for i in range(PROCESSES)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("a producer process did not start")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        times = [json.loads(p.communicate(timeout=600)[0].strip().splitlines()[-1]) for p in procs]
    finally:
        for p in procs:
            p.kill()
    total = messages * TOPICS
    span = max(t["end"] for t in times) - min(t["start"] for t in times)
    cpu = {"brokers": sum(cpu_seconds(b.process.pid) for b in brokers) - cpu0["brokers"],
           "bookies": sum(cpu_seconds(b.process.pid) for b in system.bookies) - cpu0["bookies"],
           "producers": sum(t["cpu"] for t in times)}  # from the go to the last receipt, in each process  # fmt: skip
    return {"brokers": len(brokers), "owners": placed, "messages": total, "produce_msgs_s": total / span,
            "cpu_us_per_msg": {k: v / total * 1e6 for k, v in cpu.items()},
            "cores_used": sum(cpu.values()) / span, "load_average": os.getloadavg()[0]}  # fmt: skip


def costs_of(run: dict[str, object]) -> Costs:
    us = run["cpu_us_per_msg"]
    assert isinstance(us, dict)
    return Costs(broker_us=us["brokers"], bookies_us=us["bookies"], clients_us=us["producers"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000, help="per topic")
    parser.add_argument("--brokers", type=int, nargs="+", default=[1, 2, 3], help="broker counts to run, ascending")
    parser.add_argument("--produce", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.produce:
        producer_main(args.produce[0], args.produce[2:], int(args.produce[1]))
        return 0
    if args.brokers != sorted(args.brokers) or args.brokers[0] < 1:
        parser.error("--brokers: counts from 1 up, ascending (e.g. 1 2 3)")
    work = Path(tempfile.mkdtemp(prefix="magnetar-scaleout-"))
    system = MagnetarSystem()
    asyncio.run(system.start(work))
    runs = []
    cores = os.cpu_count() or 1
    print(f"load average {os.getloadavg()[0]:.2f} at the start; {cores} CPUs", flush=True)
    try:
        for count in args.brokers:
            while len(system.brokers) < count:
                assert system.zk_connect is not None
                extra = BrokerProcess(system.zk_connect, "/bench", work / f"broker-{len(system.brokers) + 1}",
                                      config=system.broker_config)  # fmt: skip
                system.add_process(extra.start(60))
            r = run_once(system, args.messages)
            runs.append(r)
            owners = sorted(set(r["owners"].values()))  # type: ignore[attr-defined]
            print(f"{count} broker(s): {r['produce_msgs_s']:,.0f} msgs/s over {TOPICS} topics (owners {owners}); CPU µs/msg "
                  + ", ".join(f"{k} {v:.1f}" for k, v in r["cpu_us_per_msg"].items())  # type: ignore[attr-defined]
                  + f"; {r['cores_used']:.2f} cores used; load {r['load_average']:.2f}", flush=True)
    finally:
        asyncio.run(system.stop())
        shutil.rmtree(work, ignore_errors=True)
    base = costs_of(runs[0])
    print("model (bench/model.py) from the first run's CPU per message, every process sharing "
          f"{cores} cores, each at most one core:")
    for r in runs:
        predicted, bound = throughput(base, Cluster(brokers=r["brokers"], bookies=3, clients=PROCESSES, cores=cores))  # type: ignore[arg-type]
        r["model_msgs_s"], r["model_bound"] = predicted, bound
        measured = r["produce_msgs_s"]
        print(f"  {r['brokers']} broker(s): predicted {predicted:,.0f} msgs/s ({bound} bind), measured {measured:,.0f} "
              f"({measured / predicted:.2f} of it)")  # type: ignore[operator]
    out = Path(__file__).resolve().parent / "results" / "scaleout.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"runs": runs, "cpus": cores}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
