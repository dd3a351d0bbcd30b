"""Entries as the broker stores them: decoded for the core, encoded for the moves.

An entry is what one send of a producer stored: a batch of one or more messages, with
the producer's name, the sequence id of its first message and the publish time. The
core reads entries through :class:`Entry` and :class:`MessageView` (Protocols: what the
dispatchers, peeks, deduplication and dead-letter moves read) and never through a wire
type.

Stored formats, told apart by the entry's first bytes:

- a ``broker.proto`` ``EntryBatch`` (what the Magnetar SDK and the gateway send, and the
  Spark jobs read): decoded by protobuf, whose parsed message is itself the view (no
  copy: parsing is the whole cost, on the dispatch hot path). A compressed one
  (``compression`` set: the SDK's ``compression_type``) holds its messages in
  ``compressed_messages``, a serialized ``EntryBatch`` of only its messages compressed
  with Pulsar's codecs, as Pulsar compresses a batch's records and not its metadata:
  they are decompressed (:func:`magnetar.common.compression.open_entry_batch`, bounded
  by ``uncompressed_size`` and the reader's limit) into an ``EntryBatch`` read as any
  other. Copies the core writes (retry and dead-letter moves) are not compressed;
- a Pulsar client's entry, stored as its SEND frame carried it, which starts with
  ``0x0e 0x01`` (Pulsar's magic of a checksummed message): decoded by
  :func:`magnetar.protocol.stored.decode` into its own :class:`Entry`. Such bytes never
  start a valid ``EntryBatch`` (``0x0e`` is field 1 with wire type 6, which does not
  exist), so the first two bytes tell the formats apart. A compressed one is
  decompressed there the same way.

Protobuf is the storage format here, not gRPC: this module is the only one of the broker
core that touches ``broker_pb2``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from google.protobuf.message import DecodeError

from magnetar.common.compression import MAX_UNCOMPRESSED_SIZE, open_entry_batch
from magnetar.common.errors import InvalidArgument, MessageTooBig
from magnetar.proto.v1.broker_pb2 import EntryBatch as _EntryBatch
from magnetar.proto.v1.broker_pb2 import SingleMessage as _SingleMessage
from magnetar.protocol import stored as _pulsar

PULSAR_MAGIC: Final = _pulsar.MAGIC
"""The first bytes of an entry a Pulsar client sent (see the module docstring)."""


class MessageView(Protocol):
    """What the core reads of one message of an entry."""

    @property
    def payload(self) -> bytes: ...

    @property
    def properties(self) -> Mapping[str, str]: ...

    @property
    def partition_key(self) -> str: ...

    @property
    def has_partition_key(self) -> bool: ...

    @property
    def ordering_key(self) -> bytes:
        """Pulsar's ordering key; b"": none. Key_Shared routes by it before the partition key."""

    @property
    def event_time_ms(self) -> int:
        """0: none."""

    @property
    def sequence_id(self) -> int: ...

    @property
    def deliver_at_ms(self) -> int:
        """Delayed delivery: not before this time (ms since the epoch); 0: at once."""


class Entry(Protocol):
    """What the core reads of a stored entry."""

    @property
    def producer_name(self) -> str:
        """'' for an entry that names no producer."""

    @property
    def sequence_id(self) -> int:
        """The sequence id of the first message."""

    @property
    def publish_time_ms(self) -> int: ...

    @property
    def batched(self) -> bool:
        """False: one message sent without batching (its id has batch index -1)."""

    @property
    def messages(self) -> Sequence[MessageView]: ...

    @property
    def schema_version(self) -> bytes:
        """The schema version the messages were sent with (b"": none): the version the
        broker gave a Pulsar producer that declared a schema (Pulsar's 8-byte big-endian
        long); the Magnetar SDK sends none."""

    @property
    def uuid(self) -> str:
        """A chunk's message: ``<producer name>-<sequence id>`` ("": not a chunk)."""

    @property
    def chunk_id(self) -> int:
        """Which chunk of its message this entry is (0 first)."""

    @property
    def num_chunks_from_msg(self) -> int:
        """How many chunks its message was split into (0: not a chunk)."""

    @property
    def total_chunk_msg_size(self) -> int:
        """The size of the whole chunked message's payload."""

    @property
    def compression(self) -> int:
        """The codec, numbered as Pulsar's ``CompressionType`` (0: none). A compressed
        chunk's payload is its part of the compressed whole."""

    @property
    def uncompressed_size(self) -> int:
        """A compressed payload's size uncompressed (a chunk's: the whole message's)."""


class ChunkOf(Protocol):
    """The chunk fields of an entry (an :class:`Entry` has them; so has a move's copy of
    a chunk, ``broker/deadletter/copies.py`` ``ChunkFields``)."""

    @property
    def uuid(self) -> str: ...

    @property
    def chunk_id(self) -> int: ...

    @property
    def num_chunks_from_msg(self) -> int: ...

    @property
    def total_chunk_msg_size(self) -> int: ...


