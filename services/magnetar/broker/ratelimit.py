"""Token buckets for the namespace rate limits (``publishRate``, ``dispatchRate``).

A :class:`TokenBucket` fills at ``rate`` tokens a second up to ``capacity``. Work is
counted *after* it is let through (:meth:`TokenBucket.consume` may take the bucket below
zero, as Pulsar's limiters do): a batch of 500 messages is never split or refused, and
the debt it leaves is paid by waiting. The average rate is exact over any interval longer
than the largest batch's worth of time; a full bucket allows a burst of ``capacity``.

A :class:`RateLimiter` is a message bucket and a byte bucket (either may be absent: no
limit) and answers how long its user must wait before the next piece of work. It is pure:
the clock is injected and nothing here sleeps.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

Clock = Callable[[], float]
_EPSILON = 1e-6
"""Token fractions below this are rounding (a clock's float cannot add a smaller wait)."""


class TokenBucket:
    """``rate`` tokens per second, at most ``capacity`` stored; starts full."""

    __slots__ = ("rate", "capacity", "_tokens", "_at", "_clock")

    def __init__(self, rate: float, capacity: float, clock: Clock = time.monotonic) -> None:
        if rate <= 0 or capacity <= 0:
            raise ValueError(f"a token bucket needs a positive rate and capacity, got {rate} and {capacity}")
        self.rate = rate
        self.capacity = capacity
        self._clock = clock
        self._tokens = capacity
        self._at = clock()

    def _refill(self) -> float:
        now = self._clock()
        if now > self._at:
            self._tokens = min(self.capacity, self._tokens + (now - self._at) * self.rate)
            self._at = now
        return self._tokens

    @property
    def tokens(self) -> float:
        """Tokens now (negative: in debt)."""
        return self._refill()

    def consume(self, n: float) -> None:
        """Take ``n`` tokens, into debt if there are fewer."""
        self._tokens = self._refill() - n

    def wait_s(self) -> float:
        """Seconds until at least one token is there (0: now)."""
        tokens = self._refill()
        return 0.0 if tokens >= 1 - _EPSILON else (1 - tokens) / self.rate


class RateLimiter:
    """Messages and bytes per period; a limit <= 0 is no limit.

    ``msg_rate`` messages and ``byte_rate`` bytes are allowed per ``period_s`` seconds
    (Pulsar's ``ratePeriodInSecond``); each bucket holds one period's worth.
    """

    def __init__(self, msg_rate: int, byte_rate: int, period_s: float = 1.0, clock: Clock = time.monotonic) -> None:
        if period_s <= 0:
            raise ValueError(f"the rate period must be positive, got {period_s}")
        self.msg_rate = msg_rate
        self.byte_rate = byte_rate
        self.period_s = period_s
        self.messages = TokenBucket(msg_rate / period_s, msg_rate, clock) if msg_rate > 0 else None
        self.bytes = TokenBucket(byte_rate / period_s, byte_rate, clock) if byte_rate > 0 else None

    @property
    def limits(self) -> tuple[int, int, float]:
        """What it was made with (the policy it enforces)."""
        return self.msg_rate, self.byte_rate, self.period_s

    def consume(self, messages: int, size: int) -> None:
        if self.messages is not None:
            self.messages.consume(messages)
        if self.bytes is not None:
            self.bytes.consume(size)

    def wait_s(self) -> float:
        """Seconds until both buckets have a token again (0: go on now)."""
        return max(self.msg_wait_s(), self.byte_wait_s())

    def msg_wait_s(self) -> float:
        return 0.0 if self.messages is None else self.messages.wait_s()

    def byte_wait_s(self) -> float:
        return 0.0 if self.bytes is None else self.bytes.wait_s()

    def messages_available(self) -> float:
        """Whole messages the message bucket allows now (infinite without a limit)."""
        return math.inf if self.messages is None else max(0.0, math.floor(self.messages.tokens))


def limiter_for(
    msg_rate: int, byte_rate: int, period_s: float = 1.0, current: RateLimiter | None = None,
    clock: Clock = time.monotonic,
) -> RateLimiter | None:
    """The limiter a policy asks for: None without any limit, ``current`` when it already
    enforces exactly this (its buckets keep their state), else a new one."""
    if msg_rate <= 0 and byte_rate <= 0:
        return None
    if current is not None and current.limits == (msg_rate, byte_rate, period_s):
        return current
    return RateLimiter(msg_rate, byte_rate, period_s, clock)
