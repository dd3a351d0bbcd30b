"""The producer of one topic or one partition (the public Producer routes to these).

A partition producer owns a ``Produce`` stream. Sends are gathered into batches
(see :mod:`.batching`); every batch stays pending until its receipt arrives. When the
stream breaks the producer reopens it under the same name and resends every pending
batch, in order, with the same sequence ids, so the broker can drop duplicates. It
reopens with the topic epoch the broker gave it (as pulsar-client does), so an exclusive
producer another one took the topic from meanwhile is refused (ProducerFenced) and fails.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque

from magnetar.common.access_mode import ProducerAccessMode
from magnetar.common.errors import (
    AlreadyClosed,
    MagnetarError,
    NotConnected,
    ProducerBusy,
    ProducerQueueIsFull,
    Timeout,
    from_code,
)
from magnetar.common.message_id import MessageId
from magnetar.proto.v1 import broker_pb2 as pb

from .batching import BatchContainer, KeyBasedBatchContainer, OpSendBatch, build_op, message_size
from .chunks import build_chunk_ops, chunk_entry_op, chunk_payload, join_chunk_futures
from .connection import BrokerStream, ConnectionPool
from .handler import ConnectionHandler
from .options import BatchingType, ProducerConfig
from .schemas import declared
from .session import SessionStream

log = logging.getLogger(__name__)

COMBINED_BYTES = 3 * 1024 * 1024
"""Queued batches go out together in one stream message up to this many entry bytes
(below gRPC's default 4 MiB receive limit, with room for the framing; one larger entry
still goes alone)."""


class PartitionProducer(ConnectionHandler):
    """Produces to one topic or one partition of a partitioned topic."""

    kind = "producer"

    def __init__(self, pool: ConnectionPool, topic: str, partition: int, conf: ProducerConfig) -> None:
        super().__init__(pool, topic)
        self.partition = partition
        self.conf = conf
        self.name = conf.producer_name or ""
        # The highest sequence id the broker confirmed; with initial_sequence_id, that
        # until a send is confirmed (as pulsar-client's lastSequenceIdPublished).
        initial = conf.initial_sequence_id
        self.last_sequence_id = -1 if initial is None else initial
        self.topic_epoch: int | None = None  # what the broker said; sent again on reopening
        self.schema_version = b""  # the broker's version of our schema, put in each entry
        self._loop = asyncio.get_running_loop()
        self._next_seq = 0 if initial is None else initial + 1
        self._request_ids = itertools.count(1)
        self._pending: dict[int, OpSendBatch] = {}  # by request id, in send order
        self._unsent: deque[OpSendBatch] = deque()
        container = KeyBasedBatchContainer if conf.batching_type == BatchingType.KeyBased else BatchContainer
        self._container = container(conf.batching_max_messages, conf.batching_max_allowed_size_in_bytes)
        self._batch_timer: asyncio.TimerHandle | None = None
        self._timeout_timer: asyncio.TimerHandle | None = None
        self._wakeup = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._pending_messages = 0
        self._room = asyncio.Event()
        self._room.set()

    # -- stream ---------------------------------------------------------------
    async def _open(self, address: str, target: str) -> BrokerStream | SessionStream:
        call = self.pool.open_produce(address, target)
        first = pb.ProduceRequest(open=pb.OpenProducer(
            topic=self.topic, producer_name=self.name, properties=self.conf.properties,
            access_mode=pb.ProducerAccessMode.ValueType(self.conf.access_mode), topic_epoch=self.topic_epoch,
            schema=declared(self.conf.schema),
        ))  # fmt: skip
        # A WaitForExclusive producer is answered once it holds the topic: no time limit.
        waits = self.conf.access_mode is ProducerAccessMode.WaitForExclusive
        resp = await call.open(first, None if waits else self.pool.operation_timeout_s)
        if not resp.HasField("opened"):
            call.cancel()
            raise MagnetarError(f"{target} answered the producer open with {resp}")
        opened = resp.opened  # type: ignore[attr-defined]
        self.name = opened.producer_name or self.name
        if self.conf.initial_sequence_id is None:
            # Go on from what the broker stored under this name. With initial_sequence_id
            # the application numbers from its own baseline, as in Pulsar: ids at or below
            # the broker's last for this name are dropped by deduplication.
            self._next_seq = max(self._next_seq, opened.last_sequence_id + 1)
            self.last_sequence_id = max(self.last_sequence_id, opened.last_sequence_id)
        if opened.HasField("topic_epoch"):
            self.topic_epoch = opened.topic_epoch
        self.schema_version = opened.schema_version
        return call

    def _connected(self) -> None:
        self._unsent = deque(self._pending.values())
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_loop(), name=f"producer-writer:{self.topic}")
        self._wakeup.set()

    def _retry_on_reconnect(self, exc: MagnetarError) -> bool:
        # The broker may not have noticed the old stream died yet.
        return exc.retriable or isinstance(exc, ProducerBusy)

    async def _read(self, call: BrokerStream | SessionStream) -> MagnetarError:
        try:
            while True:
                resp = await call.read()
                if resp is None:
                    return NotConnected(f"broker {self.broker_address} closed the produce stream")
                kind = resp.WhichOneof("kind")
                if kind == "closed":  # the broker ends the stream: why
                    return from_code(resp.closed.code, resp.closed.message)
                receipts = [resp.receipt] if kind == "receipt" else resp.receipts.receipts if kind == "receipts" else []
                for receipt in receipts:
                    err = self._on_receipt(receipt)
                    if err is not None:
                        return err
        except MagnetarError as exc:
            return exc

    def _on_receipt(self, receipt: pb.SendReceipt) -> MagnetarError | None:
        op = self._pending.get(receipt.request_id)
        if op is None:  # timed out already, or an answer to a resend we no longer wait for
            return None
        if receipt.HasField("error"):
            exc = from_code(receipt.error.code, receipt.error.message)
            if exc.retriable or receipt.error.retriable:
                return exc  # reconnect and resend it with everything after it
            del self._pending[receipt.request_id]
            op.fail(exc)
            self._messages_done(len(op.futures))
            return None
        del self._pending[receipt.request_id]
        if receipt.HasField("message_id"):
            ledger_id, entry_id = receipt.message_id.ledger_id, receipt.message_id.entry_id
        else:  # a duplicate the broker could not place
            ledger_id, entry_id = -1, -1
        for i, fut in enumerate(op.futures):
            if not fut.done():
                fut.set_result(MessageId.trusted(self.partition, ledger_id, entry_id, i if op.batched else -1))
        self._messages_done(len(op.futures))
        self.last_sequence_id = max(self.last_sequence_id, op.highest_sequence_id)
        return None

    async def _write_loop(self) -> None:
        """The one writer of the stream: sends unsent batches in order."""
        while not self._closed:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._unsent and self._call is not None:
                # Everything queued while the last write was in flight goes in one stream
                # message (each batch is still its own entry), in order. Taken off
                # _unsent now: if the write fails, the reconnect queues every pending
                # send again (_connected).
                # At most COMBINED_BYTES per stream message (a resend after a reconnect may
                # have max_pending_messages entries of up to 5 MB each queued).
                unsent, pending, size = self._unsent, self._pending, 0
                ops: list[OpSendBatch] = []
                while unsent:
                    op = unsent[0]
                    if ops and size + len(op.send.entry) > COMBINED_BYTES:
                        break
                    unsent.popleft()
                    if pending.get(op.request_id) is op:  # not timed out
                        ops.append(op)
                        size += len(op.send.entry)
                if not ops:
                    break
                if len(ops) == 1:
                    request = ops[0].request
                else:
                    request = pb.ProduceRequest(sends=pb.SendBatches(batches=[op.send for op in ops]))
                try:
                    await self._call.write(request)
                except Exception as exc:  # the stream broke; the reader reconnects
                    log.debug("producer on %s: write failed: %r", self.topic, exc)
                    break

    def _fail(self, exc: MagnetarError) -> None:
        self.failed = exc
        self._closed = True
        log.warning("producer %s on %s failed: %s", self.name, self.topic, exc)
        self._fail_all(exc)

    def _fail_all(self, exc: MagnetarError) -> None:
        if self._batch_timer is not None:
            self._batch_timer.cancel()
            self._batch_timer = None
        if self._timeout_timer is not None:
            self._timeout_timer.cancel()
            self._timeout_timer = None
        msgs, futs = self._container.drain()
        for fut in futs:
            if not fut.done():
                fut.set_exception(exc)
        pending, self._pending = self._pending, {}
        self._unsent.clear()
        for op in pending.values():
            op.fail(exc)
        self._messages_done(len(futs) + sum(len(op.futures) for op in pending.values()))

    # -- sending --------------------------------------------------------------
    def queue_full(self) -> bool:
        return self._pending_messages >= max(1, self.conf.max_pending_messages)

    async def wait_for_room(self) -> None:
        while self.queue_full():
            self._check_usable()
            self._room.clear()
            await self._room.wait()

    def _messages_done(self, count: int) -> None:
        """``count`` messages have an outcome: counted per batch, not with a callback on
        each message's future (that was one loop callback per message)."""
        self._pending_messages -= count
        self._room.set()

    def send_message(
        self, msg: pb.SingleMessage, sequence_id: int | None = None, alone: bool = False
    ) -> asyncio.Future[MessageId]:
        """Queue one message; the future completes with its id once stored.

        ``sequence_id``: the caller's own (default: the next of this producer).
        ``alone``: never batch it (delayed delivery needs an entry of its own).

        Raises:
            ProducerQueueIsFull: ``max_pending_messages`` are pending already.
        """
        self._check_usable()
        if self.queue_full():
            raise ProducerQueueIsFull(f"producer queue is full: {self._pending_messages} messages pending on {self.topic}")
        if sequence_id is None:
            msg.sequence_id = self._next_seq
            self._next_seq += 1
        else:
            msg.sequence_id = sequence_id
        fut: asyncio.Future[MessageId] = self._loop.create_future()
        self._pending_messages += 1
        if self.conf.chunking_enabled and len(msg.payload) > self.conf.max_message_size:
            cut = chunk_payload(msg.payload, self.conf.compression_type, self.conf.max_message_size)
            if cut is not None:
                ops = build_chunk_ops(
                    self._request_ids, self.name, msg, *cut, self.conf.compression_type, self._loop, self.schema_version,
                )
                join_chunk_futures(ops, fut)
                self._pending_messages += len(ops) - 1  # each chunk's receipt counts one done
                for op in ops:
                    self._enqueue(op)
                return fut
        if not self.conf.batching_enabled or alone:
            self.flush_batch()  # keeps send order: earlier batched messages go first
            self._enqueue(build_op(
                next(self._request_ids), self.name, [msg], [fut], batched=False, compression=self.conf.compression_type,
                schema_version=self.schema_version,
            ))
            return fut
        size = message_size(msg)  # once: a scan of its properties
        if not self._container.has_room_for(msg, size):
            self.flush_batch()
        if self._container.add(msg, fut, size):
            self.flush_batch()
        elif self._batch_timer is None:
            delay = max(0, self.conf.batching_max_publish_delay_ms) / 1000
            self._batch_timer = self._loop.call_later(delay, self.flush_batch)
        return fut

    def send_chunk_entry(
        self, entry: bytes, sequence_id: int, chunk: tuple[int, int], deliver_at_ms: int = 0
    ) -> asyncio.Future[MessageId]:
        """Queue one chunk of a chunked message given as its encoded entry (the broker's
        dead-letter moves copy chunks as they are); the future completes with the
        chunk's id once stored. ``chunk``: (chunk id, number of chunks).

        Raises:
            ProducerQueueIsFull: ``max_pending_messages`` are pending already.
        """
        self._check_usable()
        if self.queue_full():
            raise ProducerQueueIsFull(f"producer queue is full: {self._pending_messages} messages pending on {self.topic}")
        self.flush_batch()  # keeps send order
        op = chunk_entry_op(next(self._request_ids), entry, sequence_id, chunk, deliver_at_ms, self._loop)
        self._pending_messages += 1
        self._enqueue(op)
        return op.futures[0]

    def flush_batch(self) -> None:
        """Turn the messages gathered so far into one batch in flight."""
        if self._batch_timer is not None:
            self._batch_timer.cancel()
            self._batch_timer = None
        if not len(self._container) or self._closed:
            return
        key_based = self.conf.batching_type == BatchingType.KeyBased
        for msgs, futs in self._container.drain_batches():
            self._enqueue(build_op(
                next(self._request_ids), self.name, msgs, futs, batched=True, compression=self.conf.compression_type,
                schema_version=self.schema_version, key_based=key_based,
            ))

    def _enqueue(self, op: OpSendBatch) -> None:
        self._pending[op.request_id] = op
        if self.conf.send_timeout_millis > 0:
            op.deadline = self._loop.time() + self.conf.send_timeout_millis / 1000
            if self._timeout_timer is None:
                self._timeout_timer = self._loop.call_at(op.deadline, self._expire)
        self._unsent.append(op)
        self._wakeup.set()

    def _expire(self) -> None:
        """One timer per producer, not one per send (as Pulsar's sendTimeout task): the
        pending sends are in send order, so their deadlines are too; those past theirs
        fail with Timeout, and the timer is set again for the oldest still pending."""
        self._timeout_timer = None
        now = self._loop.time()
        expired = []
        for op in self._pending.values():
            if op.deadline > now:
                self._timeout_timer = self._loop.call_at(op.deadline, self._expire)
                break
            expired.append(op)
        for op in expired:
            del self._pending[op.request_id]
            op.fail(Timeout(f"send to {self.topic} not confirmed within {self.conf.send_timeout_millis} ms"))
            self._messages_done(len(op.futures))

    async def flush(self) -> None:
        """Send what is gathered and wait until every pending send has an outcome."""
        self.flush_batch()
        futs = [f for op in self._pending.values() for f in op.futures]
        if futs:
            await asyncio.gather(*futs, return_exceptions=True)

    async def close(self, flush: bool = True) -> None:
        """Send what is pending (waiting at most the send timeout), then stop.

        ``flush=False`` (``Client.shutdown``): stop at once; pending sends fail with
        AlreadyClosed (the broker may have stored some: their receipts are not waited for).
        """
        if self._released:
            return
        if flush and self.connected:
            try:
                timeout = self.conf.send_timeout_millis / 1000 or self.pool.operation_timeout_s
                await asyncio.wait_for(self.flush(), timeout)
            except TimeoutError:
                pass
        await self._stop()
        if self._writer is not None:
            self._writer.cancel()
            await asyncio.gather(self._writer, return_exceptions=True)
        self._fail_all(AlreadyClosed(f"producer on {self.topic} closed"))
