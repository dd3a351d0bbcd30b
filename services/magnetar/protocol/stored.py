"""An entry a Pulsar client sent, as the broker stores it, read back for the core.

A Pulsar producer's entry is stored as sent: the payload section of its SEND frame,
``[0x0e01][CRC32C][metadataSize][MessageMetadata][payload]`` (a client below protocol
version 6 sends no magic and checksum: :func:`stored_entry` adds them, so every stored
Pulsar entry starts ``0x0e 0x01``). A consumer on Pulsar's protocol gets those bytes back
as they are; the core reads them through :func:`decode` as an
:class:`~magnetar.broker.entry.Entry` (duck-typed here: this package knows no broker code).

What the core reads:

- of the entry: the producer name, the sequence id of its first message, the publish
  time, whether it is a batch (``num_messages_in_batch`` set, as Pulsar's clients mark a
  batch), its compression, schema version and the highest sequence id;
- of each message: its payload, properties, partition key and ordering key, event time,
  sequence id (a batch's records carry theirs, else the first one's + its index) and
  deliver-at time (the entry's: Pulsar's clients send a delayed message alone).

A batch payload is ``num_messages_in_batch`` records ``[size][SingleMessageMetadata]
[payload]``. A compressed entry (``compression`` set) has that payload (or a single
message's) compressed as a whole, ``uncompressed_size`` bytes before compression
(:mod:`magnetar.common.compression`): it is decompressed, bounded by that size and by the
reader's limit, then read as an uncompressed one. :attr:`PulsarEntry.payload` stays the
payload as sent (compressed), which is what a Pulsar consumer is sent.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, overload

from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

from magnetar.common import compression
from magnetar.common.errors import InvalidArgument, MessageTooBig
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol.checksum import crc32c

MAGIC: Final = b"\x0e\x01"
"""The first bytes of a stored Pulsar entry (Pulsar's magic of a checksummed message)."""

_U32 = struct.Struct(">I")
_HEADER = struct.Struct(">HII")  # magic, CRC32C, metadataSize
_NONE = pb.CompressionType.NONE
_COMPRESSION_FIELD: Final = pb.MessageMetadata.DESCRIPTOR.fields_by_name["compression"].number
_COMPRESSION_TAG: Final = bytes([_COMPRESSION_FIELD << 3])  # field 8, varint
MIN_BATCHED_MESSAGE_BYTES: Final = 6
"""The least a message of a batch takes in its (uncompressed) payload: its 4-byte size
and a ``SingleMessageMetadata`` of at least its required ``payload_size`` (2 bytes)."""


def max_batch_messages(max_message_size: int) -> int:
    """The most messages a batch of at most ``max_message_size`` bytes can hold."""
    return max(1, max_message_size // MIN_BATCHED_MESSAGE_BYTES)


def check_codec(metadata: pb.MessageMetadata, metadata_bytes: bytes) -> None:
    """Refuse a ``compression`` that is no codec. ``MessageMetadata`` is proto2, whose
    enums are closed: a number that is no ``CompressionType`` is parsed into the unknown
    fields, leaving ``compression`` NONE, and the compressed bytes would be read as a
    payload. Looked for only when the metadata holds a byte that can start field 8
    (``0x40``), which most do not: a ``bytes`` search, not a parse, on the publish path.

    Raises:
        InvalidArgument: an unknown codec number.
    """
    if _COMPRESSION_TAG not in metadata_bytes:
        return
    for unknown in UnknownFieldSet(metadata):
        if unknown.field_number == _COMPRESSION_FIELD:
            compression.codec(unknown.data)  # raises: an unknown number is why it is here


def check_batch_count(metadata: pb.MessageMetadata, max_message_size: int) -> None:
    """Refuse a batch that claims more messages than fit in a message of the broker's
    size limit, before anything is decompressed or walked (a count of 2^31 is refused
    by its metadata alone); Pulsar's clients keep a batch, uncompressed, within the
    broker's ``maxMessageSize``.

    Raises:
        InvalidArgument: ``num_messages_in_batch`` over :func:`max_batch_messages`.
    """
    limit = max_batch_messages(max_message_size)
    if metadata.HasField("num_messages_in_batch") and metadata.num_messages_in_batch > limit:
        raise InvalidArgument(
            f"a batch of {metadata.num_messages_in_batch} messages: at most {limit} fit in a message "
            f"of {max_message_size} bytes"
        )


def check_chunk(metadata: pb.MessageMetadata, payload_size: int, max_message_size: int) -> tuple[int, int] | None:
    """(chunk id, number of chunks) of a message sent as a chunk of a chunked message
    (``num_chunks_from_msg`` over 1), None for any other. Pulsar's clients send a chunk
    alone (never batched), with its message's ``uuid``, and cut the payload into parts of
    at most ``max_message_size`` bytes.

    Raises:
        InvalidArgument: chunk fields that do not make a chunk (a chunk id outside
            0..n-1, no uuid, a batched chunk, a part larger than the whole).
        MessageTooBig: a chunk payload over ``max_message_size``.
    """
    n = metadata.num_chunks_from_msg
    if n <= 1:
        return None
    chunk_id = metadata.chunk_id
    if not 0 <= chunk_id < n:
        raise InvalidArgument(f"chunk {chunk_id} of a message of {n} chunks: chunk ids are 0 to {n - 1}")
    if not metadata.uuid:
        raise InvalidArgument(f"chunk {chunk_id} of {n} without the uuid of its message")
    if metadata.HasField("num_messages_in_batch"):
        raise InvalidArgument("a chunk of a chunked message cannot be a batch (chunking needs batching off)")
    if payload_size > max_message_size:
        raise MessageTooBig(payload_size, max_message_size)
    if payload_size > metadata.total_chunk_msg_size:
        raise InvalidArgument(
            f"chunk {chunk_id} of {n} holds {payload_size} bytes of a message of {metadata.total_chunk_msg_size}"
        )
    return chunk_id, n


@dataclass(frozen=True, slots=True)
class PulsarMessage:
    """One message of a stored Pulsar entry (a ``MessageView``)."""

    payload: bytes
    properties: Mapping[str, str] = field(default_factory=dict)
    partition_key: str = ""
    has_partition_key: bool = False
    ordering_key: bytes = b""
    event_time_ms: int = 0
    sequence_id: int = 0
    deliver_at_ms: int = 0
    null_value: bool = False


@dataclass(frozen=True, slots=True)
class PulsarEntry:
    """A stored Pulsar entry (an ``Entry``), with the metadata it was sent with."""

    metadata: pb.MessageMetadata
    messages: Sequence[PulsarMessage]
    """A tuple (:func:`decode`), or :class:`LazyMessages` (:func:`view`)."""
    payload: bytes
    """The payload section as sent (a batch's records, possibly compressed)."""

    @property
    def producer_name(self) -> str:
        return self.metadata.producer_name

    @property
    def sequence_id(self) -> int:
        return self.metadata.sequence_id

    @property
    def highest_sequence_id(self) -> int:
        """The highest sequence id the entry claims, as its door took it (deduplication):
        the metadata's ``highest_sequence_id``, else its ``sequence_id`` (a batch's
        messages need not be numbered one by one: see the Pulsar door's SEND)."""
        return max(self.metadata.highest_sequence_id, self.metadata.sequence_id)

    @property
    def publish_time_ms(self) -> int:
        return self.metadata.publish_time

    @property
    def batched(self) -> bool:
        return self.metadata.HasField("num_messages_in_batch")

    @property
    def compression(self) -> int:
        """``CompressionType`` of the payload (``NONE``: 0)."""
        return self.metadata.compression

    @property
    def uncompressed_size(self) -> int:
        """The payload's size uncompressed (a chunk's: the whole message's; 0 when not
        compressed)."""
        return self.metadata.uncompressed_size

    @property
    def compressed(self) -> bool:
        return self.metadata.compression != _NONE

    @property
    def compression_name(self) -> str:
        return pb.CompressionType.Name(self.metadata.compression)

    @property
    def schema_version(self) -> bytes:
        return self.metadata.schema_version

    @property
    def uuid(self) -> str:
        return self.metadata.uuid

    @property
    def chunk_id(self) -> int:
        return self.metadata.chunk_id

    @property
    def num_chunks_from_msg(self) -> int:
        return self.metadata.num_chunks_from_msg

    @property
    def total_chunk_msg_size(self) -> int:
        return self.metadata.total_chunk_msg_size


def stored_entry(metadata_bytes: bytes, payload: bytes, checksum: int | None = None) -> bytes:
    """The bytes stored for a message sent with ``metadata_bytes`` (a serialized
    ``MessageMetadata``) and ``payload``: magic, CRC32C, metadata size, metadata, payload.

    ``checksum``: the CRC32C the frame came with, already verified by the decoder
    (:attr:`magnetar.protocol.frames.Frame.checksum`); None: computed here (a client
    below protocol version 6 sends none)."""
    size = _U32.pack(len(metadata_bytes))
    if checksum is None:
        checksum = crc32c(payload, crc32c(metadata_bytes, crc32c(size)))
    return b"".join((MAGIC, _U32.pack(checksum), size, metadata_bytes, payload))


def decode(data: bytes, max_uncompressed: int = compression.MAX_UNCOMPRESSED_SIZE) -> PulsarEntry:
    """The stored Pulsar entry ``data`` (starting with :data:`MAGIC`).

    Args:
        max_uncompressed: the most a compressed payload may declare uncompressed.

    Raises:
        InvalidArgument: not a whole, intact Pulsar entry (no magic, a checksum that does
            not match, metadata that does not parse, a compressed payload that does not
            decompress to its ``uncompressed_size`` within ``max_uncompressed``, batch
            records that do not fit).
    """
    metadata, payload = _checked(data)
    return PulsarEntry(metadata, _messages(metadata, opened(metadata, payload, max_uncompressed)), payload)


def opened(metadata: pb.MessageMetadata, payload: bytes, max_uncompressed: int) -> bytes:
    """The payload sent with ``metadata``, decompressed if it is compressed.

    A chunk of a chunked message is the exception: Pulsar's clients compress the whole
    message and cut the compressed bytes into chunks, so no chunk decompresses alone; its
    part is returned as sent, and the consumer decompresses the message it reassembles.

    Raises:
        InvalidArgument: an unknown codec, an ``uncompressed_size`` over
            ``max_uncompressed``, a payload that does not decompress to it.
    """
    if metadata.compression == _NONE or metadata.num_chunks_from_msg > 1:
        return payload
    return compression.decompress(metadata.compression, payload, metadata.uncompressed_size, max_uncompressed)


def view(data: bytes) -> PulsarEntry:
    """:func:`decode`, checked as :func:`decode` checks it, but with messages built on
    first use (:class:`LazyMessages`): what the dispatchers read of every entry they send
    is its number of messages, and a Pulsar consumer gets the entry's bytes as stored, so
    a batch going to one is never split into messages.

    Raises:
        InvalidArgument: as :func:`decode`.
    """
    metadata, payload = _checked(data)
    records = opened(metadata, payload, compression.MAX_UNCOMPRESSED_SIZE)
    return PulsarEntry(metadata, LazyMessages(metadata, records, _count(metadata, records)), payload)


class LazyMessages(Sequence[PulsarMessage]):
    """The messages of a checked entry (:func:`view`): their number at once, the messages
    themselves built the first time one is asked for (:func:`_messages` cannot fail on
    bytes :func:`_count` accepted)."""

    __slots__ = ("_metadata", "_payload", "_count", "_built")

    def __init__(self, metadata: pb.MessageMetadata, payload: bytes, count: int) -> None:
        self._metadata = metadata
        self._payload = payload
        self._count = count
        self._built: tuple[PulsarMessage, ...] | None = None

    def _all(self) -> tuple[PulsarMessage, ...]:
        if self._built is None:
            self._built = _messages(self._metadata, self._payload)
        return self._built

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> PulsarMessage: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[PulsarMessage]: ...

    def __getitem__(self, index: int | slice) -> PulsarMessage | Sequence[PulsarMessage]:
        return self._all()[index]

    def __iter__(self) -> Iterator[PulsarMessage]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyMessages):
            other = other._all()
        return isinstance(other, tuple) and self._all() == other

    def __hash__(self) -> int:
        return hash(self._all())

    def __repr__(self) -> str:
        return f"LazyMessages({self._count} messages)"


def count_messages(data: bytes, max_uncompressed: int = compression.MAX_UNCOMPRESSED_SIZE) -> int:
    """How many messages the stored Pulsar entry ``data`` holds, checked as :func:`decode`
    checks it (what this accepts, :func:`decode` reads) without building the messages:
    for a batch, each record's ``SingleMessageMetadata`` is parsed for its payload size
    only. The publish path's check, about a fifth of :func:`decode`'s CPU for a batch.

    Raises:
        InvalidArgument: as :func:`decode`.
    """
    metadata, payload = _checked(data)
    return _count(metadata, opened(metadata, payload, max_uncompressed))


def _count(metadata: pb.MessageMetadata, payload: bytes) -> int:
    if not metadata.HasField("num_messages_in_batch"):
        return 1
    count = metadata.num_messages_in_batch
    if count < 1:
        raise InvalidArgument(f"a Pulsar batch of {count} messages")
    parse = pb.SingleMessageMetadata.FromString
    unpack = _U32.unpack_from
    pos, end = 0, len(payload)
    for i in range(count):
        if end - pos < 4:
            raise InvalidArgument(f"a Pulsar batch that ends before its message {i} of {count}")
        (size,) = unpack(payload, pos)
        pos += 4
        if size > end - pos:
            raise InvalidArgument(f"a Pulsar batch whose message {i} metadata size {size} does not fit")
        try:
            single = parse(payload[pos : pos + size])
        except DecodeError as exc:
            raise InvalidArgument(f"a Pulsar batch whose message {i} metadata does not parse: {exc}") from None
        if not single.HasField("payload_size"):
            raise InvalidArgument(f"a Pulsar batch whose message {i} metadata lacks payload_size")
        pos += size
        length = single.payload_size
        if length < 0 or length > end - pos:
            raise InvalidArgument(f"a Pulsar batch whose message {i} payload of {length} bytes does not fit")
        pos += length
    if pos != end:
        raise InvalidArgument(f"a Pulsar batch of {count} messages with {end - pos} bytes after them")
    return count


def _checked(data: bytes) -> tuple[pb.MessageMetadata, bytes]:
    """The metadata and payload of the stored Pulsar entry ``data``, its magic, sizes and
    checksum checked and its metadata parsed (the part of :func:`decode` before the messages)."""
    if len(data) < _HEADER.size or data[:2] != MAGIC:
        raise InvalidArgument("not a Pulsar entry: it does not start with the magic 0x0e01 and a checksum")
    _, expected, size = _HEADER.unpack_from(data, 0)
    if size > len(data) - _HEADER.size:
        raise InvalidArgument(f"a Pulsar entry whose metadata size {size} does not fit its {len(data)} bytes")
    actual = crc32c(memoryview(data)[6:])
    if actual != expected:
        raise InvalidArgument(f"a Pulsar entry whose checksum does not match (stored {expected:#010x}, computed {actual:#010x})")
    metadata = pb.MessageMetadata()
    try:
        metadata.ParseFromString(data[_HEADER.size : _HEADER.size + size])
    except DecodeError as exc:
        raise InvalidArgument(f"a Pulsar entry whose message metadata does not parse: {exc}") from None
    if not metadata.IsInitialized():
        missing = ", ".join(metadata.FindInitializationErrors())
        raise InvalidArgument(f"a Pulsar entry whose message metadata lacks {missing}")
    check_codec(metadata, data[_HEADER.size : _HEADER.size + size])
    return metadata, data[_HEADER.size + size :]


def _messages(metadata: pb.MessageMetadata, payload: bytes) -> tuple[PulsarMessage, ...]:
    deliver_at = metadata.deliver_at_time if metadata.HasField("deliver_at_time") else 0
    batched = metadata.HasField("num_messages_in_batch")
    count = metadata.num_messages_in_batch
    if batched and count < 1:
        raise InvalidArgument(f"a Pulsar batch of {count} messages")
    if not batched:
        return (_outer(metadata, payload, deliver_at),)
    out = []
    pos, end = 0, len(payload)
    for i in range(count):
        if end - pos < 4:
            raise InvalidArgument(f"a Pulsar batch that ends before its message {i} of {count}")
        (size,) = _U32.unpack_from(payload, pos)
        pos += 4
        if size > end - pos:
            raise InvalidArgument(f"a Pulsar batch whose message {i} metadata size {size} does not fit")
        single = pb.SingleMessageMetadata()
        try:
            single.ParseFromString(payload[pos : pos + size])
        except DecodeError as exc:
            raise InvalidArgument(f"a Pulsar batch whose message {i} metadata does not parse: {exc}") from None
        if not single.HasField("payload_size"):
            raise InvalidArgument(f"a Pulsar batch whose message {i} metadata lacks payload_size")
        pos += size
        length = single.payload_size
        if length < 0 or length > end - pos:
            raise InvalidArgument(f"a Pulsar batch whose message {i} payload of {length} bytes does not fit")
        has_key = single.HasField("partition_key") and not single.null_partition_key
        out.append(PulsarMessage(
            payload[pos : pos + length],
            {kv.key: kv.value for kv in single.properties},
            single.partition_key if has_key else "",
            has_key,
            single.ordering_key,
            single.event_time,
            single.sequence_id if single.HasField("sequence_id") else metadata.sequence_id + i,
            deliver_at,
            single.null_value,
        ))  # fmt: skip
        pos += length
    if pos != end:
        raise InvalidArgument(f"a Pulsar batch of {count} messages with {end - pos} bytes after them")
    return tuple(out)


def _outer(metadata: pb.MessageMetadata, payload: bytes, deliver_at: int) -> PulsarMessage:
    has_key = metadata.HasField("partition_key") and not metadata.null_partition_key
    return PulsarMessage(
        payload,
        {kv.key: kv.value for kv in metadata.properties},
        metadata.partition_key if has_key else "",
        has_key,
        metadata.ordering_key,
        metadata.event_time,
        metadata.sequence_id,
        deliver_at,
        metadata.null_value,
    )
