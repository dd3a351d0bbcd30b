"""The SDK's session against a stream per producer and consumer, on one cluster.

Starts ZooKeeper, 3 bookies and a broker (E=3 Qw=2 Qa=2), then runs interleaved rounds
(session, streams; streams, session; ...), each a new ``aio.Client`` that produces
``--messages`` unbatched 100-byte messages (1,000 in flight) to a new topic while one
consumer receives and acknowledges them. Prints per round the messages per second and
the CPU per message of this process (the client) and of the broker, and the load
average at start and end. ``ConnectionPool(sessions=False)`` gives the streams.

    python bench/session_ab.py [--messages 20000] [--rounds 4]
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


async def one_round(url: str, sessions: bool, topic: str, n: int, broker_pid: int) -> tuple[float, float, float]:
    """msgs/s, client CPU µs/msg, broker CPU µs/msg."""
    client = mg.Client(url)
    client._pool.sessions = sessions
    try:
        consumer = await client.subscribe(topic, "s", initial_position=mg.InitialPosition.Earliest, receiver_queue_size=1000)
        producer = await client.create_producer(topic, batching_enabled=False, block_if_queue_full=True, max_pending_messages=1000)
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


async def run(url: str, broker_pid: int, n: int, rounds: int) -> None:
    results: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
    for r in range(rounds):
        for sessions in (True, False) if r % 2 == 0 else (False, True):
            results[sessions].append(await one_round(url, sessions, f"ab-{r}-{int(sessions)}", n, broker_pid))
    for sessions, rs in results.items():
        print(f"{'session' if sessions else 'streams':8} msgs/s {[round(x[0]) for x in rs]}; client CPU µs/msg "
              f"{[round(x[1], 1) for x in rs]}; broker CPU µs/msg {[round(x[2], 1) for x in rs]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
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
        asyncio.run(run(broker.address, broker.process.pid, args.messages, args.rounds))
        print(f"load average at end {os.getloadavg()[0]:.2f}")
    finally:
        for p in processes:
            p.stop()
        zk.stop()


if __name__ == "__main__":
    main()
