"""``KeyValueSchema``: a key and a value, each with its own schema, in one payload.

pulsar-client's Python has no KeyValue schema; this is Java's ``Schema.KeyValue`` with
its INLINE encoding (the only one here; Java's SEPARATED puts the key in the message's
key instead). The payload: the key's encoding and the value's, each after its length
(a 4-byte big-endian int; -1: None). The definition is Pulsar's KEY_VALUE layout: the
key schema's definition and the value schema's, each after its length, with the
properties ``key.schema.name``, ``key.schema.type``, ``key.schema.properties`` (JSON),
the same for ``value.``, and ``kv.encoding.type`` = ``INLINE``; a primitive part's
(bytes, string) definition is empty, as Java writes it.
"""

from __future__ import annotations

import json
import struct
from typing import Any, NamedTuple

from .schema import Schema, SchemaInfo, SchemaType

_LENGTH = struct.Struct(">i")


class KeyValue(NamedTuple):
    """A value of a :class:`KeyValueSchema` (a ``(key, value)`` tuple works too)."""

    key: Any
    value: Any


_STRUCTURED = (SchemaType.JSON, SchemaType.PROTOBUF, SchemaType.AVRO, SchemaType.KEY_VALUE, SchemaType.PROTOBUF_NATIVE)


def _part(info: SchemaInfo) -> bytes:
    """A part's definition in the KEY_VALUE definition: none for a primitive (bytes,
    string), as Java writes it."""
    return info.data if info.schema_type() in _STRUCTURED else b""


def _lengthed(first: bytes | None, second: bytes | None) -> bytes:
    out = bytearray()
    for part in (first, second):
        out += _LENGTH.pack(-1 if part is None else len(part))
        out += part or b""
    return bytes(out)


def split(data: bytes) -> tuple[bytes | None, bytes | None]:
    """The two length-prefixed parts of a KEY_VALUE payload or definition.

    Raises:
        ValueError: ``data`` is not two length-prefixed parts.
    """
    parts: list[bytes | None] = []
    at = 0
    for _ in range(2):
        if at + 4 > len(data):
            raise ValueError(f"a key/value payload of {len(data)} bytes is cut short at byte {at}")
        (n,) = _LENGTH.unpack_from(data, at)
        at += 4
        if n < -1 or at + max(n, 0) > len(data):
            raise ValueError(f"a key/value payload of {len(data)} bytes holds a part of {n} bytes at byte {at}")
        parts.append(None if n == -1 else data[at : at + n])
        at += max(n, 0)
    if at != len(data):
        raise ValueError(f"a key/value payload of {len(data)} bytes has {len(data) - at} bytes after its value")
    return parts[0], parts[1]


class KeyValueSchema(Schema):
    """Key/value pairs, INLINE encoded.

    Args:
        key_schema: the key's schema.
        value_schema: the value's schema.
    """

    def __init__(self, key_schema: Schema, value_schema: Schema) -> None:
        self.key_schema = key_schema
        self.value_schema = value_schema
        k, v = key_schema.schema_info(), value_schema.schema_info()
        properties = {"kv.encoding.type": "INLINE"}
        for side, info in (("key", k), ("value", v)):
            properties[f"{side}.schema.name"] = info.name()
            properties[f"{side}.schema.type"] = info.schema_type().name
            properties[f"{side}.schema.properties"] = json.dumps(info.properties(), separators=(",", ":"))
        self._record_cls = KeyValue
        self._schema_info = SchemaInfo(SchemaType.KEY_VALUE, "KeyValue", _lengthed(_part(k), _part(v)), properties)

    def encode(self, obj: Any) -> bytes:
        if not (isinstance(obj, tuple) and len(obj) == 2):
            raise TypeError(f"Invalid record obj of type {type(obj)} - expected a (key, value) pair")
        key, value = obj
        return _lengthed(
            None if key is None else self.key_schema.encode(key),
            None if value is None else self.value_schema.encode(value),
        )

    def decode(self, data: bytes) -> KeyValue:
        return self.decode_with(data, None)

    def needs_writer_schema(self) -> bool:
        return self.key_schema.needs_writer_schema() or self.value_schema.needs_writer_schema()

    def decode_with(self, data: bytes, writer: SchemaInfo | None) -> KeyValue:
        key, value = split(data)
        kw = vw = None
        if writer is not None and writer.schema_type() == SchemaType.KEY_VALUE and writer.data != self._schema_info.data:
            kw, vw = _writer_parts(writer)
        return KeyValue(
            None if key is None else self.key_schema.decode_with(key, kw),
            None if value is None else self.value_schema.decode_with(value, vw),
        )

    def __str__(self) -> str:
        return f"KeyValueSchema({self.key_schema}, {self.value_schema})"


def _writer_parts(writer: SchemaInfo) -> tuple[SchemaInfo | None, SchemaInfo | None]:
    props = writer.properties()
    out: list[SchemaInfo | None] = []
    for side, data in zip(("key", "value"), split(writer.data), strict=True):
        kind = props.get(f"{side}.schema.type", "")
        if data is None or kind not in SchemaType.__members__:
            out.append(None)
        else:
            out.append(SchemaInfo(SchemaType[kind], props.get(f"{side}.schema.name", ""), data))
    return out[0], out[1]
