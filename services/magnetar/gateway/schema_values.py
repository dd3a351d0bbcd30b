"""A stored payload read back as the value its schema says, for people to look at (the web
console's peek; docs/console-operations.md): the reverse of what the REST producer
encodes (:mod:`magnetar.gateway.rest_schemas`), as JSON.

| type | value |
|---|---|
| STRING | the text (UTF-8) |
| JSON | the parsed document |
| AVRO | the record, read with the version's Avro schema (bytes base64, decimals and UUIDs as text, times ISO 8601) |
| INT8, INT16, INT32, INT64 | the integer (big-endian) |
| FLOAT, DOUBLE | the number (NaN and the infinities as text: JSON has none) |
| BOOLEAN | true or false |

Any other type (PROTOBUF, PROTOBUF_NATIVE, KEY_VALUE, the time types) is not decoded here:
:func:`decode_value` raises, and the console shows the payload's bytes.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import io
import json
import math
import struct
import uuid
from typing import Any

import fastavro

from magnetar.client.schema_json import type_name
from magnetar.common.errors import InvalidArgument
from magnetar.proto.v1 import broker_pb2 as pb

_NUMBERS = {
    "INT8": struct.Struct(">b"), "INT16": struct.Struct(">h"), "INT32": struct.Struct(">i"), "INT64": struct.Struct(">q"),
    "FLOAT": struct.Struct(">f"), "DOUBLE": struct.Struct(">d"),
}
DECODED_TYPES = ("STRING", "JSON", "AVRO", *_NUMBERS, "BOOLEAN")


def schema_version_number(version: bytes) -> int | None:
    """A message's schema version (8 bytes, big-endian) as the registry numbers it (None: none)."""
    return int.from_bytes(version, "big", signed=True) if len(version) == 8 else None


def jsonable(value: Any) -> Any:
    """``value`` as JSON can hold it (Avro's bytes, decimals, UUIDs, times; non-finite floats)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, datetime.date | datetime.time):  # datetime is a date
        return value.isoformat()
    return value


def decode_value(info: pb.SchemaInfo, data: bytes) -> Any:
    """The value ``data`` holds under the schema ``info``, as JSON can hold it.

    Raises:
        InvalidArgument: a type not decoded here, or a payload that is not a value of it.
    """
    kind = type_name(info.type)
    if kind not in DECODED_TYPES:
        raise InvalidArgument(f"{kind} payloads are not decoded here (decoded: {', '.join(DECODED_TYPES)})")
    try:
        if kind == "STRING":
            return data.decode("utf-8")
        if kind == "JSON":
            return json.loads(data)
        if kind in _NUMBERS:
            return jsonable(_NUMBERS[kind].unpack(data)[0])
        if kind == "BOOLEAN":
            if data not in (b"\x00", b"\x01"):
                raise ValueError("a boolean is one byte, 0 or 1")
            return data == b"\x01"
        parsed = fastavro.parse_schema(json.loads(bytes(info.data)))
        buffer = io.BytesIO(data)
        record = fastavro.schemaless_reader(buffer, parsed, None)
        if buffer.tell() != len(data):
            raise ValueError(f"{len(data) - buffer.tell()} bytes are left after the record")
        return jsonable(record)
    except Exception as exc:  # noqa: BLE001 - every failure of a decoder is the payload's (or the definition's)
        raise InvalidArgument(f"the payload is not a {kind} value: {exc}") from None
