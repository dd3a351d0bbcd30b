"""The entries of a compacted ledger: each holds what was kept of one topic entry, with
that entry's position and the batch indexes of the messages kept.

Layout (big-endian)::

    ledger_id:q  entry_id:q  batch_size:I  kept:I  index:I * kept  entry bytes

``entry bytes`` is the topic entry unchanged when every message of it was kept, else an
``EntryBatch`` of the kept messages in order (``index[j]`` is the batch index message
``j`` had in the topic). A consumer of the compacted view is given the topic's message
ids (position and batch index), so its acknowledgements and seeks mean what they mean on
the topic (Pulsar marks removed batch messages ``compacted_out`` to the same end).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from magnetar.common.errors import InvalidArgument
from magnetar.managedledger.position import Position

_HEADER: Final = struct.Struct(">qqII")
_INDEX: Final = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class CompactedEntry:
    """What was kept of the topic entry at ``position``."""

    position: Position
    batch_size: int
    indexes: tuple[int, ...]
    """The batch indexes (in the topic entry) of the messages of ``data``, ascending."""
    data: bytes


def encode(entry: CompactedEntry) -> bytes:
    """The stored form of ``entry``."""
    head = _HEADER.pack(entry.position.ledger_id, entry.position.entry_id, entry.batch_size, len(entry.indexes))
    return b"".join((head, struct.pack(f">{len(entry.indexes)}I", *entry.indexes), entry.data))


def decode(data: bytes) -> CompactedEntry:
    """The compacted entry stored as ``data``.

    Raises:
        InvalidArgument: ``data`` is torn or not a compacted entry.
    """
    if len(data) < _HEADER.size:
        raise InvalidArgument(f"a compacted entry holds at least {_HEADER.size} bytes, not {len(data)}")
    ledger_id, entry_id, batch_size, kept = _HEADER.unpack_from(data)
    end = _HEADER.size + kept * _INDEX.size
    if kept > batch_size or len(data) < end:
        raise InvalidArgument(f"a compacted entry claims {kept} of {batch_size} messages in {len(data)} bytes")
    indexes = struct.unpack_from(f">{kept}I", data, _HEADER.size)
    if any(b <= a for a, b in zip(indexes, indexes[1:], strict=False)) or (indexes and indexes[-1] >= batch_size):
        raise InvalidArgument(f"a compacted entry's batch indexes {indexes} are not ascending below {batch_size}")
    return CompactedEntry(Position(ledger_id, entry_id), batch_size, indexes, data[end:])
