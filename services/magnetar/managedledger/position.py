"""Positions in a managed ledger and managed ledger names."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from magnetar.common.errors import InvalidArgument


class Position(NamedTuple):
    """An entry of a managed ledger: (ledger id, entry id), ordered like the log.

    ``Position(L, -1)`` means "just before the first entry of ledger L" (a mark-delete
    position with nothing acknowledged, or the last confirmed position of an empty
    managed ledger).
    """

    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"

    @classmethod
    def of(cls, value: Sequence[int]) -> Position:
        """A Position from any ``(ledger, entry)`` pair (a tuple, a list from JSON).

        Raises:
            InvalidArgument: not two integers, or a negative ledger id, or an entry id below -1.
        """
        try:
            ledger_id, entry_id = value
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"a position is (ledger id, entry id), got {value!r}") from exc
        if not isinstance(ledger_id, int) or not isinstance(entry_id, int) or isinstance(ledger_id, bool) or isinstance(entry_id, bool):
            raise InvalidArgument(f"a position holds two integers, got {value!r}")
        if ledger_id < 0 or entry_id < -1:
            raise InvalidArgument(f"invalid position {ledger_id}:{entry_id}")
        return value if isinstance(value, Position) else cls(ledger_id, entry_id)

    def to_json(self) -> list[int]:
        """``[ledger, entry]`` as stored in ZooKeeper documents."""
        return [self.ledger_id, self.entry_id]


class ManagedLedgerName(NamedTuple):
    """Which topic partition a managed ledger stores (``persistent://tenant/namespace/topic``)."""

    tenant: str
    namespace: str
    topic: str

    def __str__(self) -> str:
        return f"persistent://{self.tenant}/{self.namespace}/{self.topic}"
