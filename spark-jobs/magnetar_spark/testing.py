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
        yield Cluster(f"magnetar://{b.address}", g.url)
    finally:
        for factory in reversed(factories):
            factory.kill_all()


async def dead_letter(
    service_url: str, topic: str, subscription: str, count: int, *, reconsume_every: int = 10,
    payload: bytes = b"", key_every: int = 0,
) -> list[str]:
    """Publish ``count`` messages to ``topic`` and send every one of them to the DLQ
    ``<topic>-<subscription>-DLQ`` through a real consumer (max_redeliver_count 1):
    every ``reconsume_every``-th by ``reconsume_later`` twice (the second goes to the
    DLQ), the others by a negative ack (the redelivery that would carry count 1 goes to
    the DLQ). Returns once the DLQ holds every one (read by a reader), with the ids the
    messages had on ``topic`` (their ORIGIN_MESSAGE_ID)."""
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
        # A message comes again when its nack or reconsume_later did not reach the broker
        # (a broker under load may stop serving for a moment: broker/lease.py): messages
        # are counted by number, and the DLQ itself is read at the end.
        sent_off: set[int] = set()  # by a nack, or by the second reconsume_later
        inflight: set[asyncio.Future[Any]] = set()

        async def reconsume(msg: Any) -> None:
            try:
                await consumer.reconsume_later(msg, 1000)
            except mg.MagnetarError:
                pass  # not acknowledged, unless the broker moved it all the same

        async def handle_next() -> None:
            try:
                msg = await consumer.receive(timeout_millis=1000)
            except mg.Timeout:
                return
            n = int(msg.properties().get("n", "0"))
            if n % reconsume_every == 0:
                if "RECONSUMETIMES" in msg.properties():
                    sent_off.add(n)  # the second reconsume_later goes to the DLQ
                fut = asyncio.ensure_future(reconsume(msg))
                inflight.add(fut)
                fut.add_done_callback(inflight.discard)
            else:
                await consumer.negative_acknowledge(msg)
                sent_off.add(n)

        deadline = time.monotonic() + 300
        while len(sent_off) < count and time.monotonic() < deadline:
            await handle_next()
        if inflight:
            await asyncio.gather(*inflight)
        in_dlq: set[int] = set()
        reader = await client.create_reader(f"{topic}-{subscription}-DLQ", MessageId.earliest, receiver_queue_size=5000)
        while len(in_dlq) < count and time.monotonic() < deadline:
            while await reader.has_message_available():
                in_dlq.add(int((await reader.read_next(10_000)).properties()["n"]))
            if len(in_dlq) < count:
                await handle_next()  # what came again
        await reader.close()
        if len(in_dlq) < count:
            raise TimeoutError(f"only {len(in_dlq)} of {count} messages of {topic} went to the DLQ")
        await consumer.close()
    return ids


async def backlog(admin_url: str, topic: str, subscription: str) -> int:
    from magnetar.client.rest_admin import RestAdmin

    async with RestAdmin(admin_url) as admin:
        stats = await admin.topic_stats(topic)
    return next((s.backlog for s in stats.subscriptions if s.name == subscription), -1)


async def wait_for_backlog(admin_url: str, topic: str, subscription: str, want: int, timeout_s: float = 120) -> int:
    """Poll until the backlog is ``want`` (DLQ moves and acks arrive in the background)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            got = await backlog(admin_url, topic, subscription)
        except Exception:
            got = -1
        if got == want or time.monotonic() > deadline:
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
