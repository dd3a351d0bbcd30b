"""Schemas: pulsar-client's ``pulsar.schema`` names (``Record`` and its fields, Bytes,
String, JSON, Avro and ProtobufNative schemas) and a KeyValue schema; what the SDK's
producers encode values with and its consumers decode them with."""

from .avro import AvroSchema
from .definition import (
    Array,
    Boolean,
    Bytes,
    CustomEnum,
    Double,
    Field,
    Float,
    Integer,
    Long,
    Map,
    Null,
    Record,
    String,
)
from .keyvalue import KeyValue, KeyValueSchema
from .protobuf import ProtobufNativeSchema
from .schema import BytesSchema, JsonSchema, Schema, SchemaInfo, SchemaType, StringSchema

__all__ = [
    "Array", "AvroSchema", "Boolean", "Bytes", "BytesSchema", "CustomEnum", "Double", "Field", "Float",
    "Integer", "JsonSchema", "KeyValue", "KeyValueSchema", "Long", "Map", "Null", "ProtobufNativeSchema",
    "Record", "Schema", "SchemaInfo", "SchemaType", "String", "StringSchema",
]  # fmt: skip
