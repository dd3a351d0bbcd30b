"""Throughput and bytes stored per compression codec (docs/compression.md), on a
compressible payload (JSON log lines) and an incompressible one (random bytes).

Starts the cluster of ``make bench-compare`` (3 bookies, E=3 Qw=2 Qa=2, 1 broker). For each
payload and codec (NONE, LZ4, ZLIB, ZSTD, SNAPPY): pulsar-client (its C++ core, batching
on with the client's batch limits, 1,000 messages or 128 KiB, 10 ms; ``--unbatched``:
each message sent and compressed alone, the Python client's default) produces ``--messages`` messages of about 200 B through the
broker's Pulsar protocol door with that ``compression_type``; then the Magnetar SDK reads
them back (the broker decompresses them for it) and checks every payload. Prints, and
writes to bench/results/codecs.json (codecs-unbatched.json), produce and consume messages/s and the topic's
stored bytes (``storage_size``) against the payload bytes sent.

    python bench/codecs.py [--messages 20000] [--codecs LZ4,ZSTD] [--payloads json,random] [--unbatched]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pulsar  # noqa: E402
from systems.magnetar_cluster import MagnetarSystem  # noqa: E402

import magnetar.asyncio as mg  # noqa: E402
from magnetar.client.admin import AdminClient  # noqa: E402
from magnetar.testing.pulsarclient import pulsar_client  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
CODECS = ("NONE", "LZ4", "ZLib", "ZSTD", "SNAPPY")
SIZE = 200


def payloads(kind: str, count: int) -> list[bytes]:
    if kind == "json":
        levels = ("info", "warn", "error", "debug")
        return [
            json.dumps({"ts": 1_700_000_000_000 + i, "level": levels[i % 4], "msg": "request served",
                        "path": f"/api/v1/items/{i % 500}", "ms": i % 97, "user": f"u{i % 50}"}).encode().ljust(SIZE)
            for i in range(count)
        ]  # fmt: skip
    rng = random.Random(7)
    return [rng.randbytes(SIZE) for _ in range(count)]


def produce(url: str, topic: str, codec: str, data: list[bytes], batching: bool) -> float:
    client = pulsar_client(url, operation_timeout_seconds=30)
    try:
        producer = client.create_producer(topic, compression_type=getattr(pulsar.CompressionType, codec),
                                          batching_enabled=batching, block_if_queue_full=True,
                                          max_pending_messages=50_000)  # fmt: skip
        failed: list[pulsar.Result] = []
        started = time.perf_counter()
        for payload in data:
            producer.send_async(payload, lambda res, _mid: res == pulsar.Result.Ok or failed.append(res))
        producer.flush()
        elapsed = time.perf_counter() - started
        producer.close()
        assert not failed, failed[:3]
        return elapsed
    finally:
        client.close()


async def run_case(system: MagnetarSystem, kind: str, codec: str, data: list[bytes], batching: bool) -> dict[str, object]:
    assert system.broker is not None
    topic = f"persistent://public/default/codec-{kind}-{codec.lower()}-{time.time_ns()}"
    async with mg.Client(system.broker.address) as sdk:
        consumer = await sdk.subscribe(topic, "bench", initial_position=mg.InitialPosition.Earliest,
                                       receiver_queue_size=5000)  # fmt: skip
        await consumer.close()
        produce_s = await asyncio.to_thread(produce, system.broker.pulsar_url, topic, codec, data, batching)
        async with AdminClient(system.broker.address, 30) as admin:
            stored = (await admin.topic_stats(topic)).storage_size
        consumer = await sdk.subscribe(topic, "bench", receiver_queue_size=5000)
        started = time.perf_counter()
        for i, want in enumerate(data):
            msg = await consumer.receive(timeout_millis=30_000)
            if msg.data() != want:
                got = data.index(msg.data()) if msg.data() in data else None
                raise AssertionError(f"{codec} {kind}: message {i} ({msg.message_id()}) is sent message {got}")
        consume_s = time.perf_counter() - started
        await consumer.acknowledge_cumulative(msg)
    sent = sum(len(p) for p in data)
    return {
        "payload": kind, "codec": codec, "batched": batching, "messages": len(data), "payload_bytes": sent, "stored_bytes": stored,
        "stored_ratio": round(stored / sent, 3), "produce_msgs_s": round(len(data) / produce_s),
        "consume_msgs_s": round(len(data) / consume_s),
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--codecs", default=",".join(CODECS), help="comma-separated, of " + ", ".join(CODECS))
    parser.add_argument("--payloads", default="json,random")
    parser.add_argument("--unbatched", action="store_true", help="each message compressed alone (pulsar-client's default)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-codecs-"))
    system = MagnetarSystem()
    report: dict[str, object] = {"load_average_start": os.getloadavg()[0], "size": SIZE, "rows": []}
    rows: list[dict[str, object]] = report["rows"]  # type: ignore[assignment]

    async def run() -> None:
        await system.start(work)
        try:
            for kind in args.payloads.split(","):
                data = payloads(kind, args.messages)
                for codec in args.codecs.split(","):
                    row = await run_case(system, kind, codec, data, not args.unbatched)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        finally:
            await system.stop()

    try:
        asyncio.run(run())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["load_average_end"] = os.getloadavg()[0]
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / ("codecs-unbatched.json" if args.unbatched else "codecs.json")
    out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
