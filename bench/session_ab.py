"""The SDK's ways to a broker against each other, on one cluster: the framed session
(the broker's ``session_port``), the ``Session`` RPC, a stream per producer and consumer.

Starts ZooKeeper, 3 bookies and a broker (E=3 Qw=2 Qa=2), then runs interleaved rounds
(each round the modes in turn, the order rotated from round to round), each a new
``aio.Client`` that produces ``--messages`` 100-byte messages (1,000 in flight;
``--batched``: the producer batches them) to a new topic while one consumer receives
and acknowledges them. Prints per round the messages per second and the CPU per
message of this process (the client) and of the broker, and the load average at start
and end. ``ConnectionPool.framed = False`` gives the ``Session`` RPC,
``ConnectionPool.sessions = False`` the streams.

    python bench/session_ab.py [--messages 20000] [--rounds 4] [--modes framed,session,streams] [--batched]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import tempfile
import time
from pathlib import Path

import magnetar.asyncio as mg
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.testing.processes import BookieProcess, BrokerProcess


def _own_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


MODES = {"framed": (True, True), "session": (True, False), "streams": (False, False)}
"""Mode: (ConnectionPool.sessions, ConnectionPool.framed)."""


async def one_round(url: str, mode: str, topic: str, n: int, broker_pid: int, batched: bool) -> tuple[float, float, float]:
    """msgs/s, client CPU µs/msg, broker CPU µs/msg."""
    client = mg.Client(url)
    client._pool.sessions, client._pool.framed = MODES[mode]
    try:
        consumer = await client.subscribe(topic, "s", initial_position=mg.InitialPosition.Earliest, receiver_queue_size=1000)
        producer = await client.create_producer(topic, batching_enabled=batched, block_if_queue_full=True, max_pending_messages=1000)
        own, broker, started = _own_cpu_s(), _cpu_s(broker_pid), time.perf_counter()

        async def consume() -> None:
            for _ in range(n):
                await consumer.acknowledge(await consumer.receive(timeout_millis=30_000))

        reader = asyncio.create_task(consume())
        await asyncio.gather(*[await producer.enqueue(b"x" * 100) for _ in range(n)])
        await reader
        took = time.perf_counter() - started
        return n / took, (_own_cpu_s() - own) / n * 1e6, (_cpu_s(broker_pid) - broker) / n * 1e6
    finally:
        await client.close()


async def run(url: str, broker_pid: int, n: int, rounds: int, modes: list[str], batched: bool) -> None:
    results: dict[str, list[tuple[float, float, float]]] = {m: [] for m in modes}
    for r in range(rounds):
        for mode in modes[r % len(modes):] + modes[: r % len(modes)]:
            results[mode].append(await one_round(url, mode, f"ab-{r}-{mode}", n, broker_pid, batched))
    for mode, rs in results.items():
        print(f"{mode:8} msgs/s {[round(x[0]) for x in rs]}; client CPU µs/msg "
              f"{[round(x[1], 1) for x in rs]}; broker CPU µs/msg {[round(x[2], 1) for x in rs]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--modes", default="framed,session,streams", help="of " + ", ".join(MODES))
    parser.add_argument("--batched", action="store_true", help="the producer batches (default: one message per request)")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - set(MODES):
        parser.error(f"--modes: a comma-separated list of {', '.join(MODES)}")
    work = Path(tempfile.mkdtemp(prefix="session-ab-"))
    zk = ZooKeeperServer(work / "zk", force_sync=False)
    zk.start()
    processes: list[BookieProcess | BrokerProcess] = []
    try:
        quiet = {"log_level": "WARNING"}
        for i in range(3):
            processes.append(BookieProcess(zk.connect_string, "/ab", work / f"bookie-{i}", config={"min_free_disk_bytes": 0, **quiet}).start(60))
        broker = BrokerProcess(zk.connect_string, "/ab", work / "broker",
                               config={"ensemble_size": 3, "write_quorum": 2, "ack_quorum": 2, **quiet}).start(60)  # fmt: skip
        processes.append(broker)
        print(f"load average at start {os.getloadavg()[0]:.2f}")
        asyncio.run(run(broker.address, broker.process.pid, args.messages, args.rounds, modes, args.batched))
        print(f"load average at end {os.getloadavg()[0]:.2f}")
    finally:
        for p in processes:
            p.stop()
        zk.stop()


if __name__ == "__main__":
    main()
