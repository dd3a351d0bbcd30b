"""Helpers for the Spark tests and the bench (not used by the jobs): a real cluster
(ZooKeeper, bookies, a broker and the gateway as processes) and DLQs filled by real
consumers."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Cluster:
    service_url: str
    admin_url: str
    pulsar_url: str = ""
    """The broker's Pulsar protocol door (``pulsar://``), for pulsar-client."""


@contextmanager
def cluster(zk_server: Any, base: Path, bookies: int = 1, **broker: Any) -> Iterator[Cluster]:
    """Bookies, a broker and the gateway on a metadata root of their own (killed on exit)."""
    from magnetar.testing.processes import (
        BookieProcess,
        BrokerProcess,
        GatewayProcess,
        ServiceFactory,
    )

    if not zk_server.alive:
        zk_server.start()
    root = f"/spark-{uuid.uuid4().hex[:8]}"
    connect = zk_server.connect_string
    factories = [
        ServiceFactory(BookieProcess, connect, root, base / "bookies"),
        ServiceFactory(BrokerProcess, connect, root, base / "brokers"),
        ServiceFactory(GatewayProcess, connect, root, base / "gateways"),
    ]
    try:
        for _ in range(bookies):
            factories[0]()
        quorum = {"ensemble_size": bookies, "write_quorum": bookies, "ack_quorum": bookies}
        b = factories[1](**{**quorum, **broker})
        g = factories[2](broker_refresh_interval_s=0.5)
        yield Cluster(f"magnetar://{b.address}", g.url, b.pulsar_url)
    finally:
        for factory in reversed(factories):
            factory.kill_all()


STALL_S = 60.0
"""How long :func:`dead_letter` and :func:`wait_for_backlog` wait without progress
before they give up (a machine under load is slow, not stuck: they wait while things
move)."""


async def dead_letter(
    service_url: str, topic: str, subscription: str, count: int, *, reconsume_every: int = 10,
    payload: bytes = b"", key_every: int = 0, stall_s: float = STALL_S,
) -> list[str]:
    """Publish ``count`` messages to ``topic`` and send every one of them to the DLQ
    ``<topic>-<subscription>-DLQ`` through a real consumer (max_redeliver_count 1):
    every ``reconsume_every``-th by ``reconsume_later`` twice (the second goes to the
    DLQ), the others by a negative ack (the redelivery that would carry count 1 goes to
    the DLQ). Returns once a reader of the DLQ has seen every one of them, with the ids
    the messages had on ``topic`` (their ORIGIN_MESSAGE_ID).

    The consumer handles whatever comes until then: a message comes again when its nack
    or reconsume_later did not reach the broker or failed (the SDK nacks it then), or
    comes back flagged after its consumer reconnected (a departure, not counted).

    Raises:
        TimeoutError: neither the DLQ nor the consumer moved for ``stall_s`` seconds;
            the message says which messages are missing.
    """
    import magnetar.asyncio as mg
    from magnetar.common.message_id import MessageId

    async with mg.Client(service_url) as client:
        policy = mg.ConsumerDeadLetterPolicy(max_redeliver_count=1)
        consumer = await client.subscribe(
            topic, subscription, consumer_type=mg.ConsumerType.Shared, receiver_queue_size=5000,
            negative_ack_redelivery_delay_ms=50, enable_retry=True, dead_letter_policy=policy,
            retry_delay_levels="1s",
        )
        # Unbatched: a negative ack moves a whole entry, which would take a batch's
        # messages being retried along with it.
        producer = await client.create_producer(topic, batching_enabled=False, max_pending_messages=20_000)
        futures = [
            producer.send_async(payload or f"{topic}|{i}".encode(), None, properties={"n": str(i)},
                                partition_key=f"k{i % 7}" if key_every and i % key_every == 0 else None)
            for i in range(count)
        ]
        ids = [str(m) for m in await asyncio.gather(*futures)]
        await producer.close()

        in_dlq: set[int] = set()
        moved = time.monotonic()  # the last time the DLQ or the consumer moved
        inflight: set[asyncio.Future[Any]] = set()

        async def reconsume(msg: Any) -> None:
            try:
                await consumer.reconsume_later(msg, 1000)
            except mg.MagnetarError:
                pass  # nacked by the SDK: it comes again

        async def read_dlq() -> None:
            nonlocal moved
            reader = await client.create_reader(f"{topic}-{subscription}-DLQ", MessageId.earliest, receiver_queue_size=5000)
            try:
                while len(in_dlq) < count:
                    try:
                        msg = await reader.read_next(1000)
                    except mg.Timeout:
                        continue
                    in_dlq.add(int(msg.properties()["n"]))
                    moved = time.monotonic()
            finally:
                await reader.close()

        reading = asyncio.ensure_future(read_dlq())
        try:
            while not reading.done():
                if time.monotonic() - moved > stall_s:
                    missing = sorted(set(range(count)) - in_dlq)
                    raise TimeoutError(
                        f"only {len(in_dlq)} of {count} messages of {topic} reached the DLQ, nothing moved for "
                        f"{stall_s:g} s; missing n={missing[:20]}{' …' if len(missing) > 20 else ''}"
                    )
                try:
                    msg = await consumer.receive(timeout_millis=1000)
                except mg.Timeout:
                    continue
                moved = time.monotonic()
                n = int(msg.properties().get("n", "0"))
                if n % reconsume_every == 0:
                    fut = asyncio.ensure_future(reconsume(msg))
                    inflight.add(fut)
                    fut.add_done_callback(inflight.discard)
                else:
                    await consumer.negative_acknowledge(msg)
            await reading  # its error, if any
        finally:
            reading.cancel()
            await asyncio.gather(reading, *inflight, return_exceptions=True)
        await consumer.close()
    return ids


async def backlog(admin_url: str, topic: str, subscription: str) -> int:
    from magnetar.client.rest_admin import RestAdmin

    async with RestAdmin(admin_url) as admin:
        stats = await admin.topic_stats(topic)
    return next((s.backlog for s in stats.subscriptions if s.name == subscription), -1)


async def wait_for_backlog(admin_url: str, topic: str, subscription: str, want: int, stall_s: float = STALL_S) -> int:
    """Poll until the backlog is ``want`` (DLQ moves and acks arrive in the background);
    returns the last backlog seen, ``want`` or the one that did not change for
    ``stall_s`` seconds (-1: none could be read)."""
    got, changed = -2, time.monotonic()
    while True:
        try:
            now = await backlog(admin_url, topic, subscription)
        except Exception:
            now = -1
        if now != got:
            got, changed = now, time.monotonic()
        if got == want or time.monotonic() - changed > stall_s:
            return got
        await asyncio.sleep(0.2)


async def read_all(service_url: str, topic: str) -> list[Any]:
    """Every message of ``topic`` (all partitions), by a reader from the earliest."""
    import magnetar.asyncio as mg
    from magnetar.common.message_id import MessageId

    out = []
    async with mg.Client(service_url) as client:
        reader = await client.create_reader(topic, MessageId.earliest, receiver_queue_size=5000)
        while await reader.has_message_available():
            out.append(await reader.read_next(10_000))
        await reader.close()
    return out
