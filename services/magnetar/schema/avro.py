"""``AvroSchema``: records (a :class:`Record` class, or dicts with a definition given as
a dict) in Avro's binary encoding, without a header (fastavro's schemaless writer and
reader), as pulsar-client encodes them.

Decoding resolves the schema a message was written with against this one (Avro's
schema resolution: fields added with defaults, fields removed), as pulsar-client does,
with the record names made equal first (pulsar-client does the same, so a record class
renamed still reads old messages).
"""

from __future__ import annotations

import copy
import enum
import io
import json
from typing import Any

import fastavro

from .definition import Record
from .schema import Schema, SchemaInfo, SchemaType


def _avro_value(x: Any) -> Any:
    if isinstance(x, enum.Enum):
        return x.name
    if isinstance(x, Record):
        return _avro_dict(x.__dict__)
    if isinstance(x, list):
        return [_avro_value(item) for item in x]
    if isinstance(x, dict):
        return _avro_dict(x)
    return x


def _avro_dict(d: dict[str, Any]) -> dict[str, Any]:
    return {k: _avro_value(v) for k, v in d.items()}


class AvroSchema(Schema):
    """Avro records.

    Args:
        record_cls: a :class:`Record` subclass; None with ``schema_definition``.
        schema_definition: an Avro record definition (a dict): values are dicts.
    """

    def __init__(self, record_cls: type[Record] | None, schema_definition: dict[str, Any] | None = None) -> None:
        if record_cls is None and schema_definition is None:
            raise AssertionError("The param record_cls and schema_definition shouldn't be both None.")
        self._schema: dict[str, Any] = record_cls.schema() if record_cls is not None else schema_definition  # type: ignore[assignment]
        self._parsed = fastavro.parse_schema(copy.deepcopy(self._schema))
        self._readers: dict[bytes, Any] = {}  # a writer's definition -> (writer, reader) parsed
        super().__init__(record_cls, SchemaType.AVRO, self._schema, "AVRO")

    def encode(self, obj: Any) -> bytes:
        if self._record_cls is not None:
            self._validate_object_type(obj)
            obj = _avro_dict(obj.__dict__)
        elif not isinstance(obj, dict):
            raise ValueError("If using the custom schema, the record data should be dict type.")
        out = io.BytesIO()
        fastavro.schemaless_writer(out, self._parsed, obj)
        return out.getvalue()

    def decode(self, data: bytes) -> Any:
        return self._made(fastavro.schemaless_reader(io.BytesIO(data), self._parsed, None))

    def needs_writer_schema(self) -> bool:
        return True

    def decode_with(self, data: bytes, writer: SchemaInfo | None) -> Any:
        if writer is None or writer.data == self._schema_info.data:
            return self.decode(data)
        if writer.schema_type() != SchemaType.AVRO:
            raise TypeError(f"the message was written with a {writer.schema_type().name} schema, not an Avro one")
        pair = self._readers.get(writer.data)
        if pair is None:
            written = json.loads(writer.data)
            written["name"] = self._schema["name"]
            pair = self._readers[writer.data] = (fastavro.parse_schema(written), fastavro.parse_schema(copy.deepcopy(self._schema)))
        return self._made(fastavro.schemaless_reader(io.BytesIO(data), pair[0], pair[1]))

    def _made(self, d: Any) -> Any:
        return self._record_cls(**d) if self._record_cls is not None else d

    def __str__(self) -> str:
        return f"AvroSchema({self._record_cls.__name__ if self._record_cls is not None else self._schema.get('name')})"
