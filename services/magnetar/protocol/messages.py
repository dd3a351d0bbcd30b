"""A stored entry as the payload of a MESSAGE frame.

A MESSAGE carries ``[0x0e01][CRC32C][metadataSize][MessageMetadata][payload]`` after its
command. An entry a Pulsar client sent is stored in exactly that form (it starts with
``0x0e 0x01``) and goes out byte for byte. An entry the Magnetar SDK or the gateway sent
(an ``EntryBatch``) is encoded as Pulsar encodes what its producers send:

- one message sent without batching: its properties, partition key, ordering key, event
  time, sequence id and delivery time in the ``MessageMetadata``, its payload as the
  payload;
- a batch: the entry's producer name, first sequence id and publish time in the
  ``MessageMetadata`` with ``num_messages_in_batch`` = N, the payload N records
  ``[size][SingleMessageMetadata][payload]`` (each message's own properties, key,
  ordering key, event time and sequence id in its ``SingleMessageMetadata``).

Either way the entry's schema version, when it has one, is the ``MessageMetadata``'s.

Batch-index ack sets travel as Java's ``BitSet.toLongArray``: little-endian signed int64
words, a set bit meaning "not acknowledged"; :func:`ack_set_words` and
:func:`mask_of_ack_set` convert them to and from the core's masks (a set bit there is a
message of the mask).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Protocol

from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol.checksum import crc32c
from magnetar.protocol.frames import MAGIC_CRC32C

_U32 = struct.Struct(">I")
_CHECKSUM_HEADER = struct.Struct(">HI")
_SIZES = struct.Struct(">II")
_PULSAR_MAGIC = struct.pack(">H", MAGIC_CRC32C)
_WORD = 1 << 64
_WORD_MASK = _WORD - 1


class MessageLike(Protocol):
    """What is read of one message of an entry (the broker core's ``MessageView``)."""

    @property
    def payload(self) -> bytes: ...

    @property
    def properties(self) -> Mapping[str, str]: ...

    @property
    def partition_key(self) -> str: ...

    @property
    def has_partition_key(self) -> bool: ...

    @property
    def ordering_key(self) -> bytes: ...

    @property
    def event_time_ms(self) -> int: ...

    @property
    def sequence_id(self) -> int: ...

    @property
    def deliver_at_ms(self) -> int: ...


class EntryLike(Protocol):
    """What is read of an entry (the broker core's ``Entry``)."""

    @property
    def producer_name(self) -> str: ...

    @property
    def sequence_id(self) -> int: ...

    @property
    def publish_time_ms(self) -> int: ...

    @property
    def batched(self) -> bool: ...

    @property
    def messages(self) -> Sequence[MessageLike]: ...

    @property
    def schema_version(self) -> bytes: ...


def is_pulsar_entry(data: bytes) -> bool:
    """The entry was stored as a Pulsar client sent it (it starts with the checksum magic)."""
    return data[:2] == _PULSAR_MAGIC


def metadata_and_payload(entry: EntryLike) -> tuple[pb.MessageMetadata, bytes]:
    """The ``MessageMetadata`` and payload Pulsar sends for ``entry``.

    An entry that is not batched carries one message; a batched one (any number of
    messages, one included) goes out in the batch format.
    """
    messages = entry.messages
    metadata = pb.MessageMetadata(
        producer_name=entry.producer_name, sequence_id=entry.sequence_id, publish_time=entry.publish_time_ms,
    )  # fmt: skip
    if entry.schema_version:
        metadata.schema_version = entry.schema_version
    if not entry.batched and len(messages) == 1:
        m = messages[0]
        if m.properties:
            metadata.properties.extend(pb.KeyValue(key=k, value=v) for k, v in m.properties.items())
        if m.has_partition_key:
            metadata.partition_key = m.partition_key
        if m.ordering_key:
            metadata.ordering_key = m.ordering_key
        if m.event_time_ms > 0:
            metadata.event_time = m.event_time_ms
        if m.deliver_at_ms > 0:
            metadata.deliver_at_time = m.deliver_at_ms
        metadata.sequence_id = m.sequence_id or entry.sequence_id
        chunks = getattr(entry, "num_chunks_from_msg", 0)
        if chunks > 1:  # a chunk of the Magnetar SDK's chunked message: Pulsar's chunk fields
            metadata.uuid, metadata.chunk_id = entry.uuid, entry.chunk_id  # type: ignore[attr-defined]
            metadata.num_chunks_from_msg = chunks
            metadata.total_chunk_msg_size = entry.total_chunk_msg_size  # type: ignore[attr-defined]
            if getattr(entry, "compression", 0):  # its part of the whole compressed payload
                metadata.compression = entry.compression  # type: ignore[attr-defined]
                metadata.uncompressed_size = entry.uncompressed_size  # type: ignore[attr-defined]
        return metadata, m.payload
    metadata.num_messages_in_batch = len(messages)
    if messages:
        metadata.highest_sequence_id = messages[-1].sequence_id
        if messages[0].has_partition_key:  # as Pulsar's producers do: the first message's key
            metadata.partition_key = messages[0].partition_key
    records = []
    for m in messages:
        single = pb.SingleMessageMetadata(payload_size=len(m.payload), sequence_id=m.sequence_id)
        if m.properties:
            single.properties.extend(pb.KeyValue(key=k, value=v) for k, v in m.properties.items())
        if m.has_partition_key:
            single.partition_key = m.partition_key
        if m.ordering_key:
            single.ordering_key = m.ordering_key
        if m.event_time_ms > 0:
            single.event_time = m.event_time_ms
        body = single.SerializeToString()
        records.append(_U32.pack(len(body)))
        records.append(body)
        records.append(m.payload)
    return metadata, b"".join(records)


def checksummed(metadata: pb.MessageMetadata, payload: bytes) -> bytes:
    """``[0x0e01][CRC32C][metadataSize][metadata][payload]``: a message as stored and sent."""
    meta = metadata.SerializeToString()
    checked = _U32.pack(len(meta)) + meta + payload
    return _CHECKSUM_HEADER.pack(MAGIC_CRC32C, crc32c(checked)) + checked


def message_frame(command: pb.BaseCommand, message: bytes) -> bytes:
    """A MESSAGE frame: ``command`` then ``message`` (a :func:`checksummed` message, or a
    stored Pulsar entry, which has that form)."""
    body = command.SerializeToString()
    return _SIZES.pack(4 + len(body) + len(message), len(body)) + body + message


def ack_set_words(mask: int, n: int) -> list[int]:
    """Pulsar's ack set for an entry of ``n`` messages of which those of ``mask`` are to
    be acknowledged still (signed little-endian int64 words)."""
    mask &= (1 << n) - 1
    words = []
    for _ in range((n + 63) // 64):
        word = mask & _WORD_MASK
        words.append(word - _WORD if word >= 1 << 63 else word)
        mask >>= 64
    return words


def mask_of_ack_set(words: Sequence[int]) -> int:
    """The messages an ack set says are not yet acknowledged, as a mask."""
    mask = 0
    for i, word in enumerate(words):
        mask |= (word & _WORD_MASK) << (64 * i)
    return mask
