"""Acknowledgement bookkeeping of one partition consumer (pure: no I/O).

The broker tracks messages inside an entry with a mask (bit i: message i of the batch;
see docs/subscriptions.md), while the application acks messages one by one. Decisions:

* A delivery's ``ack_set`` names the messages of the entry that are not for this
  consumer; the others are the entry's *expected* messages.
* Individual ack of message i of a batch: its bit is set in the entry's acked mask.
  When every expected message is acked, the entry id (batch index -1) is queued as an
  INDIVIDUAL ack and the entry is forgotten. Until then the entry's acked mask goes out
  as a ``BatchIndexAck`` in the next grouped flush, but only when it changed since the
  last flush (so a batch costs one mask per flush, not one request per message).
* Cumulative ack of message i of a batch that is not its last: the entry *before* it is
  acked cumulatively (``ledger:entry-1``, which may be ``ledger:-1``: "nothing of this
  ledger"), and messages 0..i of the entry are marked acked, which sends them as a
  ``BatchIndexAck`` so the broker keeps them. Acking its last message acks the entry
  itself cumulatively.
* Acks are grouped: the consumer sends them ``ack_group_time_ms`` after the first one
  not sent yet, or once ``ack_group_max_size`` entries are pending.
"""

from __future__ import annotations

from dataclasses import dataclass

from magnetar.common import masks
from magnetar.common.message_id import MessageId

Position = tuple[int, int]  # (ledger_id, entry_id)


@dataclass(slots=True)
class BatchAck:
    """Acked messages of a partly acked entry, as sent in ``Ack.batch_acks``."""

    position: Position
    batch_size: int
    acked: int  # mask: bit i set = message i acked by this consumer

    def ack_set(self) -> bytes:
        """The mask in the wire's byte order (bit i is byte i // 8, bit i % 8)."""
        return masks.to_bytes(self.acked, self.batch_size)


@dataclass(slots=True)
class _BatchState:
    total: int
    expected: int  # mask of the messages delivered to this consumer
    acked: int = 0  # mask of the messages this consumer acked


@dataclass(slots=True)
class PendingAcks:
    """What one flush sends (and what :meth:`AckTracker.restore` takes back on failure)."""

    individual: list[Position]
    cumulative: Position | None
    batches: list[BatchAck]

    def __bool__(self) -> bool:
        return bool(self.individual or self.cumulative is not None or self.batches)


