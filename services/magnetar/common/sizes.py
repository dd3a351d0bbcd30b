"""Sizes as pulsar-admin takes them on the command line: bytes, or a number with ``k``,
``m``, ``g`` or ``t`` (either case) for KiB, MiB, GiB or TiB (``10M``: 10485760)."""

from __future__ import annotations

import re

from magnetar.common.errors import InvalidArgument

_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_SIZE = re.compile(r"(-?\d+)([kmgt]?)", re.IGNORECASE)


def parse_size(text: str, what: str = "size") -> int:
    """Bytes ``text`` names (a sign is kept: the policy's check refuses it, in its words).

    Raises: InvalidArgument: not a number with an optional unit.
    """
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise InvalidArgument(f"{what}: {text!r} is not a size (bytes, or a number with k, m, g or t, e.g. 10M)")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]
