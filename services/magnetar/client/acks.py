"""Acknowledgement bookkeeping of one partition consumer (pure: no I/O).

The broker acks whole entries, while the application acks messages; an entry holding a
batch is acked only when every message of the batch is. Decisions:

* Individual ack of message i of a batch: remembered locally; when all messages of
  the entry are acked, the entry id (batch index -1) is queued as an INDIVIDUAL ack.
* Cumulative ack of message i of a batch that is not its last: the entry *before* it is
  acked cumulatively (``ledger:entry-1``, which may be ``ledger:-1``: "nothing of this
  ledger"), and messages 0..i of the entry are remembered as acked so a redelivery of
  the entry skips them. Acking its last message acks the entry itself cumulatively.
* Acks are grouped: the consumer sends them every ``ack_group_time_ms`` or once
  ``ack_group_max_size`` are pending.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from magnetar.common.message_id import MessageId

Position = tuple[int, int]  # (ledger_id, entry_id)


@dataclass
class _BatchState:
    total: int
    acked: set[int] = field(default_factory=set)


class AckTracker:
    def __init__(self) -> None:
        self._batches: dict[Position, _BatchState] = {}
        self._individual: dict[Position, None] = {}  # queued entry acks, in order
        self._cumulative: Position | None = None  # queued cumulative ack
        self._highest_cumulative: Position | None = None  # queued or sent
        # Everything up to here is acked (entry, batch index; -1: the whole entry).
        self._acked_upto: tuple[int, int, int] | None = None
        self._unacked_since: dict[Position, float] = {}

    # -- deliveries ----------------------------------------------------------------
    def on_delivery(self, pos: Position, total: int, batched: bool, now: float, track_unacked: bool) -> None:
        if batched and total > 1 and pos not in self._batches:
            self._batches[pos] = _BatchState(total)
        if track_unacked:
            self._unacked_since.setdefault(pos, now)

    def is_acked(self, mid: MessageId) -> bool:
        """True when ``mid`` was acked here already (a redelivery to skip)."""
        pos = (mid.ledger_id, mid.entry_id)
        if self._acked_upto is not None:
            ledger, entry, index = self._acked_upto
            if pos < (ledger, entry):
                return True
            if pos == (ledger, entry) and (index == -1 or 0 <= mid.batch_index <= index):
                return True
        state = self._batches.get(pos)
        return state is not None and mid.batch_index in state.acked

    # -- acks ------------------------------------------------------------------------
    def ack(self, mid: MessageId) -> bool:
        """Individual ack; True when it queued an entry ack."""
        pos = (mid.ledger_id, mid.entry_id)
        state = self._batches.get(pos)
        if mid.batch_index >= 0 and state is not None:
            state.acked.add(mid.batch_index)
            if len(state.acked) < state.total:
                return False
            del self._batches[pos]
        self._individual[pos] = None
        self._unacked_since.pop(pos, None)
        return True

    def ack_cumulative(self, mid: MessageId) -> None:
        pos = (mid.ledger_id, mid.entry_id)
        state = self._batches.get(pos)
        whole = mid.batch_index < 0 or state is None or mid.batch_index >= state.total - 1
        upto = (mid.ledger_id, mid.entry_id, -1 if whole else mid.batch_index)
        if self._acked_upto is None or self._later(upto, self._acked_upto):
            self._acked_upto = upto
        target = pos if whole else (mid.ledger_id, mid.entry_id - 1)
        if self._highest_cumulative is None or target > self._highest_cumulative:
            self._cumulative = self._highest_cumulative = target
        for p in [p for p in self._batches if p < pos or (whole and p == pos)]:
            del self._batches[p]
        if not whole and state is not None:
            state.acked.update(range(mid.batch_index + 1))
        for p in [p for p in self._unacked_since if p <= target]:
            del self._unacked_since[p]

    @staticmethod
    def _later(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
        if a[:2] != b[:2]:
            return a[:2] > b[:2]
        return b[2] != -1 and (a[2] == -1 or a[2] > b[2])

    @property
    def pending(self) -> int:
        return len(self._individual) + (self._cumulative is not None)

    def take(self) -> tuple[list[Position], Position | None]:
        """The acks to send now (and forget)."""
        individual, cumulative = list(self._individual), self._cumulative
        self._individual, self._cumulative = {}, None
        return individual, cumulative

    def restore(self, individual: list[Position], cumulative: Position | None) -> None:
        """Put back acks whose sending failed (they go out after a reconnect)."""
        for pos in individual:
            self._individual[pos] = None
        if cumulative is not None and (self._cumulative is None or cumulative > self._cumulative):
            self._cumulative = cumulative

    # -- ack timeout / negative acks -------------------------------------------------------
    def forget_unacked(self, pos: Position) -> None:
        self._unacked_since.pop(pos, None)

    def expired(self, now: float, timeout_s: float) -> list[Position]:
        """Entries delivered more than ``timeout_s`` ago and still not acked (forgotten now:
        they are tracked again when redelivered)."""
        out = [p for p, t in self._unacked_since.items() if now - t >= timeout_s]
        for p in out:
            del self._unacked_since[p]
        return out
