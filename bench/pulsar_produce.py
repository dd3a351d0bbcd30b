"""Producing through the broker's Pulsar protocol door with pulsar-client (C++ core).

Starts a real ZooKeeper, three bookies and one broker (E=3 Qw=2 Qa=2) with the door on,
then, in this process, one pulsar-client producer sends --messages messages of --size
bytes to one topic:

- ``batched``: batching on (the client's defaults: up to 1,000 messages or 128 KiB a
  batch, 10 ms), ``send_async`` with a callback;
- ``single``: batching off, ``send_async`` with --in-flight messages pending (the
  client's ``max_pending_messages``; ``block_if_queue_full``).

Printed and written to bench/results/pulsar_produce.json: messages/s from the first
send to the last receipt, for each mode.

    python bench/pulsar_produce.py [--messages 100000] [--size 100] [--in-flight 1000] [--modes batched,single]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pulsar

from magnetar.common.netutil import free_port
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.testing.processes import BookieProcess, BrokerProcess


def produce(url: str, topic: str, messages: int, size: int, batched: bool, in_flight: int) -> float:
    """Messages per second, first send to last receipt."""
    logger = logging.getLogger("bench-pulsar-client")
    logger.setLevel(logging.WARNING)
    client = pulsar.Client(url, operation_timeout_seconds=30, logger=logger)
    try:
        producer = client.create_producer(
            topic, batching_enabled=batched, max_pending_messages=in_flight, block_if_queue_full=True,
        )  # fmt: skip
        payload = b"x" * size
        done = threading.Event()
        failures: list[object] = []
        left = [messages]
        lock = threading.Lock()

        def sent(result: pulsar.Result, _msg_id: object) -> None:
            if result != pulsar.Result.Ok:
                failures.append(result)
            with lock:
                left[0] -= 1
                if left[0] == 0:
                    done.set()

        started = time.perf_counter()
        for _ in range(messages):
            producer.send_async(payload, sent)
        producer.flush()
        if not done.wait(300):
            raise RuntimeError(f"{left[0]} receipts missing after 300 s")
        took = time.perf_counter() - started
        if failures:
            raise RuntimeError(f"{len(failures)} sends failed: {failures[:3]}")
        producer.close()
        return messages / took
    finally:
        client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--in-flight", type=int, default=1000)
    parser.add_argument("--modes", default="batched,single")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-pulsar-produce-"))
    zk = ZooKeeperServer(work / "zk", force_sync=False)
    procs: list[BookieProcess | BrokerProcess] = []
    results: dict[str, float] = {}
    try:
        zk.start()
        for i in range(3):
            bookie = BookieProcess(zk.connect_string, "/bench", work / f"bookie-{i}",
                                   config={"min_free_disk_bytes": 0, "log_level": "WARNING"})  # fmt: skip
            procs.append(bookie.start(60))
        port = free_port()
        config = {"ensemble_size": 3, "write_quorum": 2, "ack_quorum": 2, "log_level": "WARNING", "protocol_port": port}
        procs.append(BrokerProcess(zk.connect_string, "/bench", work / "broker", config=config).start(60))
        url = f"pulsar://127.0.0.1:{port}"
        for mode in args.modes.split(","):
            rate = produce(url, f"persistent://public/default/bench-{mode}", args.messages, args.size, mode == "batched", args.in_flight)
            results[mode] = round(rate)
            print(f"{mode}: {args.messages} messages of {args.size} bytes: {rate:,.0f} msgs/s", flush=True)
    finally:
        for p in procs:
            p.stop()
        zk.stop()
        shutil.rmtree(work, ignore_errors=True)
    out = Path(__file__).parent / "results" / "pulsar_produce.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"messages": args.messages, "size": args.size, "in_flight": args.in_flight, "msgs_per_s": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
