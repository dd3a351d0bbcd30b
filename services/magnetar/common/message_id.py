"""Message ids: where a message is stored, as ``ledgerId:entryId:partitionIndex:batchIndex``.

The parts are read with methods, as in pulsar-client: ``ledger_id()``, ``entry_id()``,
``partition()`` (-1 on a non-partitioned topic) and ``batch_index()`` (-1 for a message
that is not in a batch; a batch from a producer is one entry). Ids order like Pulsar's
``MessageIdAdv.compareTo``: by ledger, entry, partition, then batch index (so the
entry-only id sorts before the messages of its batch).

Byte form (:meth:`MessageId.serialize`): 24 bytes, big-endian, fixed layout::

    int64 ledger_id | int64 entry_id | int32 partition | int32 batch_index
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal

from magnetar.common.errors import InvalidArgument

if TYPE_CHECKING:
    from magnetar.proto.v1.broker_pb2 import MessageIdData

INT64_MAX: Final = 2**63 - 1
"""The ledger and entry ids of :attr:`MessageId.latest`."""
_INT32_MAX: Final = 2**31 - 1
_STRUCT: Final = struct.Struct(">qqii")
_INT_RE: Final = re.compile(r"-?[0-9]+", re.ASCII)
_FORMAT_HINT: Final = (
    "expected ledgerId:entryId:partitionIndex:batchIndex (e.g. 12:3:-1:-1; "
    "ledgerId:entryId and ledgerId:entryId:partitionIndex also do), 'earliest' or 'latest'"
)

Start = Literal["earliest", "latest"]
"""How a message id names the start of a topic instead of an entry."""

_set = object.__setattr__


@dataclass(frozen=True, slots=True, order=True, init=False, repr=False, match_args=False)
class MessageId:
    """The position of one message: immutable, hashable, ordered.

    As in pulsar-client's ``MessageId``, the constructor takes
    ``(partition=-1, ledger_id=-1, entry_id=-1, batch_index=-1)`` in that order, so
    positional Pulsar code builds the same id, and the parts are read with methods:
    :meth:`ledger_id`, :meth:`entry_id`, :meth:`partition` and :meth:`batch_index`.
    ``str()``, :meth:`parse` and the byte form use the storage order
    ``ledgerId:entryId:partitionIndex:batchIndex``, as Pulsar's ``toString`` does.

    Args:
        partition: partition index of the topic, -1 when it is not partitioned.
        ledger_id: the ledger holding the entry (-1 only in :attr:`earliest`).
        entry_id: the entry within the ledger.
        batch_index: index within the entry's batch, -1 when not batched.

    Raises:
        InvalidArgument: a part is not an int or is out of range.
    """

    # Private fields, in comparison order: the dataclass derives ==, hash and < from them.
    _ledger_id: int
    _entry_id: int
    _partition: int
    _batch_index: int

    SIZE: ClassVar[int] = _STRUCT.size
    earliest: ClassVar[MessageId]
    """Before every message (Pulsar's ``-1:-1:-1:-1``)."""
    latest: ClassVar[MessageId]
    """After every message (ledger and entry are Long.MAX_VALUE, as in Pulsar)."""

    def __init__(
        self, partition: int = -1, ledger_id: int = -1, entry_id: int = -1, batch_index: int = -1
    ) -> None:
        for name, value, high in (
            ("partition", partition, _INT32_MAX),
            ("ledger_id", ledger_id, INT64_MAX),
            ("entry_id", entry_id, INT64_MAX),
            ("batch_index", batch_index, _INT32_MAX),
        ):
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidArgument(
                    f"message id {name} must be an int, not {type(value).__name__}"
                )
            if not -1 <= value <= high:
                raise InvalidArgument(f"message id {name} must be from -1 to {high}, got {value}")
        _set(self, "_ledger_id", ledger_id)
        _set(self, "_entry_id", entry_id)
        _set(self, "_partition", partition)
        _set(self, "_batch_index", batch_index)

    @classmethod
    def trusted(cls, partition: int, ledger_id: int, entry_id: int, batch_index: int) -> MessageId:
        """Build an id from values known to be valid (a broker's receipt or delivery)
        without the checks: the client makes one per message, so this is a hot path.
        The parts come in the constructor's (Pulsar's) order."""
        obj = object.__new__(cls)
        _set(obj, "_ledger_id", ledger_id)
        _set(obj, "_entry_id", entry_id)
        _set(obj, "_partition", partition)
        _set(obj, "_batch_index", batch_index)
        return obj

    def ledger_id(self) -> int:
        """The ledger holding the entry (-1 only in :attr:`earliest`)."""
        return self._ledger_id

    def entry_id(self) -> int:
        """The entry within the ledger."""
        return self._entry_id

    def partition(self) -> int:
        """The partition index of the topic, -1 when it is not partitioned."""
        return self._partition

    def batch_index(self) -> int:
        """The index within the entry's batch, -1 when the message is not batched."""
        return self._batch_index

    def __repr__(self) -> str:
        return (
            f"MessageId(partition={self._partition}, ledger_id={self._ledger_id}, "
            f"entry_id={self._entry_id}, batch_index={self._batch_index})"
        )

    def __str__(self) -> str:
        return f"{self._ledger_id}:{self._entry_id}:{self._partition}:{self._batch_index}"

    @classmethod
    def parse(cls, text: str) -> MessageId:
        """Parse ``str(message_id)``; missing trailing parts are -1; also "earliest"/"latest".

        Raises:
            InvalidArgument: ``text`` is not such an id.
        """
        if not isinstance(text, str):
            raise InvalidArgument(f"a message id must be a string, not {type(text).__name__}")
        if ";" in text:  # a chunked message's id: <first chunk>;<last chunk>
            first, _, last = text.partition(";")
            return ChunkMessageId(cls.parse(first.strip()), cls.parse(last.strip()))
        if text in ("earliest", "latest"):
            return cls.earliest if text == "earliest" else cls.latest
        parts = text.split(":")
        if not 2 <= len(parts) <= 4 or not all(_INT_RE.fullmatch(p) for p in parts):
            raise InvalidArgument(f"invalid message id {text!r}: {_FORMAT_HINT}")
        try:
            # int() refuses more than 4300 digits (sys.int_info.str_digits_check_threshold)
            values = [int(p) for p in parts] + [-1] * (4 - len(parts))
        except ValueError as exc:
            raise InvalidArgument(f"invalid message id {text[:80]!r}: {exc}") from exc
        try:
            ledger_id, entry_id, partition, batch_index = values
            return cls(partition, ledger_id, entry_id, batch_index)
        except InvalidArgument as exc:
            raise InvalidArgument(f"invalid message id {text!r}: {exc.message}") from exc

    def serialize(self) -> bytes:
        """The 24-byte form (see the module docstring)."""
        return _STRUCT.pack(self._ledger_id, self._entry_id, self._partition, self._batch_index)

    @classmethod
    def deserialize(cls, data: bytes | bytearray | memoryview) -> MessageId:
        """Inverse of :meth:`serialize`.

        Raises:
            InvalidArgument: ``data`` is not exactly 24 bytes or holds out-of-range values.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InvalidArgument(
                f"a serialized message id must be bytes, not {type(data).__name__}"
            )
        if len(data) == 2 * _STRUCT.size:  # a chunked message's id (ChunkMessageId.serialize)
            return ChunkMessageId(cls.deserialize(data[: _STRUCT.size]), cls.deserialize(data[_STRUCT.size :]))
        if len(data) != _STRUCT.size:
            raise InvalidArgument(
                f"a serialized message id is {_STRUCT.size} bytes, got {len(data)}"
            )
        try:
            ledger_id, entry_id, partition, batch_index = _STRUCT.unpack(data)
            return cls(partition, ledger_id, entry_id, batch_index)
        except InvalidArgument as exc:
            raise InvalidArgument(
                f"corrupt serialized message id {bytes(data).hex()}: {exc.message}"
            ) from exc

    def entry_id_only(self) -> MessageId:
        """The same position without the batch index: the id of the whole entry."""
        if self._batch_index == -1:
            return self
        return self.trusted(self._partition, self._ledger_id, self._entry_id, -1)

    def to_proto(self) -> MessageIdData:
        """The wire ``MessageIdData`` (every field set, including -1s)."""
        from magnetar.proto.v1 import broker_pb2

        return broker_pb2.MessageIdData(
            ledger_id=self._ledger_id,
            entry_id=self._entry_id,
            partition=self._partition,
            batch_index=self._batch_index,
        )

    @classmethod
    def from_proto(cls, msg: Any) -> MessageId:
        """From a wire ``MessageIdData``.

        Proto3 has no "unset": a field left out reads 0, so senders must set partition
        and batch_index to -1 explicitly (:meth:`to_proto` does).

        Raises:
            InvalidArgument: a field is out of range.
        """
        return cls(
            partition=int(msg.partition),
            ledger_id=int(msg.ledger_id),
            entry_id=int(msg.entry_id),
            batch_index=int(msg.batch_index),
        )


MessageId.earliest = MessageId(partition=-1, ledger_id=-1, entry_id=-1, batch_index=-1)
MessageId.latest = MessageId(partition=-1, ledger_id=INT64_MAX, entry_id=INT64_MAX, batch_index=-1)


def message_id_sentinel(message_id: MessageId | MessageIdData) -> Start | None:
    """``earliest`` (-1:-1), ``latest`` (INT64_MAX) or None for the id of an entry.

    Takes a :class:`MessageId` (whose parts are methods) or a wire ``MessageIdData``
    (whose parts are fields).
    """
    if isinstance(message_id, MessageId):
        ledger_id, entry_id = message_id._ledger_id, message_id._entry_id
    else:
        ledger_id, entry_id = message_id.ledger_id, message_id.entry_id
    if ledger_id == -1 and entry_id == -1:
        return "earliest"
    if ledger_id == INT64_MAX:
        return "latest"
    return None


@dataclass(frozen=True, slots=True, eq=False, init=False, repr=False, match_args=False)
class ChunkMessageId(MessageId):
    """The id of a chunked message (Pulsar's ``ChunkMessageIdImpl``): its position is its
    last chunk's (so it orders, and acks cumulatively, as the message's end), and
    :meth:`first_chunk_message_id` is its first chunk's. ``str()`` is
    ``<first chunk>;<last chunk>``, as Pulsar prints one; the byte form is the two
    24-byte forms, first chunk first (48 bytes). ``chunk_message_ids`` are every entry
    the message was read from (each chunk; a chunk sent twice by a producer's resend
    too): ack, negative ack and redelivery act on all of them."""

    _first: MessageId
    _chunks: tuple[MessageId, ...]

    def __init__(self, first: MessageId, last: MessageId, chunks: tuple[MessageId, ...] = ()) -> None:  # noqa: D107
        MessageId.__init__(self, last.partition(), last.ledger_id(), last.entry_id(), last.batch_index())
        _set(self, "_first", first)
        _set(self, "_chunks", chunks or (first, last))

    def first_chunk_message_id(self) -> MessageId:
        return self._first

    def last_chunk_message_id(self) -> MessageId:
        return MessageId.trusted(self._partition, self._ledger_id, self._entry_id, self._batch_index)

    def chunk_message_ids(self) -> tuple[MessageId, ...]:
        return self._chunks

    def __repr__(self) -> str:
        return f"ChunkMessageId(first={self._first!r}, last={self.last_chunk_message_id()!r})"

    def __str__(self) -> str:
        return f"{self._first};{MessageId.__str__(self)}"

    def serialize(self) -> bytes:
        """48 bytes: the first chunk's 24-byte form, then the last chunk's."""
        return self._first.serialize() + MessageId.serialize(self)

    # Compared with any id by position (its last chunk's), as Pulsar's compareTo; two
    # chunked ids are equal when their first chunks are too.
    def _key(self) -> tuple[int, int, int, int]:
        return (self._ledger_id, self._entry_id, self._partition, self._batch_index)

    @staticmethod
    def _other(other: object) -> tuple[int, int, int, int] | None:
        if not isinstance(other, MessageId):
            return None
        return (other._ledger_id, other._entry_id, other._partition, other._batch_index)

    def __eq__(self, other: object) -> bool:
        key = self._other(other)
        if key is None:
            return NotImplemented
        if isinstance(other, ChunkMessageId) and self._first != other._first:
            return False
        return self._key() == key

    def __hash__(self) -> int:
        return hash(self._key())

    def __lt__(self, other: object) -> bool:
        key = self._other(other)
        return NotImplemented if key is None else self._key() < key

    def __le__(self, other: object) -> bool:
        key = self._other(other)
        return NotImplemented if key is None else self._key() <= key

    def __gt__(self, other: object) -> bool:
        key = self._other(other)
        return NotImplemented if key is None else self._key() > key

    def __ge__(self, other: object) -> bool:
        key = self._other(other)
        return NotImplemented if key is None else self._key() >= key
