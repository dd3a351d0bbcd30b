"""The Spark DLQ replay at scale: 1,000,000 DLQ messages of 1 KB replayed with local[2].

Starts a real ZooKeeper, a bookie, a broker and the gateway, then fills a DLQ DIRECTLY
with a producer (batched, so filling takes seconds, not the minutes that real consumers'
negative acks would take): every message carries what the broker's move gives a dead
letter (REAL_TOPIC, round robin over --targets topics, ORIGIN_MESSAGE_ID,
RECONSUMETIMES, DEAD_LETTER_REASON). The DLQ is partitioned (--partitions) and has the
initial subscription a consumer's dead-letter policy would create. The replay job
(spark-jobs/dlq_replay.py, in process) then moves it all back; with no transform and no
filter it takes the fused path (each Spark task reads, publishes and acknowledges its
slice in one Python worker; docs/spark.md, "Performance").

Printed and written to bench/results/dlq_replay.json: the fill time, and for the replay
the Spark session's start, planning, the run (read + publish + ack, in the tasks), the
task-seconds spent publishing (waiting for receipts included) and acknowledging, the
whole run and msgs/s; the targets' message counts and the DLQ backlog after it.
With --read-pass, a plain read of the DLQ (count) is timed first: the read's share.

Target (issue 17): the whole run (Spark start to summary) <= 60 s on this machine.

    python bench/dlq_replay.py [--messages 1000000] [--size 1024] [--partitions 4] [--targets 4]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "spark-jobs"))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

import dlq_replay  # noqa: E402
from magnetar_spark.testing import backlog, cluster  # noqa: E402

import magnetar.asyncio as mg  # noqa: E402
from magnetar.client.rest_admin import RestAdmin  # noqa: E402
from magnetar.common.message_id import MessageId  # noqa: E402
from magnetar.common.zkserver import ZooKeeperServer  # noqa: E402

NS = "persistent://public/default"
DLQ = f"{NS}/bench-orders-s-DLQ"
SUB = "s-DLQ-sub"


async def fill(service_url: str, admin_url: str, messages: int, size: int, partitions: int, targets: list[str]) -> None:
    async with mg.Client(service_url) as client, RestAdmin(admin_url) as admin:
        for t in targets:
            await admin.create_topic(t)
        await admin.create_topic(DLQ, partitions)
        await admin.create_subscription(DLQ, SUB, MessageId.earliest)
        producer = await client.create_producer(
            DLQ, batching_enabled=True, batching_max_messages=500, max_pending_messages=20_000,
            block_if_queue_full=True, batching_max_allowed_size_in_bytes=1 << 20,
        )
        payload = os.urandom(size)
        futures = []
        for i in range(messages):
            props = {"REAL_TOPIC": targets[i % len(targets)], "ORIGIN_MESSAGE_ID": f"7:{i}:-1:-1",
                     "RECONSUMETIMES": "3", "DEAD_LETTER_REASON": "bench"}
            futures.append(await producer.enqueue(payload, properties=props))
            if len(futures) >= 50_000:
                await asyncio.gather(*futures)
                futures.clear()
        await asyncio.gather(*futures)
        await producer.close()


async def counts(admin_url: str, targets: list[str]) -> dict[str, int]:
    async with RestAdmin(admin_url) as admin:
        return {t: (await admin.topic_stats(t)).msg_in_counter for t in targets}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--targets", type=int, default=4)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--read-pass", action="store_true", help="time a plain read of the DLQ first")
    a = p.parse_args()
    targets = [f"{NS}/bench-target-{i}" for i in range(a.targets)]
    with tempfile.TemporaryDirectory(prefix="bench-dlq-replay-") as tmp:
        work = Path(tmp)
        zk = ZooKeeperServer(work / "zk", force_sync=False)
        zk.start()
        try:
            with cluster(zk, work, bookies=1) as c:
                t = time.monotonic()
                asyncio.run(fill(c.service_url, c.admin_url, a.messages, a.size, a.partitions, targets))
                fill_s = time.monotonic() - t
                print(f"filled {a.messages} DLQ messages of {a.size} B in {fill_s:.1f} s", flush=True)

                started = time.monotonic()
                from magnetar_spark.session import local_session

                spark = local_session("bench-dlq-replay", master=a.master)
                spark_s = time.monotonic() - started
                read_s = None
                if a.read_pass:
                    t = time.monotonic()
                    n = (spark.read.format("magnetar").option("service.url", c.service_url)
                         .option("admin.url", c.admin_url).option("topic", DLQ).load().count())
                    read_s = time.monotonic() - t
                    print(f"read pass: {n} messages in {read_s:.1f} s", flush=True)
                    started = time.monotonic() - spark_s  # the read pass is not part of the run
                args = dlq_replay.parse_args(["--service-url", c.service_url, "--admin-url", c.admin_url,
                                              "--dlq-topic", DLQ])
                summary = dlq_replay.run(args, spark)
                whole_s = time.monotonic() - started
                spark.stop()
                stored = asyncio.run(counts(c.admin_url, targets))
                left = sum(asyncio.run(backlog(c.admin_url, f"{DLQ}-partition-{i}", SUB)) for i in range(a.partitions))
        finally:
            zk.stop()
    result = {
        "messages": a.messages, "size": a.size, "partitions": a.partitions, "targets": a.targets,
        "master": a.master, "fill_s": round(fill_s, 1), "spark_start_s": round(spark_s, 1),
        "read_pass_s": round(read_s, 1) if read_s is not None else None,
        "plan_s": round(summary.timings.get("plan_s", 0), 1), "run_s": round(summary.timings.get("run_s", 0), 1),
        "publish_task_s": round(summary.timings.get("publish_task_s", 0), 1),
        "ack_task_s": round(summary.timings.get("ack_task_s", 0), 1),
        "whole_s": round(whole_s, 1), "msgs_per_s": round(summary.moved / whole_s),
        "moved": summary.moved, "failed": summary.failed, "stored_on_targets": sum(stored.values()),
        "dlq_backlog_after": left, "target_whole_s": 60,
    }
    print(json.dumps(result, indent=2))
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "dlq_replay.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0 if summary.moved == a.messages and left == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