CHUNK_METADATA_ROOM: Final = 10 * 1024
"""How much larger than the max message size a chunk's entry may be: a producer splits a
message into payloads of at most the max message size each, and each chunk's metadata
(with its uuid and chunk fields) comes on top. Pulsar's frame padding
(``MESSAGE_SIZE_FRAME_PADDING``), the bound Pulsar's broker puts on a chunk."""


def is_partial_chunk(entry: Entry) -> bool:
    """Whether ``entry`` is a chunk of a chunked message other than its last. Every chunk
    carries the message's sequence id and the last one completes the message, so
    deduplication goes by the last chunk alone (as Pulsar's ``MessageDeduplication``)."""
    return partial_chunk(entry.chunk_id, entry.num_chunks_from_msg)


def partial_chunk(chunk_id: int, num_chunks: int) -> bool:
    """Whether chunk ``chunk_id`` of a message sent in ``num_chunks`` chunks (0 or 1: not
    chunked) is one before the last (see :func:`is_partial_chunk`)."""
    return num_chunks > 1 and chunk_id < num_chunks - 1


def check_chunk_entry(entry: Entry, chunk: tuple[int, int], max_message_bytes: int) -> None:
    """Refuse an entry sent as chunk ``chunk`` (chunk id, number of chunks) whose own
    chunk fields do not say the same or do not make a chunk (the gRPC door's check; the
    Pulsar door checks the metadata with :func:`magnetar.protocol.stored.check_chunk`).

    Raises:
        InvalidArgument: fields that disagree, a chunk id outside 0..n-1, no uuid, a
            batch, other than one message, a part larger than the whole.
        MessageTooBig: a part over ``max_message_bytes``.
    """
    chunk_id, n = chunk
    if (entry.chunk_id, entry.num_chunks_from_msg) != chunk:
        raise InvalidArgument(
            f"the send says chunk {chunk_id} of {n}, its entry chunk {entry.chunk_id} of {entry.num_chunks_from_msg}"
        )
    if not 0 <= chunk_id < n:
        raise InvalidArgument(f"chunk {chunk_id} of a message of {n} chunks: chunk ids are 0 to {n - 1}")
    if not entry.uuid:
        raise InvalidArgument(f"chunk {chunk_id} of {n} without the uuid of its message")
    if entry.batched or len(entry.messages) != 1:
        raise InvalidArgument("a chunk of a chunked message is one message, never a batch")
    size = len(entry.messages[0].payload)
    if size > max_message_bytes:
        raise MessageTooBig(size, max_message_bytes)
    if size > entry.total_chunk_msg_size:
        raise InvalidArgument(f"chunk {chunk_id} of {n} holds {size} bytes of a message of {entry.total_chunk_msg_size}")


@dataclass(frozen=True, slots=True)
class Message:
    """A message the core writes (a retry or dead-letter copy); a :class:`MessageView`."""

    payload: bytes
    properties: Mapping[str, str] = field(default_factory=dict)
    partition_key: str = ""
    has_partition_key: bool = False
    event_time_ms: int = 0
    sequence_id: int = 0
    deliver_at_ms: int = 0
    ordering_key: bytes = b""


@dataclass(frozen=True, slots=True)
class OpaqueEntry:
    """Bytes that are no known entry format, seen as one message holding them (the
    broker delivers and peeks such an entry rather than stopping on it)."""

    messages: tuple[Message]
    producer_name: str = ""
    sequence_id: int = 0
    publish_time_ms: int = 0
    batched: bool = False
    schema_version: bytes = b""
    uuid: str = ""
    chunk_id: int = 0
    num_chunks_from_msg: int = 0
    total_chunk_msg_size: int = 0
    compression: int = 0
    uncompressed_size: int = 0


MIN_MESSAGE_BYTES: Final = 2
"""The least one message of an entry takes: an empty ``SingleMessage`` of an
``EntryBatch`` (its field's tag and length). A Pulsar client's batched message takes at
least 6 (:data:`magnetar.protocol.stored.MIN_BATCHED_MESSAGE_BYTES`)."""


