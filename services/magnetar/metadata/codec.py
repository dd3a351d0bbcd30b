"""JSON documents <-> znode bytes: compact, key-sorted, UTF-8, always a JSON object."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from magnetar.common.errors import InvalidArgument
from magnetar.metadata.errors import CorruptMetadata


def encode(doc: Mapping[str, Any]) -> bytes:
    """Serialize a document for a znode.

    Raises:
        InvalidArgument: ``doc`` is not a mapping or holds something JSON cannot carry
            (sets, bytes, NaN …).
    """
    if not isinstance(doc, Mapping):
        raise InvalidArgument(f"a metadata document must be a mapping, not {type(doc).__name__}")
    try:
        text = json.dumps(dict(doc), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"metadata document cannot be stored as JSON: {exc}") from exc
    return text.encode()


def _refuse_constant(name: str) -> float:
    # NaN and Infinity are not JSON, and encode() could not write the document back.
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text[:40]} is too large for a float")
    return value


def decode(data: bytes, path: str = "") -> dict[str, Any]:
    """Parse a znode's data; an empty znode reads as an empty document.

    Args:
        data: the znode's bytes.
        path: the znode, named in the error message.

    Raises:
        CorruptMetadata: the data is not UTF-8 JSON holding an object.
    """
    if not data:
        return {}
    where = f"znode {path}" if path else "metadata"
    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=_refuse_constant, parse_float=_finite_float)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        preview = data[:60]
        raise CorruptMetadata(f"{where} does not hold valid JSON ({exc}): {preview!r}") from exc
    if not isinstance(doc, dict):
        raise CorruptMetadata(f"{where} holds JSON {type(doc).__name__}, expected an object")
    return doc
