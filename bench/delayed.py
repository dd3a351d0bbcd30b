"""Delayed delivery under load: many messages with random delays on one topic.

Starts a real ZooKeeper, two bookies and one broker (E=2 Qw=2 Qa=2), subscribes a
Shared subscription with --consumers consumer processes (asyncio client, each its own
process), then --producers producer processes (asyncio client, no batching: delayed
messages always go alone) send --messages messages in total, each to be delivered a
uniformly random 0..--max-delay-s seconds after its own send time. The delivery time
asked for (``deliver_at``, ms since epoch) is the start of each payload; a consumer
computes each message's lateness (receive time - deliver_at) itself.

Printed and written to bench/results/delayed.json: the broker's RSS after startup
(baseline, topic and subscription loaded, before the load) and at its peak (VmRSS
sampled every 0.2 s, and VmHWM), the growth (peak - baseline), p50/p99/max lateness
over every message, the produce rate and the total time.

Targets (issue 6): RSS growth <= 500 MB; p99 lateness <= 100 ms.

The producers are paced (--rate, 2,000 msgs/s by default): the broker then publishes
2,000 and, once the first delays run out, delivers about 2,000 msgs/s too, on a 2-core
machine it shares with ZooKeeper, the bookies and the client processes. Unpaced
(--rate 0) the publish path saturates the broker's event loop, the dispatcher falls
behind and lateness grows with the backlog (docs/subscriptions.md has both).

    python bench/delayed.py [--messages 1000000] [--max-delay-s 60] [--producers 2] [--consumers 2] [--rate 2000]
"""

from __future__ import annotations

import argparse
import array
import asyncio
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from magnetar.client import aio
from magnetar.client.options import ConsumerType
from magnetar.common.errors import Timeout
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.testing.processes import BookieProcess, BrokerProcess

SIZE = 100
SUBSCRIPTION = "bench-delayed"
TARGET_GROWTH_MB = 500.0
TARGET_P99_MS = 100.0


def producer_process(url: str, topic: str, messages: int, max_delay_ms: int, rate: float) -> None:
    """``delayed.py --produce URL TOPIC N MAX_DELAY_MS RATE``: send N delayed messages at
    RATE msgs/s (0: as fast as the producer takes them); print the times as JSON."""

    async def run() -> dict[str, float]:
        rng = random.Random()
        pad = b"x" * SIZE
        async with aio.Client(url) as client:
            producer = await client.create_producer(
                topic, batching_enabled=False, block_if_queue_full=True, max_pending_messages=5_000,
                send_timeout_millis=0,
            )  # fmt: skip
            print("ready", flush=True)
            start = time.time()
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            futures = []
            for i in range(messages):
                if rate and i % 50 == 0 and (due := t0 + i / rate) > loop.time():
                    await asyncio.sleep(due - loop.time())
                deliver_at = int(time.time() * 1000) + rng.randrange(max_delay_ms + 1)
                payload = (b"%d:" % deliver_at + pad)[:SIZE]
                futures.append(await producer.enqueue(payload, deliver_at=deliver_at))
            await asyncio.gather(*futures)
            end = time.time()
            await producer.close()
            return {"count": messages, "start": start, "end": end}

    print(json.dumps(asyncio.run(run())), flush=True)


def consumer_process(url: str, topic: str, out_path: str, idle_s: float) -> None:
    """``delayed.py --consume URL TOPIC OUT IDLE_S``: one Shared consumer; receive and ack
    until nothing comes for IDLE_S (after the first message); lateness in ms of each
    message goes to OUT (float32 array); print count and times as JSON."""

    lateness = array.array("f")

    async def run() -> dict[str, float]:
        async with aio.Client(url) as client:
            consumer = await client.subscribe(topic, SUBSCRIPTION, consumer_type=ConsumerType.Shared,
                                              receiver_queue_size=1000)  # fmt: skip
            print("ready", flush=True)
            first = last = 0.0
            while True:
                try:
                    msg = await consumer.receive(timeout_millis=int(idle_s * 1000) if lateness else 600_000)
                except Timeout:
                    break
                last = time.time()
                data = msg.data()
                lateness.append(last * 1000 - int(data[: data.index(b":")]))
                if len(lateness) == 1:
                    first = last
                await consumer.acknowledge(msg)
            await consumer.close()
        return {"count": len(lateness), "first": first, "last": last}

    result = asyncio.run(run())
    with open(out_path, "wb") as f:
        lateness.tofile(f)
    print(json.dumps(result), flush=True)


