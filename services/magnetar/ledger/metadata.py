"""Ledger metadata: quorums, state, and the ensembles as fragments. Pure data.

A fragment is (first entry id, bookies): the ensemble used from that entry on, until
the next fragment. Entry ``e`` of a fragment with ensemble ``B`` (size E) is written to
``B[(e + k) % E]`` for ``k < Qw`` — with E=4, Qw=3: entry 0 → b0 b1 b2, entry 1 → b1 b2 b3,
entry 2 → b2 b3 b0. The JSON shape is what ``magnetar shell ledgermetadata`` prints.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field, replace
from typing import Any

from magnetar.common.errors import InvalidArgument, MetadataVersionConflict


class LedgerState(enum.StrEnum):
    OPEN = "OPEN"
    IN_RECOVERY = "IN_RECOVERY"
    CLOSED = "CLOSED"


@dataclass(frozen=True, slots=True)
class Fragment:
    first_entry: int
    bookies: tuple[str, ...]


def check_quorums(ensemble_size: int, write_quorum: int, ack_quorum: int) -> None:
    """Raises InvalidArgument unless E >= Qw >= Qa >= 1."""
    if not ensemble_size >= write_quorum >= ack_quorum >= 1:
        raise InvalidArgument(
            "quorums must satisfy ensemble size >= write quorum >= ack quorum >= 1, got "
            f"E={ensemble_size} Qw={write_quorum} Qa={ack_quorum}"
        )


def write_set(bookies: tuple[str, ...], write_quorum: int, entry_id: int) -> list[str]:
    """The bookies that store ``entry_id`` in an ensemble (striping)."""
    e = len(bookies)
    return [bookies[(entry_id + k) % e] for k in range(write_quorum)]


@dataclass(frozen=True, slots=True)
class LedgerMetadata:
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    fragments: tuple[Fragment, ...]
    state: LedgerState = LedgerState.OPEN
    last_entry_id: int = -1
    length: int = 0
    ctime_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    properties: dict[str, str] = field(default_factory=dict)
    writer: str = ""
    """Id of the ledger client that created it (its liveness is a znode); "" if unknown."""

    def __post_init__(self) -> None:
        check_quorums(self.ensemble_size, self.write_quorum, self.ack_quorum)
        if not self.fragments or self.fragments[0].first_entry != 0:
            raise InvalidArgument("a ledger's first fragment must start at entry 0")
        for f in self.fragments:
            if len(f.bookies) != self.ensemble_size:
                raise InvalidArgument(f"fragment at entry {f.first_entry} has {len(f.bookies)} bookies, not E={self.ensemble_size}")

    @property
    def is_closed(self) -> bool:
        return self.state is LedgerState.CLOSED

    def fragment_for(self, entry_id: int) -> Fragment:
        """The fragment holding ``entry_id`` (the last one starting at or before it)."""
        found = self.fragments[0]
        for f in self.fragments:
            if f.first_entry <= entry_id:
                found = f
            else:
                break
        return found

    def write_set(self, entry_id: int) -> list[str]:
        return write_set(self.fragment_for(entry_id).bookies, self.write_quorum, entry_id)

    @property
    def current_ensemble(self) -> tuple[str, ...]:
        return self.fragments[-1].bookies

    def with_fragment(self, first_entry: int, bookies: tuple[str, ...]) -> LedgerMetadata:
        """A new fragment from ``first_entry`` on (replacing fragments that start there or later)."""
        kept = tuple(f for f in self.fragments if f.first_entry < first_entry)
        return replace(self, fragments=kept + (Fragment(first_entry, tuple(bookies)),))

    def with_replaced_bookie(self, first_entry: int, old: tuple[str, ...], missing: str, new: str) -> LedgerMetadata:
        """The fragment starting at ``first_entry`` with ``missing`` swapped for ``new``.

        Raises:
            MetadataVersionConflict: that fragment is no longer ``old`` (changed meanwhile).
        """
        for i, f in enumerate(self.fragments):
            if f.first_entry == first_entry and f.bookies == old:
                bookies = tuple(new if b == missing else b for b in f.bookies)
                return replace(self, fragments=self.fragments[:i] + (Fragment(first_entry, bookies),) + self.fragments[i + 1 :])
        raise MetadataVersionConflict(f"the fragment at entry {first_entry} is no longer {','.join(old)}")

    def fragment_last_entry(self, index: int) -> int:
        """The last entry id of fragment ``index``: up to the next fragment, or the
        ledger's last entry (the LAC is not known here: -1 for an open last fragment)."""
        if index + 1 < len(self.fragments):
            return self.fragments[index + 1].first_entry - 1
        return self.last_entry_id if self.is_closed else -1

    def closed(self, last_entry_id: int, length: int) -> LedgerMetadata:
        return replace(self, state=LedgerState.CLOSED, last_entry_id=last_entry_id, length=length)

    def with_state(self, state: LedgerState) -> LedgerMetadata:
        return replace(self, state=state)

    def bookies(self) -> set[str]:
        """Every bookie that holds any fragment."""
        return {b for f in self.fragments for b in f.bookies}

    def to_dict(self) -> dict[str, Any]:
        return {
            "ensemble_size": self.ensemble_size,
            "write_quorum": self.write_quorum,
            "ack_quorum": self.ack_quorum,
            "state": self.state.value,
            "last_entry_id": self.last_entry_id,
            "length": self.length,
            "ctime_ms": self.ctime_ms,
            "properties": dict(self.properties),
            **({"writer": self.writer} if self.writer else {}),
            "fragments": [{"first_entry": f.first_entry, "bookies": list(f.bookies)} for f in self.fragments],
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> LedgerMetadata:
        """Raises InvalidArgument on a document that is not ledger metadata."""
        try:
            return cls(
                ensemble_size=int(doc["ensemble_size"]),
                write_quorum=int(doc["write_quorum"]),
                ack_quorum=int(doc["ack_quorum"]),
                state=LedgerState(doc["state"]),
                last_entry_id=int(doc["last_entry_id"]),
                length=int(doc["length"]),
                ctime_ms=int(doc.get("ctime_ms", 0)),
                properties={str(k): str(v) for k, v in doc.get("properties", {}).items()},
                writer=str(doc.get("writer", "")),
                fragments=tuple(
                    Fragment(int(f["first_entry"]), tuple(str(b) for b in f["bookies"])) for f in doc["fragments"]
                ),
            )
        except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as exc:
            raise InvalidArgument(f"not valid ledger metadata: {exc!r}") from exc
