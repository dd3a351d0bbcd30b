"""A cursor's per-entry state besides ranges, and its stored document.

Two maps keyed by entry position, both holding only entries after the mark-delete
position that are not acknowledged as a whole:

- batch acks: entry -> (batch size, mask of acknowledged messages);
- redelivery counts: entry -> how often it was sent again.

Stored form (JSON in the cursor's znode)::

    {"mark_delete": [L, E],
     "individually_acked": [[[L1, E1], [L2, E2]], ...],
     "batch_acks": [[L, E, size, "<mask as hex>"], ...],
     "redelivery_counts": [[L, E, count], ...],
     "read_position": [L, E],
     "properties": {...}}

``read_position`` is the highest read position the owner had reached: every entry before
it may have been delivered, so the next owner flags their first delivery as a redelivery
(see :meth:`ManagedCursor.delivery_count`). Documents without it load with none.

The document must fit in a znode (ZooKeeper's ``jute.maxbuffer``, 1 MB less one byte by
default, which our servers keep). So what is stored is cut, lowest positions kept:
at most ``max_unacked_ranges_to_persist`` ranges, ``max_batch_acks_to_persist`` batch
records and ``max_redelivery_counts_to_persist`` counts, and, whatever the limits, at
most :data:`MAX_DOCUMENT_BYTES` of JSON (ranges first, then batch records, then counts).
After a restart, what was cut comes back as if never recorded: entries of cut ranges and
messages of cut batch records are delivered again; cut counts restart from 0.
Documents written before batch acks and counts existed load with neither.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from magnetar.common.errors import InvalidArgument, MetadataError
from magnetar.managedledger.config import ManagedLedgerConfig
from magnetar.managedledger.position import Position

MAX_DOCUMENT_BYTES = 900_000
"""Most JSON bytes of a cursor document: ZooKeeper refuses requests over
``jute.maxbuffer`` (0xfffff bytes by default; the path and headers need some too)."""

V = TypeVar("V")
Range = tuple[Position, Position]


class PositionMap(Generic[V]):
    """A dict keyed by position that also drops whole spans of positions cheaply."""

    def __init__(self) -> None:
        self._values: dict[Position, V] = {}
        self._keys: list[Position] = []  # sorted

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, p: object) -> bool:
        return p in self._values

    def get(self, p: Position, default: V) -> V:
        return self._values.get(p, default)

    def set(self, p: Position, value: V) -> None:
        if p not in self._values:
            bisect.insort(self._keys, p)
        self._values[p] = value

    def discard(self, p: Position) -> bool:
        """Drop ``p``; True when it was there."""
        if self._values.pop(p, None) is None:
            return False
        del self._keys[bisect.bisect_left(self._keys, p)]
        return True

    def discard_range(self, first: Position, last: Position) -> None:
        """Drop every key in ``[first, last]``."""
        i, j = bisect.bisect_left(self._keys, first), bisect.bisect_right(self._keys, last)
        for p in self._keys[i:j]:
            del self._values[p]
        del self._keys[i:j]

    def discard_through(self, p: Position) -> None:
        """Drop every key ``<= p``."""
        j = bisect.bisect_right(self._keys, p)
        for key in self._keys[:j]:
            del self._values[key]
        del self._keys[:j]

    def clear(self) -> None:
        self._values.clear()
        self._keys.clear()

    def items(self) -> Iterator[tuple[Position, V]]:
        """In position order."""
        return ((p, self._values[p]) for p in list(self._keys))


def full_mask(batch_size: int) -> int:
    """Every message of a batch of ``batch_size``."""
    return (1 << batch_size) - 1


def check_batch(batch_size: object, mask: object) -> tuple[int, int]:
    """Validate a batch size and a mask of it.

    Raises:
        InvalidArgument: size not an int >= 1, mask not an int in ``[0, 2**size)``.
    """
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise InvalidArgument(f"a batch size is an integer >= 1, not {batch_size!r}")
    if not isinstance(mask, int) or isinstance(mask, bool) or mask < 0:
        raise InvalidArgument(f"a mask is a non-negative integer, not {mask!r}")
    if mask >> batch_size:
        raise InvalidArgument(f"mask {mask:#x} has bits at or above the batch size {batch_size}")
    return batch_size, mask


@dataclass
class CursorDocument:
    """A cursor as stored (parsed, or about to be written)."""

    mark_delete: Position
    ranges: list[Range] = field(default_factory=list)
    batch_acks: list[tuple[Position, int, int]] = field(default_factory=list)
    """(entry, batch size, mask)"""
    redelivery_counts: list[tuple[Position, int]] = field(default_factory=list)
    properties: dict[str, Any] = field(default_factory=dict)
    read_position: Position | None = None
    """Every entry before it may have been delivered by the owner that wrote this."""

    # -- writing ---------------------------------------------------------------------
    def to_doc(self, config: ManagedLedgerConfig, max_bytes: int = MAX_DOCUMENT_BYTES) -> dict[str, Any]:
        """The JSON document, cut to the config's limits and ``max_bytes`` (see module)."""
        # Positions are (ledger, entry) tuples, which JSON writes as [ledger, entry]: no
        # conversion of thousands of ranges each time the cursor is stored.
        ranges = self.ranges[: config.max_unacked_ranges_to_persist]
        batch = [
            [p.ledger_id, p.entry_id, size, format(mask, "x")]
            for p, size, mask in self.batch_acks[: config.max_batch_acks_to_persist]
        ]
        counts = [[p.ledger_id, p.entry_id, n] for p, n in self.redelivery_counts[: config.max_redelivery_counts_to_persist]]
        doc: dict[str, Any] = {
            "mark_delete": self.mark_delete.to_json(),
            "individually_acked": ranges,
            "batch_acks": batch,
            "redelivery_counts": counts,
            "properties": self.properties,
        }
        if self.read_position is not None:
            doc["read_position"] = self.read_position.to_json()
        if _upper_bound(doc) > max_bytes:
            _cut_to(doc, max_bytes)
        return doc

    # -- reading ---------------------------------------------------------------------
    @classmethod
    def from_doc(cls, doc: Any, what: str) -> CursorDocument:
        """Parse a stored document (``what`` names the cursor in errors).

        Raises:
            MetadataError: it is not a cursor document.
        """
        try:
            out = cls(Position.of(doc["mark_delete"]))
            out.ranges = [(Position.of(f), Position.of(last)) for f, last in doc.get("individually_acked", [])]
            for ledger_id, entry_id, size, mask in doc.get("batch_acks", []):
                if not isinstance(mask, str):
                    raise InvalidArgument(f"a stored mask is a hex string, not {mask!r}")
                out.batch_acks.append((Position.of((ledger_id, entry_id)), *check_batch(size, int(mask, 16))))
            for ledger_id, entry_id, n in doc.get("redelivery_counts", []):
                if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                    raise InvalidArgument(f"a redelivery count is a non-negative integer, not {n!r}")
                out.redelivery_counts.append((Position.of((ledger_id, entry_id)), n))
            properties = doc.get("properties", {})
            if not isinstance(properties, dict):  # dict() would also take a list of pairs
                raise InvalidArgument(f"stored properties are an object, not {properties!r}")
            out.properties = dict(properties)
            if doc.get("read_position") is not None:
                out.read_position = Position.of(doc["read_position"])
        except (KeyError, TypeError, ValueError, InvalidArgument) as exc:
            raise MetadataError(f"{what}: stored document is not a cursor: {str(doc)[:500]}") from exc
        return out


def _upper_bound(doc: dict[str, Any]) -> int:
    """At least the encoded size of ``doc`` (integers counted as 20 characters)."""
    base = len(json.dumps({**doc, "individually_acked": [], "batch_acks": [], "redelivery_counts": []}, separators=(",", ":")))
    n_ranges, n_counts = len(doc["individually_acked"]), len(doc["redelivery_counts"])
    masks = sum(len(b[3]) for b in doc["batch_acks"])
    return base + n_ranges * (4 * 20 + 8) + n_counts * (3 * 20 + 5) + len(doc["batch_acks"]) * (3 * 20 + 8) + masks


def _cut_to(doc: dict[str, Any], max_bytes: int) -> None:
    """Keep the longest prefixes of ranges, then batch records, then counts that fit."""
    budget = max_bytes - len(
        json.dumps({**doc, "individually_acked": [], "batch_acks": [], "redelivery_counts": []}, separators=(",", ":"))
    )
    for key in ("individually_acked", "batch_acks", "redelivery_counts"):
        kept = 0
        for item in doc[key]:
            size = len(json.dumps(item, separators=(",", ":"))) + 1  # and its comma
            if size > budget:
                break
            budget -= size
            kept += 1
        doc[key] = doc[key][:kept]
