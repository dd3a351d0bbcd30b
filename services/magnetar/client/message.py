"""Received messages, and unpacking a stored entry (an EntryBatch, decompressed when a
producer compressed it) into them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from magnetar.common.compression import open_entry_batch
from magnetar.common.errors import InvalidArgument, MagnetarError
from magnetar.common.message_id import MessageId
from magnetar.proto.v1 import broker_pb2 as pb

if TYPE_CHECKING:
    from .schemas import MessageDecoder
from .chunks import ChunkInfo


@dataclass(slots=True, eq=False, repr=False)
class Message:
    """One message as the application receives it (Pulsar's ``Message``): read it with
    the methods, as pulsar-client's (``data()``, ``message_id()``, ``properties()``, …)."""

    _topic: str
    _id: MessageId
    _single: pb.SingleMessage
    _publish_time_ms: int
    _redelivery_count: int = 0
    _producer_name: str = ""
    _schema_version: bytes = b""
    _decoder: MessageDecoder | None = None
    # The chunk fields of a chunk's entry (None: not a chunk); the consumer reassembles.
    _chunk: ChunkInfo | None = None

    def data(self) -> bytes:
        return self._single.payload

    def value(self) -> Any:
        """The payload decoded with the consumer's (or reader's) ``schema``, resolved
        against the schema version the message was written with (Avro); the payload
        itself with ``BytesSchema`` (the default).

        Raises:
            InvalidMessage: the payload does not decode with the schema (the consumer
                goes on; :meth:`data` still has the bytes).
        """
        if self._decoder is None:
            return self._single.payload
        return self._decoder.value(self)

    def properties(self) -> dict[str, str]:
        return dict(self._single.properties)

    def partition_key(self) -> str:
        """The key given to ``send`` ("" when none was given)."""
        return self._single.partition_key

    def has_partition_key(self) -> bool:
        return self._single.has_partition_key

    def ordering_key(self) -> bytes:
        """Pulsar's ordering key, as given to ``send`` by whichever client sent the
        message (b"" when none): a Key_Shared subscription routes by it before the
        partition key. Raw bytes, as Pulsar's Java client's ``getOrderingKey()``
        (pulsar-client's Python ``ordering_key()`` hands the same bytes over as a str)."""
        return self._single.ordering_key

    def schema_version(self) -> bytes:
        """The version of the topic's schema the message was sent with (b"" when none):
        the 8 bytes (a big-endian long) the broker gave its producer for the schema it
        declared (a producer with ``BytesSchema`` declares none). Raw bytes, as Pulsar's
        Java client's ``getSchemaVersion()`` (pulsar-client's Python hands them over as
        a str)."""
        return self._schema_version

    def message_id(self) -> MessageId:
        return self._id

    def redelivery_count(self) -> int:
        return self._redelivery_count

    def publish_timestamp(self) -> int:
        """When the producer sent the batch (ms since the epoch)."""
        return self._publish_time_ms

    def event_timestamp(self) -> int:
        """The event time given to ``send`` (ms since the epoch; 0 when none)."""
        return self._single.event_time_ms

    def topic_name(self) -> str:
        """The topic (for a partitioned topic, the partition) the message came from."""
        return self._topic

    def producer_name(self) -> str:
        return self._producer_name

    def sequence_id(self) -> int:
        return self._single.sequence_id

    def _reassembled(self, payload: bytes, mid: MessageId) -> Message:
        """The chunked message this first chunk starts, with its reassembled payload."""
        single = pb.SingleMessage()
        single.CopyFrom(self._single)
        single.payload = payload
        return Message(
            self._topic, mid, single, self._publish_time_ms, self._redelivery_count, self._producer_name,
            self._schema_version, self._decoder,
        )

    def __repr__(self) -> str:
        return f"Message(id={self._id}, topic={self._topic!r}, {len(self._single.payload)} bytes)"


def unpack_entry(
    topic: str, partition: int, delivery: pb.Delivery, decoder: MessageDecoder | None = None,
) -> tuple[list[Message], bool]:
    """The messages of one delivered entry, and whether the entry is a batch.

    Message i of a batch gets batch index i; an unbatched message gets -1. ``decoder``:
    what their ``value()`` decodes with (None: the payload).
    """
    batch = pb.EntryBatch()
    try:
        batch.ParseFromString(delivery.entry)
    except Exception as exc:  # protobuf's DecodeError
        raise MagnetarError(f"undecodable entry {_position(delivery)} on {topic}: {_why(delivery.entry, exc)}") from exc
    if batch.compression:
        try:
            batch = open_entry_batch(batch)
        except InvalidArgument as exc:
            raise MagnetarError(f"undecodable entry {_position(delivery)} on {topic}: {exc.message}") from exc
    ledger_id, entry_id = delivery.message_id.ledger_id, delivery.message_id.entry_id
    if batch.num_chunks_from_msg > 1 and len(batch.messages) == 1 and not batch.batched:
        chunk = ChunkInfo(
            batch.uuid, batch.chunk_id, batch.num_chunks_from_msg, batch.total_chunk_msg_size, batch.compression,
            batch.uncompressed_size, batch.publish_time_ms,
        )  # fmt: skip
        mid = MessageId.trusted(partition, ledger_id, entry_id, -1)
        return [Message(
            topic, mid, batch.messages[0], batch.publish_time_ms, delivery.redelivery_count, batch.producer_name,
            batch.schema_version, decoder, chunk,
        )], False
    out = []
    for i, single in enumerate(batch.messages):
        mid = MessageId.trusted(partition, ledger_id, entry_id, i if batch.batched else -1)
        out.append(Message(
            topic, mid, single, batch.publish_time_ms, delivery.redelivery_count, batch.producer_name,
            batch.schema_version, decoder,
        ))
    return out, batch.batched


def _position(delivery: pb.Delivery) -> str:
    return f"{delivery.message_id.ledger_id}:{delivery.message_id.entry_id}"


def _why(entry: bytes, exc: Exception) -> str:
    """Why an entry is not readable here. The broker hands over a Pulsar client's entry
    as stored only when it cannot translate it (it does not decode)."""
    if entry[:2] == b"\x0e\x01":
        from magnetar.protocol import stored  # only on this rare path

        try:
            stored.decode(entry)
        except MagnetarError as bad:
            return f"a Pulsar client's entry that does not decode ({bad.message})"
    return str(exc)
