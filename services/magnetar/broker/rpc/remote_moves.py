"""The network adapter that publishes retry and dead-letter copies
(:mod:`magnetar.broker.deadletter.copies`) to topics another broker serves (a
:class:`~magnetar.broker.deadletter.moves.MovePublisher`; the core's
:class:`~magnetar.broker.deadletter.publisher.ServiceMovePublisher` hands it those moves).

It uses the client SDK, pointed at this broker: a lookup sends the copy to the target's
owner. Each copy gets a short-lived producer named after the moved message
(``Move.producer_name``) and the copy's sequence id, so the target's deduplication drops
a repeated move. The copy of a chunk of a chunked message goes as that chunk's entry
(``publisher.move_entry``, with its chunk fields), sent as a chunk, to the partition the
move's uuid picks on a partitioned target, so every chunk of a move (and a repeat of it)
lands on the same partition. ``broker/process.py`` builds it; the broker core never
imports it.

Before the first copy goes to a topic, the subscription that must keep it is created
(from the earliest message; an existing one is left as is): on a retry topic the
consumer's own subscription, on a dead letter topic the policy's initial subscription.
So retention never drops a copy nobody has read yet.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib

import grpc

from magnetar.broker.deadletter.copies import Move
from magnetar.broker.deadletter.publisher import move_chunk, move_entry
from magnetar.client.connection import ConnectionPool
from magnetar.client.options import ProducerConfig
from magnetar.client.producer import Producer
from magnetar.common.errors import AlreadyExists, MagnetarError
from magnetar.common.grpcutil import from_rpc_error
from magnetar.common.tls import ClientTls
from magnetar.proto.v1 import broker_pb2 as pb

log = logging.getLogger(__name__)


class RemoteMovePublisher:
    """Publishes moves through the client SDK, over gRPC."""

    def __init__(
        self, service_url: str, operation_timeout_s: float = 30.0, *, tls: ClientTls | None = None,
        token: str | None = None,
    ) -> None:
        """``tls``: how brokers are called (the broker's ``tls_client_enabled``); ``token``:
        the broker's own (superuser) token, when brokers require one."""
        self._pool = ConnectionPool(service_url, operation_timeout_s, tls=tls, token=(lambda: token) if token else None)
        self._kept: set[tuple[str, str]] = set()
        self._locks: dict[str, asyncio.Lock] = {}

    async def publish(self, move: Move, keep_for: str) -> None:
        """Store ``move``'s copy on its target topic (once, even when repeated), after
        making sure subscription ``keep_for`` of the target exists.

        Raises:
            MagnetarError: the copy could not be stored (the caller leaves the original
                unacknowledged, so it comes back and the move is tried again).
        """
        # One move of a given message at a time: a second producer of the same name
        # would be refused as busy.
        lock = self._locks.setdefault(move.producer_name, asyncio.Lock())
        try:
            async with lock:
                conf = ProducerConfig(producer_name=move.producer_name, batching_enabled=False)
                producer = await Producer.create(self._pool, move.target, conf)  # creates the topic
                try:
                    await self._keep(move.target, keep_for)
                    msg = move.message
                    chunk = move_chunk(move)
                    if chunk is not None:
                        assert move.chunk is not None
                        parts = producer.partitions
                        target = parts[zlib.crc32(move.chunk.uuid.encode()) % len(parts)]
                        entry = move_entry(move, int(time.time() * 1000))
                        await target.send_chunk_entry(entry, move.sequence_id, chunk, msg.deliver_at_ms)
                        return
                    await producer.send(
                        msg.payload, properties=dict(msg.properties),
                        partition_key=msg.partition_key if msg.has_partition_key else None,
                        ordering_key=msg.ordering_key or None, sequence_id=move.sequence_id, event_timestamp=msg.event_time_ms or None,
                        deliver_at=msg.deliver_at_ms or None,
                    )
                finally:
                    await producer.close()
        finally:
            if not lock.locked() and self._locks.get(move.producer_name) is lock:
                del self._locks[move.producer_name]

    async def _keep(self, topic: str, subscription: str) -> None:
        if (topic, subscription) in self._kept:
            return
        address = await self._pool.lookup(topic)
        request = pb.CreateSubscriptionRequest(topic=topic, subscription=subscription, initial_position=pb.EARLIEST)
        try:
            await self._pool.stub(address).CreateSubscription(request, timeout=self._pool.operation_timeout_s)
        except grpc.RpcError as exc:
            error = from_rpc_error(exc, f"broker {address}")
            if not isinstance(error, AlreadyExists):
                raise error from exc
        self._kept.add((topic, subscription))
        log.info("subscription %s on %s keeps the moved messages", subscription, topic)

    async def close(self) -> None:
        try:
            await self._pool.close()
        except MagnetarError as exc:  # pragma: no cover - closing channels does not fail
            log.warning("remote move publisher: %s", exc.message)
