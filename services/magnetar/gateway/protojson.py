"""Protobuf messages as JSON the way REST users expect: camelCase names (the fields'
``json_name``), every field present, 64-bit integers as numbers (protobuf's own JSON
mapping writes them as strings), enums by name."""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message


def to_json(message: Message) -> dict[str, Any]:
    return {f.json_name: _value(f, getattr(message, f.name)) for f in message.DESCRIPTOR.fields}


def _value(field: FieldDescriptor, value: Any) -> Any:
    if field.is_repeated:
        return [_one(field, v) for v in value]
    return _one(field, value)


def _one(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return to_json(value)
    if field.type == FieldDescriptor.TYPE_ENUM:
        return field.enum_type.values_by_number[value].name if value in field.enum_type.values_by_number else value
    return value
