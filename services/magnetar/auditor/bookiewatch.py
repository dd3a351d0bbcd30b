"""Which bookies are lost: gone from ZooKeeper for longer than the grace period. Pure."""

from __future__ import annotations

from collections.abc import Collection


class LostBookies:
    """Fed with the registered bookies at each look; says which ones to mark.

    A bookie is watched once it was seen registered or is named by a ledger's fragments
    (given in ``known``). When it is absent, its clock starts; when it is back, the clock
    is dropped. A bookie absent for ``grace_s`` is due once (until it comes back)."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.gone_since: dict[str, float] = {}
        self.known: set[str] = set()
        self.marked: set[str] = set()

    def observe(
        self, registered: Collection[str], now: float, known: Collection[str] = ()
    ) -> list[str]:
        """Update with the bookies registered now; returns the bookies newly due, sorted."""
        live = set(registered)
        self.known |= live | set(known)
        for b in live:
            self.gone_since.pop(b, None)
            self.marked.discard(b)
        for b in self.known - live:
            self.gone_since.setdefault(b, now)
        return sorted(
            b
            for b, t in self.gone_since.items()
            if now - t >= self.grace_s and b not in self.marked
        )

    def done(self, bookie: str) -> None:
        """Its ledgers are marked: not due again unless it comes back and goes again."""
        self.marked.add(bookie)

    def pending(self, now: float) -> dict[str, float]:
        """Bookies gone but not yet marked, with the seconds they have been gone."""
        return {b: now - t for b, t in self.gone_since.items() if b not in self.marked}
