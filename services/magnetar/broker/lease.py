"""How long this broker may go on acting as the owner of its bundles.

A broker owns a bundle while its ZooKeeper session holds the bundle's ephemeral znode.
ZooKeeper expires a session once it has heard nothing from the client for the session
timeout T, and from then on another broker may take the bundle. So the broker knows its
ownership is safe only up to T after the *sending* of the last request ZooKeeper
answered. The broker pings ZooKeeper every T/5 (``BrokerService``); each answer renews
the lease to ``sent_at + LEASE_FRACTION * T``. A broker that cannot renew it — cut off
from ZooKeeper, or stopped (a GC pause, SIGSTOP, a VM stall) — finds the lease expired
and stops serving *before* another broker can have taken its bundles: it ends every
stream with NotOwner, which clients answer by looking the topic up again.

The clock is injectable, so this is tested without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable

LEASE_FRACTION = 0.7
"""The share of the session timeout a renewal is trusted for: the rest is the margin
for the broker's own reaction (ending streams) and for ZooKeeper's tick rounding."""


class SessionLease:
    """The time until which this broker's ZooKeeper session is surely alive."""

    def __init__(self, session_timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.session_timeout_s = session_timeout_s
        self.clock = clock
        self._expires_at = float("-inf")

    @property
    def term_s(self) -> float:
        """How long one renewal is trusted for."""
        return self.session_timeout_s * LEASE_FRACTION

    @property
    def ping_interval_s(self) -> float:
        """How often the owner of the lease should renew it."""
        return self.session_timeout_s / 5

    def renewed(self, sent_at: float) -> None:
        """ZooKeeper answered a request sent at ``sent_at`` (this clock's time)."""
        self._expires_at = max(self._expires_at, sent_at + self.term_s)

    def revoke(self) -> None:
        """The session is known to be gone (expired): nothing is owned any more."""
        self._expires_at = float("-inf")

    def valid(self) -> bool:
        """True while the session is surely alive."""
        return self.clock() < self._expires_at

    def remaining_s(self) -> float:
        """Seconds left (negative: expired that long ago)."""
        return self._expires_at - self.clock()
