"""The schema classes of pulsar-client's ``pulsar.schema``: what a producer encodes a
value with, what a consumer decodes a payload with, and the definition (``SchemaInfo``)
both declare for the topic.

A schema's definition is the text pulsar-client declares for it (``json.dumps`` of the
definition with ``indent=True``: ``"null"`` for bytes and strings), so that our SDK and
pulsar-client declare identical schemas for one topic.
"""

from __future__ import annotations

import enum
import json
from abc import abstractmethod
from collections.abc import Mapping
from typing import Any

from .definition import Record, record_dict


class SchemaType(enum.IntEnum):
    """Pulsar's schema types, numbered as pulsar-client's ``_pulsar.SchemaType``
    (PulsarApi.proto's ``Schema.Type``; BYTES is -1 there and declares no schema)."""

    BYTES = -1
    NONE = 0
    STRING = 1
    JSON = 2
    PROTOBUF = 3
    AVRO = 4
    INT8 = 6
    INT16 = 7
    INT32 = 8
    INT64 = 9
    FLOAT = 10
    DOUBLE = 11
    KEY_VALUE = 15
    PROTOBUF_NATIVE = 20


class SchemaInfo:
    """A schema's declaration: its type, name, definition and properties (pulsar-client's
    ``SchemaInfo``, read with the same methods)."""

    __slots__ = ("_type", "_name", "data", "_properties")

    def __init__(self, schema_type: SchemaType, name: str, data: bytes, properties: Mapping[str, str] | None = None) -> None:
        self._type = schema_type
        self._name = name
        self.data = data
        """The definition as declared (bytes: KEY_VALUE's is binary)."""
        self._properties = dict(properties or {})

    def schema_type(self) -> SchemaType:
        return self._type

    def name(self) -> str:
        return self._name

    def schema(self) -> str:
        """The definition as text."""
        return self.data.decode("utf-8", "replace")

    def properties(self) -> dict[str, str]:
        return dict(self._properties)

    def __repr__(self) -> str:
        return f"SchemaInfo({self._type.name}, {self._name!r}, {len(self.data)} bytes)"


def definition_text(definition: Any) -> bytes:
    """A definition as pulsar-client's Python declares it."""
    return json.dumps(definition, indent=True).encode()


class Schema:
    """The base of every schema: ``encode(value) -> bytes``, ``decode(bytes) -> value``.

    Args:
        record_cls: the Python type of the values (checked on encode).
        schema_type: a :class:`SchemaType`.
        schema_definition: the definition (JSON-serializable; None for none).
        schema_name: the name declared.
    """

    def __init__(self, record_cls: Any, schema_type: SchemaType, schema_definition: Any, schema_name: str) -> None:
        self._record_cls = record_cls
        self._schema_info = SchemaInfo(schema_type, schema_name, definition_text(schema_definition))

    @abstractmethod
    def encode(self, obj: Any) -> bytes: ...

    @abstractmethod
    def decode(self, data: bytes) -> Any: ...

    def decode_with(self, data: bytes, writer: SchemaInfo | None) -> Any:
        """Decode ``data`` written with the schema ``writer`` (None: unknown, as this
        schema). Only schemas whose decoding depends on the writer's definition (Avro)
        look at it."""
        return self.decode(data)

    def needs_writer_schema(self) -> bool:
        """Whether :meth:`decode_with` reads the writer's definition."""
        return False

    def schema_info(self) -> SchemaInfo:
        return self._schema_info

    def _validate_object_type(self, obj: Any) -> None:
        if not isinstance(obj, self._record_cls):
            raise TypeError(f"Invalid record obj of type {type(obj)} - expected type is {self._record_cls}")


class BytesSchema(Schema):
    """Payloads as given (the default: a producer with it declares no schema)."""

    def __init__(self) -> None:
        super().__init__(bytes, SchemaType.BYTES, None, "BYTES")

    def encode(self, data: bytes) -> bytes:
        self._validate_object_type(data)
        return data

    def decode(self, data: bytes) -> bytes:
        return data

    def __str__(self) -> str:
        return "BytesSchema"


class StringSchema(Schema):
    """str values, UTF-8 encoded."""

    def __init__(self) -> None:
        super().__init__(str, SchemaType.STRING, None, "STRING")

    def encode(self, obj: str) -> bytes:
        self._validate_object_type(obj)
        return obj.encode("utf-8")

    def decode(self, data: bytes) -> str:
        return data.decode("utf-8")

    def __str__(self) -> str:
        return "StringSchema"


def _json_default(o: Any) -> Any:
    if isinstance(o, enum.Enum):
        return o.value
    if isinstance(o, bytes):
        return o.decode()
    return record_dict(o)


class JsonSchema(Schema):
    """Records as JSON text (fields by name; an enum by its value, bytes as text),
    declared with the record's Avro definition, as pulsar-client does."""

    def __init__(self, record_cls: type[Record]) -> None:
        super().__init__(record_cls, SchemaType.JSON, record_cls.schema(), "JSON")

    def encode(self, obj: Record) -> bytes:
        self._validate_object_type(obj)
        return json.dumps(record_dict(obj), default=_json_default, indent=True).encode("utf-8")

    def decode(self, data: bytes) -> Record:
        return self._record_cls(**json.loads(data))

    def __str__(self) -> str:
        return f"JsonSchema({self._record_cls.__name__})"
