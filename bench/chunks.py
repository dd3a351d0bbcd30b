"""Chunked messages: the round trip of one 100 MB message (docs/pulsar-protocol.md,
"Chunked messages"), with the Magnetar SDK on both sides.

Starts the cluster of ``make bench-compare`` (3 bookies, E=3 Qw=2 Qa=2, 1 broker, the
broker's default max message size of 5 MB). A producer with ``chunking_enabled`` sends
``--mb`` MB of random bytes (chunks of the max message size, each an entry); a consumer
subscribed before receives it reassembled and checks it. Repeated ``--rounds`` times.
Prints, and writes to bench/results/chunks.json, per round: the send time (until the last
chunk is stored), the time until the consumer holds the whole message, and MB/s.

    python bench/chunks.py [--mb 100] [--rounds 3] [--codec NONE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from systems.magnetar_cluster import MagnetarSystem  # noqa: E402

import magnetar.asyncio as mg  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


async def round_trip(system: MagnetarSystem, payload: bytes, codec: str) -> dict[str, object]:
    assert system.broker is not None
    topic = f"persistent://public/default/chunks-{time.time_ns()}"
    async with mg.Client(system.broker.address) as sdk:
        consumer = await sdk.subscribe(topic, "bench")
        producer = await sdk.create_producer(
            topic, batching_enabled=False, chunking_enabled=True, send_timeout_millis=300_000,
            compression_type=getattr(mg.CompressionType, codec),
        )  # fmt: skip
        started = time.perf_counter()
        receiving = asyncio.create_task(consumer.receive(timeout_millis=300_000))
        mid = await producer.send(payload)
        sent_s = time.perf_counter() - started
        msg = await receiving
        round_s = time.perf_counter() - started
        assert msg.data() == payload and msg.message_id() == mid, "the message came back different"
        await consumer.acknowledge(msg)
    mb = len(payload) / 1e6
    chunks = mid.entry_id() - mid.first_chunk_message_id().entry_id() + 1  # type: ignore[attr-defined]
    return {
        "mb": round(mb, 1), "codec": codec, "chunks": chunks, "send_s": round(sent_s, 2), "round_trip_s": round(round_s, 2),
        "round_trip_mb_s": round(mb / round_s, 1),
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--codec", default="NONE")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-chunks-"))
    system = MagnetarSystem()
    report: dict[str, object] = {"load_average_start": os.getloadavg()[0], "rows": []}
    rows: list[dict[str, object]] = report["rows"]  # type: ignore[assignment]
    payload = os.urandom(args.mb * 1_000_000)

    async def run() -> None:
        await system.start(work)
        try:
            for _ in range(args.rounds):
                row = await round_trip(system, payload, args.codec)
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
    (RESULTS / "chunks.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
