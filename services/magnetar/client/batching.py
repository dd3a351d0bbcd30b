"""Gathering messages into batches: one ``SendBatch`` carries one serialized EntryBatch.

Two containers, as pulsar-client's ``BatchingType``: :class:`BatchContainer` (``Default``)
gathers every message into one batch; :class:`KeyBasedBatchContainer` (``KeyBased``)
gathers one batch per message key, so that every message of an entry has the same key and
a Key_Shared subscription hands the entry whole to the one consumer of that key.
"""

from __future__ import annotations

import asyncio
import time

from magnetar.common.compression import compress
from magnetar.proto.v1 import broker_pb2 as pb

# A SingleMessage's fields beyond its payload and properties, roughly (for size limits).
_PER_MESSAGE_OVERHEAD = 32


def message_size(msg: pb.SingleMessage) -> int:
    size = len(msg.payload) + len(msg.partition_key) + _PER_MESSAGE_OVERHEAD
    if msg.properties:  # most messages have none: skip the scan
        size += sum(len(k) + len(v) for k, v in msg.properties.items())
    return size


def batch_key(msg: pb.SingleMessage) -> bytes:
    """The key a ``KeyBased`` container batches ``msg`` under: its ordering key, else its
    partition key, as Key_Shared routes it (b"": neither; such messages share a batch)."""
    if msg.ordering_key:
        return msg.ordering_key
    return msg.partition_key.encode() if msg.has_partition_key else b""


class OpSendBatch:
    """One batch in flight: what was sent and who waits for its receipt."""

    __slots__ = ("send", "request_id", "highest_sequence_id", "futures", "batched", "deadline")

    def __init__(self, send: pb.SendBatch, futures: list[asyncio.Future], batched: bool) -> None:
        self.send = send
        self.request_id: int = send.request_id  # plain ints: read for every receipt
        self.highest_sequence_id: int = send.highest_sequence_id
        self.futures = futures
        self.batched = batched
        # When the send times out (loop time); inf: never.
        self.deadline = float("inf")

    @property
    def request(self) -> pb.ProduceRequest:
        """The send as a whole ``ProduceRequest`` (what goes out when it travels alone)."""
        return pb.ProduceRequest(send=self.send)

    @property
    def num_messages(self) -> int:
        return len(self.futures)

    def fail(self, exc: BaseException) -> None:
        for fut in self.futures:
            if not fut.done():
                fut.set_exception(exc)


def build_op(
    request_id: int,
    producer_name: str,
    messages: list[pb.SingleMessage],
    futures: list[asyncio.Future],
    batched: bool,
    compression: int = 0,
    schema_version: bytes = b"",
    key_based: bool = False,
) -> OpSendBatch:
    """The send of ``messages`` as one entry; ``compression`` (a ``CompressionType``, 0:
    none): the messages compressed together into ``compressed_messages``, the header
    (producer, sequence id, publish time) left readable, as Pulsar compresses a batch's
    records and not its ``MessageMetadata``. ``schema_version``: what the broker gave
    the producer for its schema (b"": none), carried by the entry.

    ``key_based``: a batch of a :class:`KeyBasedBatchContainer`, whose sequence ids
    interleave with those of the other keys' batches (A: 0, 3, 4 and B: 1, 2): it claims
    only its highest (``lowest_sequence_id`` = ``highest_sequence_id``), and the
    container sends its batches in the order of those, so the broker's deduplication sees
    the ids rise from send to send and takes none of them for a resend (Pulsar's Java
    client sends its key-based batches the same way)."""
    first = messages[0].sequence_id
    if len(messages) == 1:
        low = high = first
    else:
        seqs = [m.sequence_id for m in messages]
        low, high = min(seqs), max(seqs)
    if key_based:
        low = high
    entry = pb.EntryBatch(
        producer_name=producer_name,
        sequence_id=first,
        publish_time_ms=int(time.time() * 1000),
        batched=batched,
        schema_version=schema_version,
    )
    if compression:
        raw = pb.EntryBatch(messages=messages).SerializeToString()
        entry.compression = compression
        entry.uncompressed_size = len(raw)
        entry.num_messages = len(messages)
        entry.compressed_messages = compress(compression, raw)
    else:
        entry.messages.extend(messages)
    send = pb.SendBatch(
        request_id=request_id,
        entry=entry.SerializeToString(),
        num_messages=len(messages),
        highest_sequence_id=high,
        lowest_sequence_id=low,
    )
    if len(messages) == 1:  # the broker parses the entry only if it is delayed
        send.deliver_at_ms = messages[0].deliver_at_ms
    return OpSendBatch(send, futures, batched)


class BatchContainer:
    """Messages waiting to become one batch, bounded by count and bytes."""

    def __init__(self, max_messages: int, max_bytes: int) -> None:
        self.max_messages = max(1, max_messages)
        self.max_bytes = max(1, max_bytes)
        self.messages: list[pb.SingleMessage] = []
        self.futures: list[asyncio.Future] = []
        self.size = 0

    def __len__(self) -> int:
        return len(self.messages)

    def has_room_for(self, msg: pb.SingleMessage, size: int | None = None) -> bool:
        """An empty container takes any one message; otherwise both limits must hold.
        ``size``: the message's :func:`message_size`, when the caller has it already."""
        if not self.messages:
            return True
        if size is None:
            size = message_size(msg)
        return len(self.messages) < self.max_messages and self.size + size <= self.max_bytes

    def add(self, msg: pb.SingleMessage, fut: asyncio.Future, size: int | None = None) -> bool:
        """Add a message; True when the container is now full and should be sent."""
        self.messages.append(msg)
        self.futures.append(fut)
        self.size += message_size(msg) if size is None else size
        return len(self.messages) >= self.max_messages or self.size >= self.max_bytes

    def drain(self) -> tuple[list[pb.SingleMessage], list[asyncio.Future]]:
        msgs, futs = self.messages, self.futures
        self.messages, self.futures, self.size = [], [], 0
        return msgs, futs

    def drain_batches(self) -> list[tuple[list[pb.SingleMessage], list[asyncio.Future]]]:
        """What is gathered, as the batches to send in this order (here: one)."""
        return [self.drain()] if self.messages else []


class KeyBasedBatchContainer(BatchContainer):
    """``BatchingType.KeyBased``: one batch per key (:func:`batch_key`).

    The limits hold for all of its batches together, as pulsar-client's key-based
    container: it is full when all its messages reach ``max_messages`` or their bytes
    ``max_bytes``, and then every batch goes. The batches go in the order of their
    highest sequence ids (see ``key_based`` of :func:`build_op`); each key's messages are
    in one batch, in send order, so each key keeps its order.
    """

    def __init__(self, max_messages: int, max_bytes: int) -> None:
        super().__init__(max_messages, max_bytes)
        self._by_key: dict[bytes, tuple[list[pb.SingleMessage], list[asyncio.Future]]] = {}

    def add(self, msg: pb.SingleMessage, fut: asyncio.Future, size: int | None = None) -> bool:
        batch = self._by_key.get(batch_key(msg))
        if batch is None:
            batch = self._by_key[batch_key(msg)] = ([], [])
        batch[0].append(msg)
        batch[1].append(fut)
        return super().add(msg, fut, size)

    def drain(self) -> tuple[list[pb.SingleMessage], list[asyncio.Future]]:
        self._by_key = {}
        return super().drain()

    def drain_batches(self) -> list[tuple[list[pb.SingleMessage], list[asyncio.Future]]]:
        batches = sorted(self._by_key.values(), key=lambda b: max(m.sequence_id for m in b[0]))
        self.drain()
        return batches