def max_entry_messages(max_message_bytes: int) -> int:
    """The most messages an entry of at most ``max_message_bytes`` can hold, in either
    stored format: the bound on a batch size a client may claim for an entry (a batch-index
    ack's mask is as wide as the batch)."""
    return max(1, max_message_bytes // MIN_MESSAGE_BYTES)


def check_batch_size(position: object, batch_size: int, max_message_bytes: int) -> None:
    """Refuse a batch size no entry of at most ``max_message_bytes`` can have.

    Raises:
        InvalidArgument: ``batch_size`` over :func:`max_entry_messages`.
    """
    limit = max_entry_messages(max_message_bytes)
    if batch_size > limit:
        raise InvalidArgument(
            f"an ack of messages of entry {position}: a batch of {batch_size} messages cannot be stored "
            f"(at most {limit} fit in an entry of {max_message_bytes} bytes)"
        )


def claimed_sequence_id(entry: Entry) -> int:
    """The highest sequence id ``entry``'s send claimed, as deduplication recorded it when
    the entry was stored (the rebuild after a take-over must agree): a Pulsar client's
    entry claims its metadata's ``highest_sequence_id``, else its ``sequence_id`` (as
    Pulsar's broker; a key-based batch's messages are not numbered one by one); an
    ``EntryBatch`` its messages' highest (the SDK's send claims that)."""
    if isinstance(entry, _pulsar.PulsarEntry):
        return entry.highest_sequence_id
    return max(m.sequence_id for m in entry.messages)


def routing_key(message: MessageView) -> str | bytes:
    """The key Key_Shared routes ``message`` by, as Pulsar's: its ordering key when it has
    one, else its partition key ("" for a message without either)."""
    if message.ordering_key:
        return message.ordering_key
    return message.partition_key if message.has_partition_key else ""


def decode_entry(data: bytes, max_uncompressed: int = MAX_UNCOMPRESSED_SIZE) -> Entry:
    """The entry stored as ``data``.

    Args:
        max_uncompressed: the most a compressed entry may declare uncompressed (the
            publish path passes the broker's ``maxMessageSize``).

    Raises:
        InvalidArgument: ``data`` is not an entry (corrupt, a compressed one that does not
            decompress, or a format not readable here).
    """
    if data[:2] == PULSAR_MAGIC:
        return _pulsar.decode(data, max_uncompressed)
    try:
        batch = _EntryBatch.FromString(data)
    except DecodeError as exc:
        raise InvalidArgument(f"the entry is not a message batch ({exc}); it is corrupt or in an unknown format") from None
    return open_entry_batch(batch, max_uncompressed) if batch.compression else batch


def count_messages(data: bytes, max_uncompressed: int = MAX_UNCOMPRESSED_SIZE) -> int:
    """How many messages the entry stored as ``data`` holds, checked as
    :func:`decode_entry` reads it: what this accepts, :func:`decode_entry` decodes. A
    Pulsar client's batch is walked without building its messages
    (:func:`magnetar.protocol.stored.count_messages`).

    Raises:
        InvalidArgument: as :func:`decode_entry`.
    """
    if data[:2] == PULSAR_MAGIC:
        return _pulsar.count_messages(data, max_uncompressed)
    return len(decode_entry(data, max_uncompressed).messages)


def view_entry(data: bytes) -> Entry:
    """The entry stored as ``data``, never failing: bytes that are not an entry, or an
    entry without a message, are one message holding the bytes (:class:`OpaqueEntry`).

    A Pulsar client's entry is checked as :func:`decode_entry` checks it, its messages
    built only when read (:func:`magnetar.protocol.stored.view`): a dispatcher sending a
    batch to a Pulsar consumer reads only how many messages it holds."""
    try:
        entry = _pulsar.view(data) if data[:2] == PULSAR_MAGIC else decode_entry(data)
    except InvalidArgument:
        return OpaqueEntry((Message(data),))
    return entry if entry.messages else OpaqueEntry((Message(data),))


def publish_time(data: bytes) -> int:
    """The publish time (ms) of the entry stored as ``data``.

    Raises:
        InvalidArgument: ``data`` is not an entry.
    """
    return decode_entry(data).publish_time_ms


def encode_entry(
    producer_name: str, sequence_id: int, publish_time_ms: int, batched: bool, messages: Sequence[MessageView],
    schema_version: bytes = b"", chunk: ChunkOf | None = None,
) -> bytes:
    """The bytes the Magnetar SDK stores for these messages (an ``EntryBatch``; fields at
    their defaults are left out, as the SDK leaves them), with the entry's schema version
    (b"": none) and, for a chunk of a chunked message, the chunk fields of ``chunk``."""
    out = _EntryBatch(
        producer_name=producer_name, sequence_id=sequence_id, publish_time_ms=publish_time_ms, batched=batched,
        schema_version=schema_version,
    )
    if chunk is not None and chunk.num_chunks_from_msg > 1:
        out.uuid, out.chunk_id = chunk.uuid, chunk.chunk_id
        out.num_chunks_from_msg, out.total_chunk_msg_size = chunk.num_chunks_from_msg, chunk.total_chunk_msg_size
        # A compressed message's chunks hold parts of its compressed payload: the codec
        # and whole size go along for the consumer that reassembles it.
        codec = getattr(chunk, "compression", 0)
        if codec:
            out.compression = codec
            meta: Any = getattr(chunk, "metadata", chunk)  # a Pulsar entry's MessageMetadata, or an EntryBatch
            out.uncompressed_size = meta.uncompressed_size
    for m in messages:
        msg = _SingleMessage(payload=m.payload, sequence_id=m.sequence_id)
        msg.properties.update(m.properties)
        if m.has_partition_key:
            msg.partition_key = m.partition_key
            msg.has_partition_key = True
        if m.event_time_ms:
            msg.event_time_ms = m.event_time_ms
        if m.deliver_at_ms:
            msg.deliver_at_ms = m.deliver_at_ms
        if m.ordering_key:
            msg.ordering_key = m.ordering_key
        out.messages.append(msg)
    return out.SerializeToString()
