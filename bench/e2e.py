"""End to end through a real broker: producer -> broker -> 2 bookies -> consumer.

Starts a real ZooKeeper, two bookie processes and one broker (ensemble 2, write and
ack quorum 2: every entry replicated and fsync'd on both bookies), then, with the
clients below:

a. throughput: one producer (batching on; asyncio client, this process) and one
   consumer (asyncio client, a process of its own, as pulsar-perf runs them) at the
   same time, 100-byte messages; produce msgs/s (first send to last receipt) and
   consume msgs/s (first to last message received);
c. Shared subscription: 4 consumers (each its own process, asyncio client) drain a
   backlog of --messages batched messages; consume msgs/s from the first message any
   of them received to the last (target >= 100,000 msgs/s);
b. publish latency without batching at a paced 2,000 msgs/s with the asyncio client,
   after one second of warm-up at that rate: send -> receipt per message (p50/p99); the
   same with the blocking client (``magnetar.Client``) is printed for comparison.

Targets (issues 4 and 5): >= 100,000 msgs/s end to end; publish p99 <= 10 ms; Shared
consume with 4 consumers >= 100,000 msgs/s.
Writes bench/results/e2e.json.

    python bench/e2e.py [--messages 300000] [--seconds 20] [--latency-seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from magnetar.client import aio, sync
from magnetar.client.options import ConsumerType, InitialPosition
from magnetar.common.errors import Timeout
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.testing.processes import BookieProcess, BrokerProcess

SIZE = 100
RATE = 2000
TARGET_RATE = 100_000
TARGET_P99_MS = 10.0


def consumer_process(url: str, topic: str, messages: int) -> None:
    """``e2e.py --consume URL TOPIC N``: receive and ack N messages, print timings as JSON."""

    async def run() -> dict[str, float]:
        async with aio.Client(url) as client:
            consumer = await client.subscribe(topic, "bench", initial_position=InitialPosition.Earliest, receiver_queue_size=5000)
            print("ready", flush=True)
            first = 0.0
            for n in range(messages):
                msg = await consumer.receive(timeout_millis=60_000)
                if n == 0:
                    first = time.time()
                await consumer.acknowledge(msg)
            return {"count": messages, "first": first, "last": time.time()}

    print(json.dumps(asyncio.run(run())), flush=True)


def shared_consumer_process(url: str, topic: str, idle_s: float) -> None:
    """``e2e.py --consume-shared URL TOPIC IDLE_S``: one Shared consumer; receive and ack
    until nothing comes for IDLE_S; print count and first/last receive times as JSON."""

    async def run() -> dict[str, float]:
        async with aio.Client(url) as client:
            consumer = await client.subscribe(topic, "bench-shared", consumer_type=ConsumerType.Shared,
                                              receiver_queue_size=5000)  # fmt: skip
            print("ready", flush=True)
            count, first, last = 0, 0.0, 0.0
            while True:
                try:
                    msg = await consumer.receive(timeout_millis=int(idle_s * 1000) if count else 120_000)
                except Timeout:
                    break
                last = time.time()
                if count == 0:
                    first = last
                count += 1
                await consumer.acknowledge(msg)
            await consumer.close()
            return {"count": count, "first": first, "last": last}

    print(json.dumps(asyncio.run(run())), flush=True)


def shared_throughput(url: str, messages: int, consumers: int = 4) -> dict[str, float]:
    """Fill a topic with a backlog (batched), then let ``consumers`` Shared consumers
    drain it, each in its own process (started after the fill)."""
    topic = f"bench-shared-{time.time_ns()}"

    async def produce() -> float:
        async with aio.Client(url) as client:
            # The subscription exists before the backlog is written, then its consumers go.
            first = await client.subscribe(topic, "bench-shared", consumer_type=ConsumerType.Shared)
            await first.close()
            producer = await client.create_producer(topic, block_if_queue_full=True, max_pending_messages=50_000)
            start = time.time()
            futures = [await producer.enqueue(b"x" * SIZE) for _ in range(messages)]
            await asyncio.gather(*futures)
            return messages / (time.time() - start)

    produce_rate = asyncio.run(produce())
    procs = [
        subprocess.Popen([sys.executable, __file__, "--consume-shared", url, topic, "3"], stdout=subprocess.PIPE, text=True)
        for _ in range(consumers)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("a consumer process did not subscribe")
        results = [json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1]) for p in procs]
    finally:
        for p in procs:
            p.kill()
    got = [r for r in results if r["count"]]
    total = sum(r["count"] for r in results)
    span = max(r["last"] for r in got) - min(r["first"] for r in got)
    return {
        "sent": messages,
        "received": total,
        "per_consumer": [r["count"] for r in results],
        "produce_msgs_per_s": produce_rate,
        "consume_msgs_per_s": total / max(1e-9, span),
    }


def throughput(url: str, messages: int, seconds: float) -> dict[str, float]:
    """One producer (this process) and one consumer (its own process), concurrently."""
    topic = f"bench-e2e-{time.time_ns()}"
    consumer = subprocess.Popen(
        [sys.executable, __file__, "--consume", url, topic, str(messages)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert consumer.stdout is not None
        if consumer.stdout.readline().strip() != "ready":
            raise RuntimeError("the consumer process did not subscribe")

        async def produce() -> dict[str, float]:
            payload = b"x" * SIZE
            async with aio.Client(url) as client:
                producer = await client.create_producer(topic, block_if_queue_full=True, max_pending_messages=50_000)
                start = time.time()
                futures = [await producer.enqueue(payload) for _ in range(messages)]
                await asyncio.gather(*futures)
                return {"start": start, "last_receipt": time.time()}

        sent = asyncio.run(produce())
        out, _ = consumer.communicate(timeout=max(120.0, seconds * 4))
        got = json.loads(out.strip().splitlines()[-1])
    finally:
        consumer.kill()
    return {
        "sent": messages,
        "produce_msgs_per_s": messages / (sent["last_receipt"] - sent["start"]),
        "received": got["count"],
        "consume_msgs_per_s": got["count"] / max(1e-9, got["last"] - got["first"]),
        "end_to_end_s": got["last"] - sent["start"],
    }


def _percentiles(lat: list[float]) -> dict[str, float]:
    lat = sorted(lat)
    return {
        "count": len(lat),
        "p50_ms": statistics.median(lat) * 1000,
        "p99_ms": lat[int(len(lat) * 0.99) - 1] * 1000,
        "max_ms": lat[-1] * 1000,
    }


def latency(url: str, seconds: float) -> dict[str, float]:
    """Asyncio client (the SDK's own API): send -> receipt of each unbatched message at a
    paced RATE; one second at the same rate first (topic, ledgers, connections warm)."""

    async def run() -> list[float]:
        payload = b"x" * SIZE
        async with aio.Client(url) as client:
            producer = await client.create_producer(
                f"bench-latency-{time.time_ns()}", batching_enabled=False, max_pending_messages=10_000
            )
            loop = asyncio.get_running_loop()
            measured: list[float] = []
            for phase_seconds, record in ((1.0, False), (seconds, True)):
                start, futures = loop.time(), []
                for i in range(int(RATE * phase_seconds)):
                    due = start + i / RATE
                    if due > loop.time():
                        await asyncio.sleep(due - loop.time())
                    t0 = time.perf_counter()
                    fut = producer.send_async(payload, None)
                    if record:
                        fut.add_done_callback(lambda _f, t0=t0: measured.append(time.perf_counter() - t0))
                    futures.append(fut)
                await asyncio.gather(*futures)
            return measured

    return _percentiles(asyncio.run(run()))


def latency_blocking(url: str, seconds: float) -> dict[str, float]:
    """The same with the blocking client (``magnetar.Client``), for comparison: its
    calls hop to the client's loop thread, which adds to each send."""
    payload = b"x" * SIZE
    lat: list[float] = []
    with sync.Client(url) as client:
        producer = client.create_producer(f"bench-latency-b-{time.time_ns()}", batching_enabled=False, max_pending_messages=10_000)
        for _ in range(RATE):  # one second of warm-up
            producer.send_async(payload, None)
        producer.flush()
        start = time.perf_counter()
        for i in range(int(RATE * seconds)):
            due = start + i / RATE
            while (now := time.perf_counter()) < due:
                time.sleep(max(0.0, min(due - now, 0.0005)))
            t0 = time.perf_counter()
            producer.send_async(payload, lambda res, mid, t0=t0: lat.append(time.perf_counter() - t0))
        producer.flush()
        producer.close()
    return _percentiles(lat)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--latency-seconds", type=float, default=3.0)
    parser.add_argument("--out", default="bench/results/e2e.json")
    parser.add_argument("--journal-dir", default=None,
                        help="put the bookies' journals under this directory (e.g. a tmpfs, to see what the disk costs)")
    parser.add_argument("--only-shared", action="store_true", help="run only (c), the Shared-subscription run")
    parser.add_argument("--consume", nargs=3, metavar=("URL", "TOPIC", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--consume-shared", nargs=3, metavar=("URL", "TOPIC", "IDLE_S"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.consume:
        consumer_process(args.consume[0], args.consume[1], int(args.consume[2]))
        return 0
    if args.consume_shared:
        shared_consumer_process(args.consume_shared[0], args.consume_shared[1], float(args.consume_shared[2]))
        return 0
    # SIGTERM -> SystemExit, so the finally below stops every process started here.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(tempfile.mkdtemp(prefix="magnetar-bench-e2e-"))
    zk = ZooKeeperServer(work / "zk", force_sync=False)
    procs: list[BookieProcess | BrokerProcess] = []
    try:
        zk.start()
        for i in range(2):
            config: dict[str, object] = {"min_free_disk_bytes": 0, "log_level": "WARNING"}
            if args.journal_dir:
                config["journal_dir"] = str(Path(args.journal_dir) / f"{work.name}-journal-{i}")
            b = BookieProcess(zk.connect_string, "/bench", work / f"bookie-{i}", config=config)
            procs.append(b.start(60))
        broker = BrokerProcess(zk.connect_string, "/bench", work / "broker",
                               config={"ensemble_size": 2, "write_quorum": 2, "ack_quorum": 2,
                                       "log_level": "WARNING"})  # fmt: skip
        procs.append(broker.start(60))
        url = f"magnetar://{broker.address}"
        print(f"zk, 2 bookies, 1 broker up (E=2 Qw=2 Qa=2); {SIZE} B messages; producer (asyncio client) "
              "and consumer in separate processes", flush=True)
        sh = shared_throughput(url, args.messages)
        shared_ok = sh["consume_msgs_per_s"] >= TARGET_RATE and sh["received"] >= sh["sent"]
        print(f"(c) Shared, 4 consumer processes draining {sh['sent']:,} batched messages: consume "
              f"{sh['consume_msgs_per_s']:>10,.0f} msgs/s (per consumer {sh['per_consumer']}; backlog filled at "
              f"{sh['produce_msgs_per_s']:,.0f} msgs/s)", flush=True)
        print(f"target Shared consume >= {TARGET_RATE:,} msgs/s: {'MET' if shared_ok else 'NOT MET'} "
              f"({sh['consume_msgs_per_s']:,.0f})", flush=True)
        if args.only_shared:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).with_name("e2e_shared.json").write_text(json.dumps({"shared": sh, "shared_target_met": shared_ok}, indent=2))
            return 0
        tp = throughput(url, args.messages, args.seconds)
        print(f"(a) produce {tp['produce_msgs_per_s']:>10,.0f} msgs/s   consume {tp['consume_msgs_per_s']:>10,.0f} msgs/s"
              f"   ({tp['received']:,}/{tp['sent']:,} received, {tp['end_to_end_s']:.1f} s)", flush=True)
        lt = latency(url, args.latency_seconds)
        print(f"(b) publish latency at {RATE:,} msgs/s, no batching, asyncio client: p50 {lt['p50_ms']:.2f} ms  "
              f"p99 {lt['p99_ms']:.2f} ms  max {lt['max_ms']:.2f} ms", flush=True)
        lb = latency_blocking(url, args.latency_seconds)
        print(f"    the same with the blocking client: p50 {lb['p50_ms']:.2f} ms  "
              f"p99 {lb['p99_ms']:.2f} ms  max {lb['max_ms']:.2f} ms", flush=True)
        e2e = min(tp["produce_msgs_per_s"], tp["consume_msgs_per_s"])
        rate_ok = e2e >= TARGET_RATE and tp["received"] == tp["sent"]
        lat_ok = lt["p99_ms"] <= TARGET_P99_MS
        print(f"target >= {TARGET_RATE:,} msgs/s end to end: {'MET' if rate_ok else 'NOT MET'} ({e2e:,.0f})")
        print(f"target publish p99 <= {TARGET_P99_MS:g} ms: {'MET' if lat_ok else 'NOT MET'} ({lt['p99_ms']:.2f} ms)")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(
            {"api": "asyncio producer/consumer processes; asyncio client for latency", "message_size": SIZE, "throughput": tp, "latency": lt, "latency_blocking_client": lb,
             "shared": sh, "shared_target_met": shared_ok,
             "end_to_end_msgs_per_s": e2e, "rate_target_met": rate_ok, "latency_target_met": lat_ok}, indent=2))  # fmt: skip
        return 0
    finally:
        for p in reversed(procs):
            p.stop()
        zk.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
