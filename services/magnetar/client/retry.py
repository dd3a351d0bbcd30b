"""``reconsume_later``'s delays: a given delay, a delay level, or the next level.

Levels are Pulsar's (hosted service) ``MESSAGE_DELAYLEVEL``: level 1 is the first of
``1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h`` (configurable per
consumer with ``retry_delay_levels``). Without a delay or level the message's next level
is used: ``RECONSUMETIMES`` + 1 (1 s on the first retry, 5 s on the second, …), staying
at the last level once there.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta

from magnetar.common.errors import InvalidArgument
from magnetar.common.letters import RECONSUMETIMES

from .message import Message
from .options import DEFAULT_RETRY_DELAY_LEVELS

__all__ = ["DEFAULT_RETRY_DELAY_LEVELS", "parse_delay_levels", "reconsume_delay_ms"]
MIN_DELAY_MS = 1000
MAX_DELAY_MS = 864_000 * 1000
_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL = re.compile(r"^(\d+)(ms|s|m|h|d)$")


def _delay_ms(value: timedelta | int, what: str) -> int:
    if isinstance(value, timedelta):
        ms = int(value.total_seconds() * 1000)
    elif isinstance(value, int) and not isinstance(value, bool):
        ms = value
    else:
        raise InvalidArgument(f"{what} is a timedelta or milliseconds (int), not {type(value).__name__}")
    if not MIN_DELAY_MS <= ms <= MAX_DELAY_MS:
        raise InvalidArgument(f"{what} must be 1 s to 864,000 s (10 days), not {ms} ms")
    return ms


def parse_delay_levels(levels: str | Sequence[timedelta | int]) -> list[int]:
    """The levels in ms: a string like ``"1s 5s 1m 2h"`` or a sequence of timedeltas/ms.

    Raises:
        InvalidArgument: an empty list, a malformed item, or a delay outside 1 s – 10 days.
    """
    items: list[timedelta | int] = []
    if isinstance(levels, str):
        for word in levels.split():
            m = _LEVEL.match(word)
            if not m:
                raise InvalidArgument(f"a delay level is a number and a unit (ms, s, m, h, d), like 5s; not {word!r}")
            items.append(int(m.group(1)) * _UNITS_MS[m.group(2)])
    else:
        items = list(levels)
    if not items:
        raise InvalidArgument("retry_delay_levels must name at least one delay")
    return [_delay_ms(item, "a delay level") for item in items]


def reconsume_delay_ms(
    message: Message, levels_ms: list[int], delay: timedelta | int | None = None, level: int | None = None
) -> int:
    """The delay of one ``reconsume_later`` call, in ms.

    Raises:
        InvalidArgument: both a delay and a level, a delay outside 1 s – 10 days, or a
            level outside 1 – len(levels).
    """
    if delay is not None and level is not None:
        raise InvalidArgument("reconsume_later takes a delay or a level, not both")
    if delay is not None:
        return _delay_ms(delay, "the reconsume_later delay")
    if level is not None:
        if not isinstance(level, int) or isinstance(level, bool) or not 1 <= level <= len(levels_ms):
            raise InvalidArgument(f"the delay level must be 1 to {len(levels_ms)}, not {level!r}")
        return levels_ms[level - 1]
    try:
        times = max(0, int(message.properties().get(RECONSUMETIMES, "0")))
    except ValueError:
        times = 0
    return levels_ms[min(times, len(levels_ms) - 1)]
