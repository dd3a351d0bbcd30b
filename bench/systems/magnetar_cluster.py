"""Magnetar as ``bench/compare.py`` measures it: a real ZooKeeper, 3 bookies (journals
fsync'd: an acknowledgement means Qa = 2 fsyncs) and 1 broker with E=3 Qw=2 Qa=2; the
asyncio SDK (``magnetar.client.aio``) in the bench's process.

* batched: producer batching on (the SDK's defaults), ``enqueue`` with a 50,000-message
  queue, blocking when full;
* unbatched: ``batching_enabled=False``, ``max_pending_messages=window``, blocking when
  full: every message is its own entry, its own receipt;
* consume: an Exclusive subscription made before the produce phase, its consumer attached
  after it (nothing prefetched before the clock starts); batched: ``batch_receive`` (up to
  5,000 messages or 100 ms) and one ``acknowledge_cumulative`` per batch, as Redis gets
  ``XREADGROUP COUNT`` and one ``XACK`` per read; unbatched: ``receive`` and ``acknowledge``
  per message (the SDK groups acknowledgements on the wire);
* latency: the same unbatched producer paced, an Exclusive consumer receiving meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

from magnetar.client import aio
from magnetar.client.options import ConsumerBatchReceivePolicy, InitialPosition
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.testing.processes import BookieProcess, BrokerProcess
from systems.base import Latency, PacedRun, Percentiles, Throughput, age, stamp

BOOKIES = 3
ENSEMBLE, WRITE_QUORUM, ACK_QUORUM = 3, 2, 2
RECEIVER_QUEUE = 5000


class MagnetarSystem:
    name = "Magnetar"

    def __init__(self, url: str | None = None) -> None:
        """``url``: run the workloads against that running broker (start nothing)."""
        self._url = url
        self._zk: ZooKeeperServer | None = None
        self._procs: list[BookieProcess | BrokerProcess] = []
        self.broker: BrokerProcess | None = None
        self.brokers: list[BrokerProcess] = []
        self.bookies: list[BookieProcess] = []
        self.zk_connect: str | None = None
        self.broker_config = {"ensemble_size": ENSEMBLE, "write_quorum": WRITE_QUORUM, "ack_quorum": ACK_QUORUM, "log_level": "WARNING"}

    def describe(self) -> str:
        return (f"Magnetar (this tree): {BOOKIES} bookies, journals fsync'd, 1 broker, E={ENSEMBLE} "
                f"Qw={WRITE_QUORUM} Qa={ACK_QUORUM}; asyncio SDK")  # fmt: skip

    @property
    def url(self) -> str:
        if self._url is not None:
            return self._url
        assert self.broker is not None
        return f"magnetar://{self.broker.address}"

    async def start(self, workdir: Path) -> None:
        # In this thread, blocking: a child dies with the thread that started it
        # (PR_SET_PDEATHSIG, magnetar.common.childproc), so not in a worker thread.
        self._start(workdir)

    def _start(self, workdir: Path) -> None:
        self._zk = ZooKeeperServer(workdir / "zk", force_sync=False)
        self._zk.start()
        connect = self.zk_connect = self._zk.connect_string
        for i in range(BOOKIES):
            b = BookieProcess(connect, "/bench", workdir / f"bookie-{i}",
                              config={"min_free_disk_bytes": 0, "log_level": "WARNING"})  # fmt: skip
            self._procs.append(b.start(60))
            self.bookies.append(b)
        self.broker = BrokerProcess(connect, "/bench", workdir / "broker", config=self.broker_config)
        self.add_process(self.broker.start(60))

    def add_process(self, process: BookieProcess | BrokerProcess) -> None:
        """Own a started process: :meth:`stop` stops it (a broker joins :attr:`brokers`)."""
        self._procs.append(process)
        if isinstance(process, BrokerProcess):
            self.brokers.append(process)

    async def stop(self) -> None:
        self._stop()

    def _stop(self) -> None:
        for p in reversed(self._procs):
            with contextlib.suppress(Exception):
                p.stop()
        self._procs.clear()
        self.brokers.clear()
        if self._zk is not None:
            self._zk.stop()
            self._zk = None

    async def throughput(self, *, size: int, messages: int, batched: bool, window: int) -> Throughput:
        topic = f"compare-{'b' if batched else 'u'}-{size}-{time.time_ns()}"
        payload = b"x" * size
        async with aio.Client(self.url) as client:
            # The subscription exists before the backlog is written (so retention keeps it);
            # its consumer comes back after the produce phase (below).
            await (await client.subscribe(topic, "bench", initial_position=InitialPosition.Earliest)).close()
            options = {"max_pending_messages": 50_000} if batched else {"batching_enabled": False, "max_pending_messages": window}
            producer = await client.create_producer(topic, block_if_queue_full=True, **options)  # type: ignore[arg-type]
            start = time.perf_counter()
            futures = [await producer.enqueue(payload) for _ in range(messages)]
            await producer.flush()  # receipts come in order: no callback on every future
            produce_s = time.perf_counter() - start
            failed = [f.exception() for f in futures if f.exception() is not None]
            if failed:
                raise RuntimeError(f"{len(failed)} of {messages} sends failed, e.g. {failed[0]}")
            await producer.close()
            # Attached after the produce phase, so no message is in the receive queue
            # before the clock starts, as for the peers.
            policy = ConsumerBatchReceivePolicy(max_num_message=RECEIVER_QUEUE, timeout_ms=100)
            consumer = await client.subscribe(topic, "bench", initial_position=InitialPosition.Earliest,
                                              receiver_queue_size=RECEIVER_QUEUE, batch_receive_policy=policy)  # fmt: skip
            received, first = 0, 0.0
            if batched:  # as a Pulsar user drains a backlog: batch_receive, one cumulative ack per batch
                deadline = time.monotonic() + 120
                while received < messages and time.monotonic() < deadline:
                    batch = await consumer.batch_receive()
                    if batch:
                        if received == 0:
                            first = time.perf_counter()
                        received += len(batch)
                        await consumer.acknowledge_cumulative(batch[-1])
            else:  # one message per receive, each acknowledged
                for _ in range(messages):
                    msg = await consumer.receive(timeout_millis=60_000)
                    if received == 0:
                        first = time.perf_counter()
                    received += 1
                    await consumer.acknowledge(msg)
            consume_s = time.perf_counter() - first
            await consumer.close()
        return Throughput(messages, messages / produce_s, (messages - 1) / max(consume_s, 1e-9), received)

    async def latency(self, *, size: int, rate: int, seconds: float, warmup_s: float) -> Latency:
        topic = f"compare-latency-{rate}-{time.time_ns()}"
        warmup, total = int(rate * warmup_s), int(rate * (warmup_s + seconds))
        run = PacedRun(rate, total, warmup)
        e2e: list[float] = []
        async with aio.Client(self.url) as client:
            consumer = await client.subscribe(topic, "bench", receiver_queue_size=RECEIVER_QUEUE)
            producer = await client.create_producer(topic, batching_enabled=False, max_pending_messages=10_000)

            async def consume() -> None:
                for n in range(total):
                    msg = await consumer.receive(timeout_millis=60_000)
                    if n >= warmup:
                        e2e.append(age(msg.data()))
                    await consumer.acknowledge(msg)

            reader = asyncio.ensure_future(consume())
            await run.run(lambda _i: producer.send_async(stamp(size), None))
            await asyncio.wait_for(reader, 60)
            await producer.close()
            await consumer.close()
        return Latency(rate, total - warmup, Percentiles.of(run.publish), Percentiles.of(e2e), len(e2e))
