"""Negative-ack redelivery backoff (pulsar-client's ``RedeliveryBackoff``).

A consumer given ``negative_ack_redelivery_backoff`` redelivers a negatively
acknowledged message after ``backoff.next(message.redelivery_count())`` milliseconds
instead of the fixed ``negative_ack_redelivery_delay_ms``: the more often a message came
back, the longer it waits. :class:`MultiplierRedeliveryBackoff` computes it as the Java
client's ``MultiplierRedeliveryBackoff`` does, so a Magnetar consumer and a Java one wait
the same time for the same message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from magnetar.common.errors import InvalidConfiguration


@dataclass(frozen=True)
class MultiplierRedeliveryBackoff:
    """``min_delay_ms * multiplier ** redelivery_count``, at most ``max_delay_ms``.

    The defaults are the Java builder's: 10 s, 10 min, 2.0. A message nacked the
    first time (redelivery count 0) waits ``min_delay_ms``.

    Raises:
        InvalidConfiguration: ``min_delay_ms`` < 0, ``max_delay_ms`` < ``min_delay_ms``,
            ``multiplier`` <= 1, or a value that is not a number.
    """

    min_delay_ms: int = 10_000
    max_delay_ms: int = 600_000
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        for name in ("min_delay_ms", "max_delay_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidConfiguration(f"{name} must be an int of milliseconds, not {value!r}")
        m = self.multiplier
        if isinstance(m, bool) or not isinstance(m, int | float) or not math.isfinite(m):
            raise InvalidConfiguration(f"multiplier must be a number, not {m!r}")
        if self.min_delay_ms < 0:
            raise InvalidConfiguration(f"min_delay_ms must be >= 0, not {self.min_delay_ms}")
        if self.max_delay_ms < self.min_delay_ms:
            raise InvalidConfiguration(
                f"max_delay_ms must be >= min_delay_ms ({self.min_delay_ms}), not {self.max_delay_ms}"
            )
        if m <= 1:
            raise InvalidConfiguration(f"multiplier must be > 1, not {m}")

    @property
    def _max_pow(self) -> int:
        # Past this power the product is over max_delay_ms: answer it without computing
        # a power that could overflow (the Java class's maxMultiplierPow).
        return int(math.log(self.max_delay_ms / self.min_delay_ms) / math.log(self.multiplier)) + 1

    def next(self, redelivery_count: int) -> int:
        """Milliseconds to wait before redelivering a message delivered
        ``redelivery_count`` times before."""
        if redelivery_count <= 0 or self.min_delay_ms <= 0:
            return self.min_delay_ms
        if redelivery_count > self._max_pow:
            return self.max_delay_ms
        return min(int(self.min_delay_ms * self.multiplier**redelivery_count), self.max_delay_ms)


def check_backoff(value: object) -> MultiplierRedeliveryBackoff | None:
    """``value`` if it is None or a redelivery backoff (anything with ``next(count)``).

    Raises:
        InvalidConfiguration: something else.
    """
    if value is None or callable(getattr(value, "next", None)):
        return value  # type: ignore[return-value]
    raise InvalidConfiguration(
        f"negative_ack_redelivery_backoff must be a MultiplierRedeliveryBackoff, not {type(value).__name__}"
    )
