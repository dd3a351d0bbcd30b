"""The two phases' pure parts: which message is the latest of each key, and what is kept
of one entry.

As Pulsar's compactor: a message's key is its partition key; a message without one is
not kept; a message with an empty payload is a tombstone (the key is removed from the
view, and the tombstone is not kept either); each message of a batch is judged on its
own. A chunk of a chunked message is not kept (Pulsar does not compact chunked messages
either); nor is an entry that is not a message batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from magnetar.broker.compaction.compacted_entry import CompactedEntry
from magnetar.broker.entry import Entry, Message, MessageView, decode_entry, encode_entry
from magnetar.common.errors import InvalidArgument
from magnetar.managedledger.position import Position

MessageKey = tuple[Position, int]
"""A message of the topic: its entry's position and its batch index."""


@dataclass(frozen=True, slots=True)
class ViewEntry:
    """One entry as compaction reads it: from the topic (``indexes`` None: its messages
    are batch indexes 0, 1, ...) or from the previous compacted ledger."""

    position: Position
    data: bytes
    batch_size: int = 0
    indexes: tuple[int, ...] | None = None


def _messages(item: ViewEntry) -> tuple[Entry, list[tuple[int, MessageView]]] | None:
    try:
        entry = decode_entry(item.data)
    except InvalidArgument:
        return None
    if entry.num_chunks_from_msg > 1:
        return None
    if item.indexes is None:
        return entry, list(enumerate(entry.messages))
    if len(entry.messages) == len(item.indexes):  # the topic entry's messages, all kept
        return entry, list(zip(item.indexes, entry.messages, strict=True))
    if len(entry.messages) != item.batch_size:
        return None
    return entry, [(i, entry.messages[i]) for i in item.indexes]


def latest_per_key(entries: Iterable[ViewEntry], latest: dict[str, MessageKey] | None = None) -> dict[str, MessageKey]:
    """Phase one: the latest message of each live key of ``entries`` (in log order),
    added to ``latest`` (a tombstone removes its key)."""
    out = {} if latest is None else latest
    for item in entries:
        decoded = _messages(item)
        if decoded is None:
            continue
        for index, message in decoded[1]:
            if not message.has_partition_key:
                continue
            if message.payload:
                out[message.partition_key] = (item.position, index)
            else:
                out.pop(message.partition_key, None)
    return out


def kept(item: ViewEntry, latest: dict[str, MessageKey]) -> CompactedEntry | None:
    """Phase two: what of ``item`` the compacted view keeps (None: nothing)."""
    decoded = _messages(item)
    if decoded is None:
        return None
    entry, messages = decoded
    keep = [
        (index, m) for index, m in messages
        if m.has_partition_key and m.payload and latest.get(m.partition_key) == (item.position, index)
    ]
    if not keep:
        return None
    batch_size = len(entry.messages) if item.indexes is None else item.batch_size
    indexes = tuple(index for index, _ in keep)
    if len(keep) == len(messages) and (item.indexes is None or len(entry.messages) == batch_size):
        return CompactedEntry(item.position, batch_size, indexes, item.data)
    # As wide as the topic's batch: the messages left out are empty placeholders, so each
    # kept message has its batch index (Pulsar marks them compacted_out).
    by_index: dict[int, MessageView] = dict(keep)
    placeholder = Message(b"")
    data = encode_entry(
        entry.producer_name, entry.sequence_id, entry.publish_time_ms, True,
        [by_index.get(i, placeholder) for i in range(batch_size)], entry.schema_version,
    )
    return CompactedEntry(item.position, batch_size, indexes, data)


def compacted_out_mask(batch_size: int, indexes: Sequence[int]) -> int:
    """The batch indexes of an entry of ``batch_size`` messages not in ``indexes``."""
    keep = 0
    for i in indexes:
        keep |= 1 << i
    return ((1 << batch_size) - 1) & ~keep
