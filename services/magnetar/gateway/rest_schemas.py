"""The schemas of Pulsar's REST producer (TopicsBase): ``valueSchema`` is a JSON-serialized
SchemaInfo (``{"name", "schema": <base64 definition>, "type", "properties"}``), and each
message's ``payload`` is text the gateway encodes with it, as Pulsar's broker does:

| type | payload |
|---|---|
| STRING | the text, UTF-8 |
| JSON | a JSON document (stored as compact JSON) |
| AVRO | the value in Avro's JSON encoding (a union's branch named: ``{"string": "x"}``), stored in Avro's binary encoding |
| INT8, INT16, INT32, INT64 | a decimal integer (big-endian, 1/2/4/8 bytes) |
| FLOAT, DOUBLE | a decimal number (IEEE 754 big-endian) |
| BOOLEAN | ``true`` or ``false`` (one byte) |

Any other type (KEY_VALUE through ``keySchema``, PROTOBUF_NATIVE, the time types) is
refused with a reason, where Pulsar's broker would store an empty payload.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import struct
from collections.abc import Callable
from typing import Any

import fastavro

from magnetar.client.schema_json import payload_to_proto, type_name
from magnetar.common.errors import InvalidArgument, InvalidSchema
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.schema import Schema, SchemaInfo, SchemaType

_INTS = {"INT8": struct.Struct(">b"), "INT16": struct.Struct(">h"), "INT32": struct.Struct(">i"), "INT64": struct.Struct(">q")}
_FLOATS = {"FLOAT": struct.Struct(">f"), "DOUBLE": struct.Struct(">d")}
ENCODED_TYPES = ("STRING", "JSON", "AVRO", *_INTS, *_FLOATS, "BOOLEAN")


def value_schema(text: str, topic: str) -> pb.SchemaInfo:
    """``valueSchema`` as the broker's SchemaInfo.

    Raises:
        InvalidArgument: not a JSON SchemaInfo, a definition that is not base64, an unknown type.
    """
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise InvalidArgument('valueSchema is a JSON SchemaInfo: {"name", "schema": <base64 definition>, "type", "properties"}')
    definition = doc.get("schema") or ""
    try:
        data = base64.b64decode(definition, validate=True) if isinstance(definition, str) else None
    except (binascii.Error, ValueError):
        data = None
    if data is None:
        raise InvalidArgument("valueSchema's schema is the definition, base64")
    return payload_to_proto({"type": doc.get("type"), "schema": data.decode("utf-8", "replace"),
                             "properties": doc.get("properties") or {}}, topic)


class RestSchema(Schema):
    """A schema declared as given (type, definition, properties) whose ``encode`` takes a
    REST payload (text) as Pulsar's REST producer reads it."""

    def __init__(self, info: pb.SchemaInfo) -> None:
        kind = type_name(info.type)
        if kind not in ENCODED_TYPES:
            raise InvalidArgument(
                f"the REST producer cannot encode payloads with a {kind} schema; it encodes {', '.join(ENCODED_TYPES)} "
                "(produce with the SDK or pulsar-client for the others)"
            )
        self._record_cls = None
        known = {t.value for t in SchemaType}
        schema_type = SchemaType(info.type) if info.type in known else info.type  # BOOLEAN: no SDK class
        self._schema_info = SchemaInfo(schema_type, info.name or kind, bytes(info.data), dict(info.properties))  # type: ignore[arg-type]
        self._kind = kind
        self._encoder = self._make_encoder(kind, bytes(info.data))

    @staticmethod
    def _make_encoder(kind: str, definition: bytes) -> Callable[[str], bytes]:
        if kind == "STRING":
            return lambda text: text.encode()
        if kind == "JSON":
            return lambda text: json.dumps(json.loads(text), separators=(",", ":")).encode()
        if kind in _INTS:
            return lambda text: _INTS[kind].pack(int(text.strip()))
        if kind in _FLOATS:
            return lambda text: _FLOATS[kind].pack(float(text))
        if kind == "BOOLEAN":
            return lambda text: b"\x01" if json.loads(text) is True else (b"\x00" if json.loads(text) is False else _no_bool())
        try:
            parsed = fastavro.parse_schema(json.loads(definition))
        except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as exc:
            raise InvalidSchema(f"the AVRO schema does not parse: {exc}") from None
        return lambda text: _avro(parsed, text)

    def encode(self, obj: Any) -> bytes:
        """Raises: InvalidArgument: ``obj`` (the payload text) does not encode."""
        try:
            return self._encoder(obj)
        except Exception as exc:  # noqa: BLE001 - every failure of a decoder or encoder is the payload's
            raise InvalidArgument(f"the payload is not a {self._kind} value: {exc}") from None

    def decode(self, data: bytes) -> Any:
        return data

    def __str__(self) -> str:
        return f"RestSchema({self._kind})"


def _avro(parsed: Any, text: str) -> bytes:
    record = next(iter(fastavro.json_reader(io.StringIO(text), parsed)))
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, record)
    return out.getvalue()


def _no_bool() -> bytes:
    raise ValueError("give true or false")
