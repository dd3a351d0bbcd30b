"""Magnetar through its Pulsar protocol door, as ``bench/compare.py`` measures it: a cluster
of its own built as :mod:`systems.magnetar_cluster`'s (a real ZooKeeper, 3 bookies with fsync'd
journals, 1 broker, E=3 Qw=2 Qa=2: an acknowledgement means Qa = 2 fsyncs), its clients
Apache's ``pulsar-client`` (the Python client over its C++ core, from PyPI) talking to the
broker's ``pulsar://`` listener.

pulsar-client is not asyncio: its calls block or take callbacks that run on the C++
core's threads. Each workload runs in a thread of its own (``asyncio.to_thread``), so the
bench's event loop is idle meanwhile; the clocks are the same as the other systems'
(first send to last receipt, first to last receipt of the backlog).

* batched: batching on (up to 1,000 messages or 128 KiB a batch, 10 ms: the client's
  defaults), ``send_async`` with a callback per message, at most 50,000 pending
  (``block_if_queue_full``), as the SDK's batched producer;
* unbatched: ``batching_enabled=False``, ``max_pending_messages=window``,
  ``block_if_queue_full``: every message is its own SEND, its own receipt;
* consume: an Exclusive subscription made before the produce phase, its consumer attached
  after it (nothing prefetched before the clock starts), receiver queue 5,000; batched:
  ``batch_receive`` (up to 5,000 messages or 100 ms) and one ``acknowledge_cumulative``
  per batch; unbatched: ``receive`` and ``acknowledge`` per message (the C++ client
  groups acknowledgements on the wire, every 100 ms);
* latency: an unbatched producer paced from one thread (``send_async``, the callback
  records send → receipt), an Exclusive consumer receiving on another thread meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pulsar

from magnetar.testing.pulsarclient import pulsar_client
from systems.base import Latency, Percentiles, Throughput, age, stamp
from systems.magnetar_cluster import (
    ACK_QUORUM,
    BOOKIES,
    ENSEMBLE,
    RECEIVER_QUEUE,
    WRITE_QUORUM,
    MagnetarSystem,
)

LOGGER = logging.getLogger("bench-pulsar-client")
"""The C++ core's logger: warnings and errors only (it logs every connection at INFO)."""
LOGGER.setLevel(logging.WARNING)
BATCHED_PENDING = 50_000
TIMEOUT_S = 300.0
CHECK_EVERY = 1000


