"""``ProducerAccessMode``: pulsar-client's names and values, shared by the broker and the SDK."""

from __future__ import annotations

import enum

from magnetar.common.errors import InvalidArgument


class ProducerAccessMode(enum.IntEnum):
    """Who else may produce on a topic while this producer does (Pulsar's PIP-68).

    ``Shared``: anyone; ``Exclusive``: nobody (refused when another producer is there);
    ``WaitForExclusive``: nobody, waiting until the others are gone;
    ``ExclusiveWithFencing``: nobody, fencing the others out.
    """

    Shared = 0
    Exclusive = 1
    WaitForExclusive = 2
    ExclusiveWithFencing = 3

    @classmethod
    def of(cls, value: int | str | ProducerAccessMode) -> ProducerAccessMode:
        """The mode named or numbered ``value`` (pulsar-client's enum members are taken too).

        Raises:
            InvalidArgument: no such mode.
        """
        try:
            return cls[value] if isinstance(value, str) else cls(int(value))
        except (KeyError, ValueError, TypeError) as exc:
            names = ", ".join(m.name for m in cls)
            raise InvalidArgument(f"unknown producer access mode {value!r} (one of {names})") from exc
