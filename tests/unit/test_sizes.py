"""Sizes as pulsar-admin takes them (``10M``)."""

from __future__ import annotations

import pytest

from magnetar.common.errors import InvalidArgument
from magnetar.common.sizes import parse_size


@pytest.mark.parametrize("text, size", [
    ("0", 0), ("512", 512), ("2k", 2048), ("10M", 10 * 1024**2), ("1g", 1024**3), ("3T", 3 * 1024**4), ("-1", -1),
])
def test_sizes_take_binary_units(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "10 MB", "1.5M", "M"])
def test_what_is_not_a_size_is_refused_naming_the_option(text: str) -> None:
    with pytest.raises(InvalidArgument, match="-t/--threshold"):
        parse_size(text, "-t/--threshold")
