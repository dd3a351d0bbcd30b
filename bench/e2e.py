"""End to end through a real broker: producer -> broker -> 2 bookies -> consumer.

Starts a real ZooKeeper, two bookie processes and one broker (ensemble 2, write and
ack quorum 2: every entry replicated and fsync'd on both bookies), then, with the
blocking client (``magnetar.Client``; its ``send_async`` and ``receive`` are the cheap
paths, measured faster here than awaiting the asyncio API per message):

a. throughput: one producer (batching on) and one consumer running concurrently,
   100-byte messages; produce msgs/s (first send to last receipt) and consume msgs/s
   (first to last message received);
b. publish latency without batching at a paced 2,000 msgs/s: send -> receipt per
   message (p50/p99), from ``send_async`` callbacks.

Targets (issue): >= 100,000 msgs/s end to end; publish p99 <= 10 ms.
Writes bench/results/e2e.json.

    python bench/e2e.py [--messages 300000] [--seconds 20] [--latency-seconds 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from magnetar.client import sync
from magnetar.client.options import InitialPosition
from magnetar.common.message_id import MessageId
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.testing.processes import BookieProcess, BrokerProcess

SIZE = 100
RATE = 2000
TARGET_RATE = 100_000
TARGET_P99_MS = 10.0


def throughput(url: str, messages: int, seconds: float) -> dict[str, float]:
    payload = b"x" * SIZE
    topic = f"bench-e2e-{time.time_ns()}"
    with sync.Client(url) as client:
        consumer = client.subscribe(topic, "bench", initial_position=InitialPosition.Earliest)
        producer = client.create_producer(topic, block_if_queue_full=True, max_pending_messages=50_000)
        got: dict[str, float] = {}
        done = threading.Event()

        def consume() -> None:
            n, first = 0, 0.0
            try:
                while n < messages:
                    msg = consumer.receive(30_000)
                    if n == 0:
                        first = time.perf_counter()
                    consumer.acknowledge(msg)
                    n += 1
            finally:
                got.update(count=n, first=first, last=time.perf_counter())
                done.set()

        reader = threading.Thread(target=consume, name="bench-consumer", daemon=True)
        reader.start()
        receipts = [0]
        last_receipt = [0.0]

        def on_sent(res: object, _mid: MessageId | None) -> None:
            receipts[0] += 1
            last_receipt[0] = time.perf_counter()

        start = time.perf_counter()
        deadline = start + seconds
        sent = 0
        while sent < messages and (sent & 1023 or time.perf_counter() < deadline):
            producer.send_async(payload, on_sent)
            sent += 1
        producer.flush()
        produce_s = last_receipt[0] - start
        if sent < messages:  # stopped by the time limit: the consumer stops at what was sent
            messages = sent
        done.wait(60)
        reader.join(1)
        consume_s = max(1e-9, got.get("last", 0.0) - got.get("first", 0.0))
        producer.close()
        consumer.close()
    return {
        "sent": sent,
        "produce_msgs_per_s": receipts[0] / produce_s,
        "received": got.get("count", 0),
        "consume_msgs_per_s": got.get("count", 0) / consume_s,
        "end_to_end_s": got.get("last", 0.0) - start,
    }


def latency(url: str, seconds: float) -> dict[str, float]:
    payload = b"x" * SIZE
    topic = f"bench-latency-{time.time_ns()}"
    lat: list[float] = []
    with sync.Client(url) as client:
        producer = client.create_producer(topic, batching_enabled=False, max_pending_messages=10_000)
        for _ in range(100):  # warm-up
            producer.send(payload)
        n = int(RATE * seconds)
        start = time.perf_counter()
        for i in range(n):
            due = start + i / RATE
            while (now := time.perf_counter()) < due:
                time.sleep(max(0.0, min(due - now, 0.0005)))
            t0 = time.perf_counter()
            producer.send_async(payload, lambda res, mid, t0=t0: lat.append(time.perf_counter() - t0))
        producer.flush()
        producer.close()
    lat.sort()
    return {
        "count": len(lat),
        "p50_ms": statistics.median(lat) * 1000,
        "p99_ms": lat[int(len(lat) * 0.99) - 1] * 1000,
        "max_ms": lat[-1] * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--latency-seconds", type=float, default=3.0)
    parser.add_argument("--out", default="bench/results/e2e.json")
    args = parser.parse_args()
    # SIGTERM -> SystemExit, so the finally below stops every process started here.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(tempfile.mkdtemp(prefix="magnetar-bench-e2e-"))
    zk = ZooKeeperServer(work / "zk", force_sync=False)
    procs: list[BookieProcess | BrokerProcess] = []
    try:
        zk.start()
        for i in range(2):
            b = BookieProcess(zk.connect_string, "/bench", work / f"bookie-{i}",
                              config={"min_free_disk_bytes": 0, "log_level": "WARNING"})  # fmt: skip
            procs.append(b.start(60))
        broker = BrokerProcess(zk.connect_string, "/bench", work / "broker",
                               config={"ensemble_size": 2, "write_quorum": 2, "ack_quorum": 2,
                                       "log_level": "WARNING"})  # fmt: skip
        procs.append(broker.start(60))
        url = f"magnetar://{broker.address}"
        print(f"zk, 2 bookies, 1 broker up (E=2 Qw=2 Qa=2); sync client; {SIZE} B messages", flush=True)
        tp = throughput(url, args.messages, args.seconds)
        print(f"(a) produce {tp['produce_msgs_per_s']:>10,.0f} msgs/s   consume {tp['consume_msgs_per_s']:>10,.0f} msgs/s"
              f"   ({tp['received']:,}/{tp['sent']:,} received, {tp['end_to_end_s']:.1f} s)", flush=True)
        lt = latency(url, args.latency_seconds)
        print(f"(b) publish latency at {RATE:,} msgs/s, no batching: p50 {lt['p50_ms']:.2f} ms  "
              f"p99 {lt['p99_ms']:.2f} ms  max {lt['max_ms']:.2f} ms", flush=True)
        e2e = min(tp["produce_msgs_per_s"], tp["consume_msgs_per_s"])
        rate_ok = e2e >= TARGET_RATE and tp["received"] == tp["sent"]
        lat_ok = lt["p99_ms"] <= TARGET_P99_MS
        print(f"target >= {TARGET_RATE:,} msgs/s end to end: {'MET' if rate_ok else 'NOT MET'} ({e2e:,.0f})")
        print(f"target publish p99 <= {TARGET_P99_MS:g} ms: {'MET' if lat_ok else 'NOT MET'} ({lt['p99_ms']:.2f} ms)")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(
            {"api": "sync", "message_size": SIZE, "throughput": tp, "latency": lt,
             "end_to_end_msgs_per_s": e2e, "rate_target_met": rate_ok, "latency_target_met": lat_ok}, indent=2))  # fmt: skip
        return 0
    finally:
        for p in reversed(procs):
            p.stop()
        zk.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
