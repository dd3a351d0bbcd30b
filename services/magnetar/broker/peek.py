"""Reading one message of a topic without changing anything: the nth message a
subscription has not acknowledged (pulsar-admin's ``peek-messages``), or the nth from the
start or the end of the topic (``examine-message``).

Positions count messages, not entries: a batch of k messages counts k, and a message of
it is returned alone (with its batch index). A peek leaves out what the subscription has
acknowledged: whole entries, and single messages of partly acknowledged batches. Reaching
the nth message reads at most n entries.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from magnetar.broker.entry import Entry, MessageView, view_entry
from magnetar.common.errors import InvalidArgument, PreconditionFailed
from magnetar.managedledger.position import Position

if TYPE_CHECKING:
    from magnetar.managedledger.cursor import ManagedCursor
    from magnetar.managedledger.ledger import ManagedLedger

READ_ENTRIES = 100
READ_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class PeekedMessage:
    """Message ``index`` of the entry at ``position`` (its batch as stored)."""

    position: Position
    batch: Entry
    index: int

    @property
    def message(self) -> MessageView:
        return self.batch.messages[self.index]

    @property
    def batch_index(self) -> int:
        """-1 for a message sent without batching."""
        return self.index if self.batch.batched else -1


Candidate = tuple[Position, Entry, int]
"""An entry as a peek sees it: position, batch, mask of its messages to leave out."""


def select(entries: Iterable[Candidate], n: int, backwards: bool = False) -> tuple[PeekedMessage | None, int]:
    """Count the messages of ``entries`` (in the order given; each entry's messages last
    to first when ``backwards``), leaving out the masked ones, up to the ``n``-th (1: the
    first counted).

    Returns:
        The ``n``-th message, or None and how many more messages are to be counted.
    """
    for position, batch, skipped in entries:
        indexes = range(len(batch.messages))
        for i in reversed(indexes) if backwards else indexes:
            if skipped >> i & 1:
                continue
            n -= 1
            if n == 0:
                return PeekedMessage(position, batch, i), 0
    return None, n


def decode(data: bytes) -> Entry:
    """The entry's batch; an entry that is not one counts as one message holding it
    (:func:`magnetar.broker.entry.view_entry`)."""
    return view_entry(data)


def _check(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidArgument(f"message positions count from 1, got {n!r}")


async def _walk(ml: ManagedLedger, start: Position, skip: Callable[[Position], int | None]) -> AsyncIterator[PeekedMessage]:
    """The messages from ``start`` on, in order: ``skip(position)`` is the mask of messages
    to leave out (None: the whole entry)."""
    position = start
    while True:
        entries = await ml.read_entries(position, READ_ENTRIES, READ_BYTES)
        if not entries:
            return
        for p, data in entries:
            mask = skip(p)
            if mask is None:
                continue
            batch = decode(data)
            for i in range(len(batch.messages)):
                if not mask >> i & 1:
                    yield PeekedMessage(p, batch, i)
        position = ml.next_position(entries[-1][0])


async def _scan(
    ml: ManagedLedger, start: Position, n: int, skip: Callable[[Position], int | None],
) -> tuple[PeekedMessage | None, PeekedMessage | None]:
    """Count forward from ``start`` (see :func:`_walk`). Returns the n-th message (or None)
    and the last counted."""
    last = None
    async for message in _walk(ml, start, skip):
        last = message
        n -= 1
        if n == 0:
            return message, message
    return None, last


def _unacked(cursor: ManagedCursor) -> Callable[[Position], int | None]:
    def skip(p: Position) -> int | None:
        return None if cursor.is_acked(p) else cursor.acked_mask(p)

    return skip


async def peek(ml: ManagedLedger, cursor: ManagedCursor, n: int) -> PeekedMessage | None:
    """The ``n``-th message (1: the first) after ``cursor``'s mark-delete position that
    it has not acknowledged; None when there are fewer.

    Raises:
        InvalidArgument: ``n`` below 1.
    """
    _check(n)
    found, _ = await _scan(ml, ml.next_position(cursor.mark_delete_position), n, _unacked(cursor))
    return found


async def peek_many(ml: ManagedLedger, cursor: ManagedCursor, n: int, count: int) -> list[PeekedMessage]:
    """Up to ``count`` messages from the ``n``-th one ``cursor`` has not acknowledged on.

    Raises:
        InvalidArgument: ``n`` or ``count`` below 1.
    """
    _check(n)
    _check(count)
    out: list[PeekedMessage] = []
    async for message in _walk(ml, ml.next_position(cursor.mark_delete_position), _unacked(cursor)):
        n -= 1
        if n <= 0:
            out.append(message)
            if len(out) == count:
                break
    return out


async def examine(ml: ManagedLedger, start: Literal["earliest", "latest"], n: int) -> PeekedMessage:
    """The ``n``-th message from the first one (``earliest``) or back from the last one
    (``latest``), acknowledged or not; past the other end, the message there (as Pulsar
    does).

    Raises:
        InvalidArgument: ``n`` below 1.
        PreconditionFailed: the topic holds no messages.
    """
    _check(n)
    if ml.number_of_entries == 0:
        raise PreconditionFailed(f"{ml.name} holds no messages to examine")
    if start == "earliest":
        found, last = await _scan(ml, ml.first_position, n, lambda p: 0)
        result = found or last
    else:
        result = await _examine_backwards(ml, n)
    if result is None:  # entries vanished meanwhile (trimmed)
        raise PreconditionFailed(f"{ml.name} holds no messages to examine")
    return result


async def _examine_backwards(ml: ManagedLedger, n: int) -> PeekedMessage | None:
    """Read chunks of entries from the end backwards, counting their messages last to first."""
    layout = ml.layout
    first = ml.first_position
    end = ml.number_of_entries  # entries [0, end) by ordinal are still to be looked at
    oldest: PeekedMessage | None = None
    while end > 0:
        begin = max(0, end - READ_ENTRIES)
        chunk: list[Candidate] = []
        position = layout.nth_entry(first, begin + 1)
        while len(chunk) < end - begin:
            entries = await ml.read_entries(position, end - begin - len(chunk), READ_BYTES)
            if not entries:
                break
            chunk.extend((p, decode(data), 0) for p, data in entries)
            position = ml.next_position(entries[-1][0])
        found, n = select(reversed(chunk), n, backwards=True)
        if found is not None:
            return found
        head, _ = select(chunk, 1)
        oldest = head or oldest
        end = begin
    return oldest
