"""Pulsar's admin JSON for schemas and the broker's messages, both ways: the payload of an
upload (PostSchemaPayload ``{"type", "schema", "properties"}``, also pulsar-admin's
schema file) and one version (GetSchemaResponse ``{"version", "type", "timestamp",
"data", "properties"}``). The gateway's ``/admin/v2/schemas`` routes, the REST admin
client and ``magnetar admin schemas`` share them, so every door shows the same JSON.

The definition travels as text: for most types the stored bytes as UTF-8; for KEY_VALUE,
as Pulsar's admin shows it, ``{"key": …, "value": …}`` with each part's definition as
JSON (an empty string for a primitive part), the parts' types in the properties
``key.schema.type`` / ``value.schema.type``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any

from magnetar.common.errors import InvalidArgument, InvalidSchema
from magnetar.proto.v1 import broker_pb2 as pb

_LENGTH = struct.Struct(">i")
TYPE_NAMES = (
    "NONE", "STRING", "JSON", "PROTOBUF", "AVRO", "BOOLEAN", "INT8", "INT16", "INT32", "INT64", "FLOAT", "DOUBLE",
    "DATE", "TIME", "TIMESTAMP", "KEY_VALUE", "INSTANT", "LOCAL_DATE", "LOCAL_TIME", "LOCAL_DATE_TIME",
    "PROTOBUF_NATIVE",
)
"""Pulsar's admin names of its schema types, by their wire numbers (``Schema.Type``; the
broker's ``SchemaType`` has the same, a layer above the client)."""
KEY_VALUE = TYPE_NAMES.index("KEY_VALUE")
_STRUCT_TYPES = {"JSON", "AVRO", "PROTOBUF", "PROTOBUF_NATIVE"}


def type_name(value: int) -> str:
    """Pulsar's name of a schema type number (``AVRO``)."""
    return TYPE_NAMES[value] if 0 <= value < len(TYPE_NAMES) else f"type {value}"


def type_number(name: str) -> int:
    """The wire number of a Pulsar type name (case-insensitive; ``BYTES`` is NONE).

    Raises:
        InvalidArgument: no such type.
    """
    upper = name.strip().upper()
    if upper == "BYTES":
        return 0
    if upper not in TYPE_NAMES:
        raise InvalidArgument(f"unknown schema type {name!r}; one of {', '.join(TYPE_NAMES)}")
    return TYPE_NAMES.index(upper)


def payload_to_proto(doc: object, topic: str = "") -> pb.SchemaInfo:
    """A PostSchemaPayload (``type`` a Pulsar type name, ``schema`` the definition text,
    ``properties`` strings) as the broker's SchemaInfo.

    Raises:
        InvalidArgument: not such an object, or an unknown type.
        InvalidSchema: a KEY_VALUE definition that is not ``{"key", "value"}``.
    """
    if not isinstance(doc, Mapping):
        raise InvalidArgument('a schema payload is a JSON object {"type", "schema", "properties"}')
    kind, text, props = doc.get("type"), doc.get("schema", ""), doc.get("properties") or {}
    if not isinstance(kind, str):
        raise InvalidArgument('the schema payload has no "type" (a Pulsar schema type name such as "AVRO")')
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise InvalidArgument('the schema payload\'s "schema" is the definition as a string')
    if not isinstance(props, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in props.items()):
        raise InvalidArgument('the schema payload\'s "properties" maps strings to strings')
    schema_type = type_number(kind)
    data = _key_value_data(text) if schema_type == KEY_VALUE else text.encode()
    return pb.SchemaInfo(type=schema_type, data=data, properties=dict(props), name=topic)


def schema_to_json(schema: pb.TopicSchema) -> dict[str, Any]:
    """One version as Pulsar's GetSchemaResponse."""
    info = schema.schema
    return {
        "version": schema.version, "type": type_name(info.type), "timestamp": schema.timestamp_ms,
        "data": definition_text(info), "properties": dict(info.properties),
    }


def schema_from_json(doc: Mapping[str, Any]) -> pb.TopicSchema:
    """A GetSchemaResponse as the broker's TopicSchema (the REST admin client's answers)."""
    info = payload_to_proto({"type": doc["type"], "schema": doc.get("data", ""), "properties": doc.get("properties")})
    return pb.TopicSchema(version=int(doc["version"]), schema=info, timestamp_ms=int(doc.get("timestamp", 0)))


def definition_text(info: pb.SchemaInfo) -> str:
    """The definition as Pulsar's admin shows it (KEY_VALUE: ``{"key", "value"}``)."""
    if info.type == KEY_VALUE:
        return _key_value_text(info)
    return bytes(info.data).decode("utf-8", errors="replace")


def _key_value_text(info: pb.SchemaInfo) -> str:
    data, parts = bytes(info.data), []
    offset = 0
    for side in ("key", "value"):
        if len(data) < offset + 4:
            return data.decode("utf-8", errors="replace")
        (size,) = _LENGTH.unpack_from(data, offset)
        part = data[offset + 4: offset + 4 + max(size, 0)]
        offset += 4 + max(size, 0)
        kind = info.properties.get(f"{side}.schema.type", "")
        try:
            parts.append(json.loads(part) if kind in _STRUCT_TYPES and part else "")
        except ValueError:
            parts.append(part.decode("utf-8", errors="replace"))
    return json.dumps({"key": parts[0], "value": parts[1]}, separators=(",", ":"))


def _key_value_data(text: str) -> bytes:
    """``{"key": …, "value": …}`` as KEY_VALUE's stored data: each part's definition after
    its 4-byte big-endian length."""
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not {"key", "value"} <= doc.keys():
        raise InvalidSchema('a KEY_VALUE schema\'s definition is {"key": <definition>, "value": <definition>}')
    out = b""
    for side in ("key", "value"):
        part = doc[side]
        raw = b"" if part in ("", None) else (part if isinstance(part, str) else json.dumps(part)).encode()
        out += _LENGTH.pack(len(raw)) + raw
    return out