class RssSampler:
    """Samples a process's VmRSS (and reads VmHWM) from /proc in a thread."""

    def __init__(self, pid: int, interval_s: float = 0.2) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self.peak_kb = 0
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def read(self) -> dict[str, int]:
        out = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1])
        return out

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                rss = self.read()["VmRSS"]
            except (OSError, KeyError):
                return
            self.peak_kb = max(self.peak_kb, rss)
            self.samples.append((time.time(), rss))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _percentile(values: list[float], q: float) -> float:
    return values[max(0, int(len(values) * q) - 1)]


def run_bench(url: str, broker_pid: int, args: argparse.Namespace, work: Path) -> dict[str, object]:
    topic = f"bench-delayed-{time.time_ns()}"
    consumers = [
        subprocess.Popen([sys.executable, __file__, "--consume", url, topic, str(work / f"lateness-{i}.bin"),
                          str(args.idle_s)], stdout=subprocess.PIPE, text=True)
        for i in range(args.consumers)
    ]  # fmt: skip
    producers: list[subprocess.Popen[str]] = []
    sampler = RssSampler(broker_pid)
    try:
        for p in consumers:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("a consumer process did not subscribe")
        time.sleep(2.0)  # let the broker settle after loading the topic
        baseline = sampler.read()
        sampler.start()
        share = [args.messages // args.producers + (1 if i < args.messages % args.producers else 0)
                 for i in range(args.producers)]  # fmt: skip
        producers = [
            subprocess.Popen([sys.executable, __file__, "--produce", url, topic, str(n), str(int(args.max_delay_s * 1000)),
                              str(args.rate / args.producers)],
                             stdout=subprocess.PIPE, text=True)
            for n in share
        ]  # fmt: skip
        for p in producers:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("a producer process did not start")
        sent = [json.loads(p.communicate(timeout=3600)[0].strip().splitlines()[-1]) for p in producers]
        produced_at = time.time()
        print(f"produced {sum(s['count'] for s in sent):,} messages in {max(s['end'] for s in sent) - min(s['start'] for s in sent):.1f} s; "
              f"broker RSS now {sampler.peak_kb / 1024:.0f} MB (peak so far)", flush=True)  # fmt: skip
        got = [json.loads(p.communicate(timeout=3600)[0].strip().splitlines()[-1]) for p in consumers]
        sampler.stop()
        hwm = sampler.read()["VmHWM"]
    finally:
        sampler.stop() if sampler._thread.is_alive() else None
        for p in consumers + producers:
            p.kill()
    lateness: list[float] = []
    for i in range(args.consumers):
        a = array.array("f")
        data = (work / f"lateness-{i}.bin").read_bytes()
        a.frombytes(data)
        lateness.extend(a)
    lateness.sort()
    start = min(s["start"] for s in sent)
    produce_s = max(s["end"] for s in sent) - start
    received = sum(g["count"] for g in got)
    peak_kb = max(sampler.peak_kb, hwm)
    return {
        "messages": args.messages,
        "received": received,
        "per_consumer": [g["count"] for g in got],
        "producers": args.producers,
        "consumers": args.consumers,
        "max_delay_s": args.max_delay_s,
        "rate_asked": args.rate,
        "produce_s": produce_s,
        "produce_msgs_per_s": args.messages / produce_s,
        "total_s": max(g["last"] for g in got if g["count"]) - start if received else 0.0,
        "after_produce_s": produced_at - start,
        "broker_baseline_rss_mb": baseline["VmRSS"] / 1024,
        "broker_peak_rss_sampled_mb": sampler.peak_kb / 1024,
        "broker_vmhwm_mb": hwm / 1024,
        "broker_peak_rss_mb": peak_kb / 1024,
        "rss_growth_mb": (peak_kb - baseline["VmRSS"]) / 1024,
        "lateness_p50_ms": _percentile(lateness, 0.50) if lateness else None,
        "lateness_p99_ms": _percentile(lateness, 0.99) if lateness else None,
        "lateness_max_ms": lateness[-1] if lateness else None,
        "early": sum(1 for x in lateness if x < 0),
        "rss_samples_mb": [(round(t - start, 1), round(kb / 1024, 1)) for t, kb in sampler.samples[::10]],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--max-delay-s", type=float, default=60.0)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=2000.0,
                        help="total publish rate in msgs/s (default 2,000: what one broker sustains on 2 shared cores "
                             "while also delivering as many; 0: as fast as the broker takes them)")
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--idle-s", type=float, default=15.0, help="a consumer stops after this long without a message")
    parser.add_argument("--broker-config", default="{}", help="extra broker settings as JSON")
    parser.add_argument("--out", default="bench/results/delayed.json")
    parser.add_argument("--produce", nargs=5, metavar=("URL", "TOPIC", "N", "MAX_DELAY_MS", "RATE"), help=argparse.SUPPRESS)
    parser.add_argument("--consume", nargs=4, metavar=("URL", "TOPIC", "OUT", "IDLE_S"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.produce:
        producer_process(args.produce[0], args.produce[1], int(args.produce[2]), int(args.produce[3]), float(args.produce[4]))
        return 0
    if args.consume:
        consumer_process(args.consume[0], args.consume[1], args.consume[2], float(args.consume[3]))
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(tempfile.mkdtemp(prefix="magnetar-bench-delayed-"))
    zk = ZooKeeperServer(work / "zk", force_sync=False)
    procs: list[BookieProcess | BrokerProcess] = []
    try:
        zk.start()
        for i in range(2):
            b = BookieProcess(zk.connect_string, "/bench", work / f"bookie-{i}",
                              config={"min_free_disk_bytes": 0, "log_level": "WARNING"})  # fmt: skip
            procs.append(b.start(60))
        config = {"ensemble_size": 2, "write_quorum": 2, "ack_quorum": 2, "log_level": "WARNING"}
        config.update(json.loads(args.broker_config))
        broker = BrokerProcess(zk.connect_string, "/bench", work / "broker", config=config)
        procs.append(broker.start(60))
        pid = broker.process.pid
        assert pid is not None
        url = f"magnetar://{broker.address}"
        print(f"zk, 2 bookies, 1 broker up (pid {pid}); {args.messages:,} messages of {SIZE} B, delays 0..{args.max_delay_s:g} s, "
              f"{args.producers} producer and {args.consumers} Shared consumer processes", flush=True)  # fmt: skip
        r = run_bench(url, pid, args, work)
        growth_ok = r["rss_growth_mb"] <= TARGET_GROWTH_MB  # type: ignore[operator]
        p99 = r["lateness_p99_ms"]
        lat_ok = p99 is not None and p99 <= TARGET_P99_MS and r["received"] == r["messages"]
        print(f"received {r['received']:,}/{r['messages']:,} (per consumer {r['per_consumer']}); produce "
              f"{r['produce_msgs_per_s']:,.0f} msgs/s over {r['produce_s']:.1f} s; total {r['total_s']:.1f} s; "
              f"{r['early']} early", flush=True)  # fmt: skip
        print(f"broker RSS: baseline {r['broker_baseline_rss_mb']:.1f} MB, peak {r['broker_peak_rss_mb']:.1f} MB "
              f"(sampled {r['broker_peak_rss_sampled_mb']:.1f}, VmHWM {r['broker_vmhwm_mb']:.1f}), growth "
              f"{r['rss_growth_mb']:.1f} MB", flush=True)  # fmt: skip
        if p99 is not None:
            print(f"lateness: p50 {r['lateness_p50_ms']:.1f} ms  p99 {p99:.1f} ms  max {r['lateness_max_ms']:.1f} ms", flush=True)
        print(f"target RSS growth <= {TARGET_GROWTH_MB:g} MB: {'MET' if growth_ok else 'NOT MET'}")
        print(f"target p99 lateness <= {TARGET_P99_MS:g} ms (all received): {'MET' if lat_ok else 'NOT MET'}")
        r.update({"broker_config": config, "growth_target_met": growth_ok, "lateness_target_met": lat_ok})
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(r, indent=2))
        return 0
    finally:
        for p in reversed(procs):
            p.stop()
        zk.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