class PulsarClientSystem:
    name = "Magnetar, pulsar-client"

    def __init__(self, url: str | None = None) -> None:
        """``url``: run the workloads against that broker's ``pulsar://`` URL (start nothing)."""
        self._url = url
        self.cluster = MagnetarSystem()
        self.on_phase: Callable[[str], None] = lambda _mark: None
        """Called (in the workload's thread) with "produce", "consume" as each phase of a
        throughput workload starts and "done" after the last: bench/pulsar_cpu.py reads
        each process's CPU time there."""

    def describe(self) -> str:
        return (f"Magnetar (this tree), a cluster of its own built as the SDK's: {BOOKIES} bookies, journals fsync'd, 1 broker, "
                f"E={ENSEMBLE} Qw={WRITE_QUORUM} Qa={ACK_QUORUM}; pulsar-client {pulsar.__version__} "
                f"(Python over its C++ core) through the Pulsar protocol door")  # fmt: skip

    @property
    def url(self) -> str:
        if self._url is not None:
            return self._url
        assert self.cluster.broker is not None
        return self.cluster.broker.pulsar_url

    async def start(self, workdir: Path) -> None:
        await self.cluster.start(workdir)

    async def stop(self) -> None:
        await self.cluster.stop()

    async def throughput(self, *, size: int, messages: int, batched: bool, window: int) -> Throughput:
        return await asyncio.to_thread(self._throughput, size, messages, batched, window)

    async def latency(self, *, size: int, rate: int, seconds: float, warmup_s: float) -> Latency:
        return await asyncio.to_thread(self._latency, size, rate, seconds, warmup_s)

    # -- in a thread ------------------------------------------------------------------------
    def _throughput(self, size: int, messages: int, batched: bool, window: int) -> Throughput:
        topic = f"persistent://public/default/compare-{'b' if batched else 'u'}-{size}-{time.time_ns()}"
        client = pulsar_client(self.url, operation_timeout_seconds=30, logger=LOGGER)
        try:
            # The subscription exists before the backlog is written; its consumer comes back
            # after the produce phase.
            client.subscribe(topic, "bench", initial_position=pulsar.InitialPosition.Earliest).close()
            producer = client.create_producer(
                topic, batching_enabled=batched, block_if_queue_full=True,
                max_pending_messages=BATCHED_PENDING if batched else window,
            )  # fmt: skip
            self.on_phase("produce")
            produce_s = _produce(producer, b"x" * size, messages)
            producer.close()
            policy = pulsar.ConsumerBatchReceivePolicy(RECEIVER_QUEUE, -1, 100)
            consumer = client.subscribe(topic, "bench", initial_position=pulsar.InitialPosition.Earliest,
                                        receiver_queue_size=RECEIVER_QUEUE, batch_receive_policy=policy)  # fmt: skip
            received, first = 0, 0.0
            self.on_phase("consume")
            if batched:
                deadline = time.monotonic() + TIMEOUT_S
                while received < messages and time.monotonic() < deadline:
                    batch = consumer.batch_receive()
                    if batch:
                        if received == 0:
                            first = time.perf_counter()
                        received += len(batch)
                        consumer.acknowledge_cumulative(batch[-1])
            else:
                for _ in range(messages):
                    msg = consumer.receive(timeout_millis=60_000)
                    if received == 0:
                        first = time.perf_counter()
                    received += 1
                    consumer.acknowledge(msg)
            consume_s = time.perf_counter() - first
            self.on_phase("done")
            if received < messages:
                raise RuntimeError(f"consume: {received} of {messages} messages within {TIMEOUT_S:g} s")
            consumer.close()
        finally:
            client.close()
        return Throughput(messages, messages / produce_s, (messages - 1) / max(consume_s, 1e-9), received)

    def _latency(self, size: int, rate: int, seconds: float, warmup_s: float) -> Latency:
        topic = f"persistent://public/default/compare-latency-{rate}-{time.time_ns()}"
        warmup, total = int(rate * warmup_s), int(rate * (warmup_s + seconds))
        publish: list[float] = []
        e2e: list[float] = []
        failures: list[object] = []
        acked = threading.Semaphore(0)
        client = pulsar_client(self.url, operation_timeout_seconds=30, logger=LOGGER)
        try:
            consumer = client.subscribe(topic, "bench", receiver_queue_size=RECEIVER_QUEUE)
            producer = client.create_producer(topic, batching_enabled=False, max_pending_messages=10_000,
                                              block_if_queue_full=True)  # fmt: skip
            received = [0]

            def consume() -> None:
                for n in range(total):
                    try:
                        msg = consumer.receive(timeout_millis=60_000)
                    except Exception as exc:  # the main thread reports the shortfall
                        failures.append(exc)
                        return
                    if n >= warmup:
                        e2e.append(age(msg.data()))
                    received[0] += 1
                    consumer.acknowledge(msg)

            reader = threading.Thread(target=consume, name="bench-pulsar-consume", daemon=True)
            reader.start()

            def callback(i: int, t0: float):  # type: ignore[no-untyped-def]
                def sent(result: pulsar.Result, _msg_id: object) -> None:
                    if result != pulsar.Result.Ok:
                        failures.append(result)
                    elif i >= warmup:
                        publish.append(time.perf_counter() - t0)
                    acked.release()

                return sent

            start = time.perf_counter()
            for i in range(total):
                delay = start + i / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                producer.send_async(stamp(size), callback(i, time.perf_counter()))
            for _ in range(total):
                if not acked.acquire(timeout=60):
                    raise RuntimeError("latency: a receipt missing for 60 s")
            reader.join(60)
            if failures:
                raise RuntimeError(f"latency: {len(failures)} failures, e.g. {failures[0]!r}")
            producer.close()
            consumer.close()
        finally:
            client.close()
        return Latency(rate, total - warmup, Percentiles.of(publish), Percentiles.of(e2e), len(e2e))


def _produce(producer: pulsar.Producer, payload: bytes, messages: int) -> float:
    """Send ``messages`` with ``send_async``; seconds from the first send to the last receipt.

    As the SDK's producer is measured (its futures are checked after ``flush``, none has a
    callback), Python is not called back for every receipt: every :data:`CHECK_EVERY`-th
    send and the last carry a callback that checks the outcome, and ``flush`` returns once
    every message sent is acknowledged (the C++ core still handles each receipt; a Python
    callback per message would measure the GIL handed between the client's threads on
    every receipt). The consume phase then checks that every message was stored.

    Raises:
        RuntimeError: a send failed, or receipts are missing after :data:`TIMEOUT_S`.
    """
    done = threading.Event()
    failures: list[object] = []
    checked = [0]
    lock = threading.Lock()
    expected = (messages - 1) // CHECK_EVERY + 1 + (1 if (messages - 1) % CHECK_EVERY else 0)

    def sent(result: pulsar.Result, _msg_id: object) -> None:
        if result != pulsar.Result.Ok:
            failures.append(result)
        with lock:
            checked[0] += 1
            if checked[0] == expected:
                done.set()

    last = messages - 1
    start = time.perf_counter()
    for i in range(messages):
        if i % CHECK_EVERY == 0 or i == last:
            producer.send_async(payload, sent)
        else:
            producer.send_async(payload, None)
    producer.flush()
    if not done.wait(TIMEOUT_S):
        raise RuntimeError(f"produce: receipts missing after {TIMEOUT_S:g} s")
    took = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"produce: {len(failures)} checked sends failed, e.g. {failures[0]}")
    return took