class AckTracker:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget everything (the subscription was moved: nothing of the old position holds)."""
        self._batches: dict[Position, _BatchState] = {}
        self._dirty: dict[Position, None] = {}  # batches whose acked mask changed since the last flush
        self._individual: dict[Position, None] = {}  # queued entry acks, in order
        self._cumulative: Position | None = None  # queued cumulative ack
        self._highest_cumulative: Position | None = None  # queued or sent
        # Everything up to here is acked (entry, batch index; -1: the whole entry).
        self._acked_upto: tuple[int, int, int] | None = None
        self._unacked_since: dict[Position, float] = {}

    # -- deliveries ----------------------------------------------------------------
    def on_delivery(
        self, pos: Position, total: int, batched: bool, now: float, track_unacked: bool, not_for_us: int = 0
    ) -> int:
        """Record a delivered entry; return the mask of its messages acked here already.

        ``not_for_us`` is the delivery's ack_set as a mask. The returned messages (a
        redelivery of messages acked locally) are not to be given to the application
        again. When the redelivery leaves nothing expected unacked, the entry ack is
        queued again.
        """
        full = masks.full_mask(total)
        expected = full & ~not_for_us
        if not expected:
            return 0  # nothing of it is for this consumer
        if batched and total > 1:
            state = self._batches.get(pos)
            if state is None:
                state = self._batches[pos] = _BatchState(total, expected)
            else:
                state.expected = expected
            acked = state.acked | self._cumulative_mask(pos, total)
            if acked and expected & acked == expected:
                self._complete(pos)
        else:
            acked = full if pos in self._individual else self._cumulative_mask(pos, total)
        if track_unacked and expected & ~acked:
            self._unacked_since.setdefault(pos, now)
        return acked & full

    def _cumulative_mask(self, pos: Position, total: int) -> int:
        if self._acked_upto is None:
            return 0
        ledger, entry, index = self._acked_upto
        if pos < (ledger, entry):
            return masks.full_mask(total)
        if pos == (ledger, entry):
            return masks.full_mask(total) if index == -1 else masks.full_mask(index + 1)
        return 0

    def is_acked(self, mid: MessageId) -> bool:
        """True when ``mid`` was acked here already (a redelivery to skip)."""
        pos = (mid.ledger_id(), mid.entry_id())
        if self._acked_upto is not None:
            ledger, entry, index = self._acked_upto
            if pos < (ledger, entry):
                return True
            if pos == (ledger, entry) and (index == -1 or 0 <= mid.batch_index() <= index):
                return True
        if pos in self._individual:
            return True
        state = self._batches.get(pos)
        return state is not None and mid.batch_index() >= 0 and bool(state.acked >> mid.batch_index() & 1)

    # -- acks ------------------------------------------------------------------------
    def ack(self, mid: MessageId) -> bool:
        """Individual ack; True when it queued an entry ack."""
        pos = (mid.ledger_id(), mid.entry_id())
        state = self._batches.get(pos)
        if state is not None and mid.batch_index() >= 0:
            bit = 1 << mid.batch_index()
            if state.acked & bit:
                return False  # acked already: nothing changed
            state.acked |= bit
            if state.expected & state.acked != state.expected:
                self._dirty[pos] = None
                return False
        self._complete(pos)
        return True

    def _complete(self, pos: Position) -> None:
        self._batches.pop(pos, None)
        self._dirty.pop(pos, None)
        self._individual[pos] = None
        self._unacked_since.pop(pos, None)

    def ack_cumulative(self, mid: MessageId) -> None:
        pos = (mid.ledger_id(), mid.entry_id())
        state = self._batches.get(pos)
        whole = mid.batch_index() < 0 or state is None or mid.batch_index() >= state.total - 1
        if state is not None and not whole:
            state.acked |= masks.full_mask(mid.batch_index() + 1)
            # Nothing of the entry left for us: the entry itself can be acked.
            whole = state.expected & state.acked == state.expected
        upto = (mid.ledger_id(), mid.entry_id(), -1 if whole else mid.batch_index())
        if self._acked_upto is None or self._later(upto, self._acked_upto):
            self._acked_upto = upto
        target = pos if whole else (mid.ledger_id(), mid.entry_id() - 1)
        if self._highest_cumulative is None or target > self._highest_cumulative:
            self._cumulative = self._highest_cumulative = target
        for p in [p for p in self._batches if p < pos or (whole and p == pos)]:
            del self._batches[p]
            self._dirty.pop(p, None)
        if not whole:
            self._dirty[pos] = None
        for p in [p for p in self._unacked_since if p <= target]:
            del self._unacked_since[p]

    @staticmethod
    def _later(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
        if a[:2] != b[:2]:
            return a[:2] > b[:2]
        return b[2] != -1 and (a[2] == -1 or a[2] > b[2])

    @property
    def pending(self) -> int:
        return len(self._individual) + len(self._dirty) + (self._cumulative is not None)

    def take(self) -> PendingAcks:
        """The acks to send now (and forget)."""
        batches = []
        for pos in self._dirty:
            state = self._batches.get(pos)
            if state is not None:
                batches.append(BatchAck(pos, state.total, state.acked))
        out = PendingAcks(list(self._individual), self._cumulative, batches)
        self._individual, self._cumulative, self._dirty = {}, None, {}
        return out

    def restore(self, acks: PendingAcks) -> None:
        """Put back acks whose sending failed (they go out after a reconnect)."""
        for pos in acks.individual:
            self._individual[pos] = None
        if acks.cumulative is not None and (self._cumulative is None or acks.cumulative > self._cumulative):
            self._cumulative = acks.cumulative
        for batch in acks.batches:
            if batch.position in self._batches:  # else it was completed meanwhile
                self._dirty[batch.position] = None

    # -- ack timeout / negative acks -------------------------------------------------------
    def forget_unacked(self, pos: Position) -> None:
        self._unacked_since.pop(pos, None)

    def oldest_unacked(self) -> float | None:
        """When the oldest entry still unacked was delivered (None: none is tracked).
        Entries are tracked in delivery order and the times are monotonic, so it is the
        first one."""
        for since in self._unacked_since.values():
            return since
        return None

    def expired(self, now: float, timeout_s: float) -> list[Position]:
        """Entries delivered more than ``timeout_s`` ago and still not acked (forgotten now:
        they are tracked again when redelivered)."""
        out = [p for p, t in self._unacked_since.items() if now - t >= timeout_s]
        for p in out:
            del self._unacked_since[p]
        return out
