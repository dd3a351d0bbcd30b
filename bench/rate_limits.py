"""A noisy tenant held by its publishRate, and what it costs the tenant next to it.

Starts a real ZooKeeper, one bookie and one broker (E=Qw=Qa=1, as the test), two tenants,
``noisy/ns`` with a namespace publishRate of ``--limit`` msgs/s (1,000) and ``quiet/ns``
without. The quiet producer sends as fast as it can the whole time; the noisy one offers
``--push`` msgs/s (20,000) every other period. Periods of ``--period`` seconds alternate,
alone / together, for ``--rounds`` rounds, and the quiet producer's confirmed msgs/s is
taken in 0.5 s slices; the figures are the medians of the slices alone and together
(drift and spikes of a shared machine fall on both sides). The noisy producer's confirmed
rate is measured in each together period after its first 0.5 s.

Targets (issue 16): the noisy namespace at 1,000 ± 10% msgs/s; the quiet tenant within
15% of its figure alone; no send failed, every message read back.
Writes bench/results/rate_limits.json.

    python bench/rate_limits.py [--rounds 8] [--period 3] [--limit 1000] [--push 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.testing.load import Pusher
from magnetar.testing.processes import BookieProcess, BrokerProcess, ServiceProcess


async def _count(client: mg.Client, topic: str, prefix: str, expected: int) -> int:
    """Messages ``{prefix}-0 .. -{expected-1}`` read back from the beginning (each once)."""
    consumer = await client.subscribe(topic, "check", initial_position=mg.InitialPosition.Earliest)
    seen: set[bytes] = set()
    try:
        while len(seen) < expected:
            message = await consumer.receive(timeout_millis=20_000)
            seen.add(message.data())
            if len(seen) % 5000 == 0:
                await consumer.acknowledge_cumulative(message)
    finally:
        await consumer.close()
    return len(seen & {f"{prefix}-{i}".encode() for i in range(expected)})


async def run(address: str, args: argparse.Namespace) -> dict[str, object]:
    async with AdminClient(address, 10) as admin:
        for ns in ("noisy/ns", "quiet/ns"):
            await admin.create_tenant(ns.split("/")[0])
            await admin.create_namespace(ns)
        await admin.set_publish_rate("noisy/ns", pb.PublishRate(msg_rate=args.limit, byte_rate=-1))
    noisy_topic, quiet_topic = "persistent://noisy/ns/t", "persistent://quiet/ns/t"
    async with mg.Client(f"magnetar://{address}") as client:
        for topic in (noisy_topic, quiet_topic):
            await (await client.subscribe(topic, "check", initial_position=mg.InitialPosition.Earliest)).close()
        noisy = Pusher(await client.create_producer(
            noisy_topic, block_if_queue_full=True, batching_max_messages=50, max_pending_messages=200), "noisy", args.push)
        quiet = Pusher(await client.create_producer(quiet_topic, block_if_queue_full=True), "quiet")
        await quiet.run(1.0)  # warm up
        alone: list[float] = []
        together: list[float] = []
        limited: list[float] = []
        for round_ in range(args.rounds):
            begin = time.monotonic()
            await quiet.run(args.period)
            alone += quiet.slices(begin + 0.3, time.monotonic())  # after the noisy queue drained
            begin = time.monotonic()
            await asyncio.gather(noisy.run(args.period), quiet.run(args.period))
            end = time.monotonic()
            together += quiet.slices(begin + 0.5, end)
            limited.append(noisy.rate_between(begin + 0.5, end))
            print(f"round {round_ + 1}/{args.rounds}: quiet alone {statistics.median(alone):,.0f} msgs/s, "
                  f"with the noisy neighbour {statistics.median(together):,.0f}; noisy confirmed "
                  f"{limited[-1]:,.0f} msgs/s", flush=True)
        await noisy.settle()
        await quiet.settle()
        async with AdminClient(address, 10) as admin:
            throttled_ms = (await admin.topic_stats(noisy_topic)).publishers[0].throttled_time_ms
        print(f"reading back {noisy.sent:,} + {quiet.sent:,} messages", flush=True)
        noisy_read = await _count(client, noisy_topic, "noisy", noisy.sent)
        quiet_read = await _count(client, quiet_topic, "quiet", quiet.sent)
    baseline, with_neighbour = statistics.median(alone), statistics.median(together)
    return {
        "limit_msgs_per_s": args.limit, "offered_msgs_per_s": args.push, "rounds": args.rounds,
        "period_s": args.period, "noisy_confirmed_msgs_per_s": statistics.median(limited),
        "noisy_confirmed_per_round": limited, "noisy_throttled_ms": throttled_ms,
        "quiet_alone_msgs_per_s": baseline, "quiet_with_neighbour_msgs_per_s": with_neighbour,
        "quiet_change": with_neighbour / baseline - 1, "slices_alone": len(alone), "slices_together": len(together),
        "failed_sends": len(noisy.failed) + len(quiet.failed), "sent": noisy.sent + quiet.sent,
        "confirmed": len(noisy.confirmed) + len(quiet.confirmed), "read_back": noisy_read + quiet_read,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--period", type=float, default=3.0)
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--push", type=int, default=20_000)
    parser.add_argument("--out", default="bench/results/rate_limits.json")
    args = parser.parse_args()
    if args.rounds < 1 or args.period < 1.0 or args.limit < 1 or args.push < 1:
        parser.error("--rounds, --limit and --push must be positive, --period at least 1 s")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(tempfile.mkdtemp(prefix="magnetar-bench-ratelimits-"))
    zk = ZooKeeperServer(work / "zk", force_sync=False)
    procs: list[ServiceProcess] = []
    try:
        zk.start()
        quiet = {"log_level": "WARNING"}
        procs.append(BookieProcess(zk.connect_string, "/bench", work / "bookie",
                                   config={"min_free_disk_bytes": 0, **quiet}).start(60))
        broker = BrokerProcess(zk.connect_string, "/bench", work / "broker", config={
            "ensemble_size": 1, "write_quorum": 1, "ack_quorum": 1, "stats_interval_s": 1.0, **quiet})
        procs.append(broker.start(60))
        print(f"zk, 1 bookie, 1 broker (E=Qw=Qa=1); {args.rounds} rounds of {args.period:g} s alone + "
              f"{args.period:g} s with a neighbour offering {args.push:,} msgs/s under a {args.limit:,} msgs/s limit",
              flush=True)
        result = asyncio.run(run(broker.address, args))
        limit_ok = abs(result["noisy_confirmed_msgs_per_s"] / args.limit - 1) <= 0.10  # type: ignore[operator]
        quiet_ok = abs(result["quiet_change"]) <= 0.15  # type: ignore[arg-type]
        lossless = result["failed_sends"] == 0 and result["confirmed"] == result["sent"] == result["read_back"]
        print(f"noisy namespace: {result['noisy_confirmed_msgs_per_s']:,.0f} msgs/s confirmed (target "
              f"{args.limit:,} ± 10%: {'MET' if limit_ok else 'NOT MET'}), throttled {result['noisy_throttled_ms']} ms")
        print(f"quiet tenant: alone {result['quiet_alone_msgs_per_s']:,.0f} msgs/s, with the neighbour "
              f"{result['quiet_with_neighbour_msgs_per_s']:,.0f} msgs/s ({result['quiet_change']:+.1%}; target "
              f"within 15%: {'MET' if quiet_ok else 'NOT MET'})")
        print(f"sent {result['sent']:,}, confirmed {result['confirmed']:,}, failed {result['failed_sends']}, "
              f"read back {result['read_back']:,}: {'nothing lost' if lossless else 'LOST OR FAILED MESSAGES'}")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({**result, "limit_target_met": limit_ok, "quiet_target_met": quiet_ok,
                                              "lossless": lossless}, indent=2))
        return 0 if lossless else 1
    finally:
        for p in reversed(procs):
            p.stop()
        zk.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
