"""Schema compatibility as Pulsar's brokers check it: each strategy, latest vs every
version (_TRANSITIVE), Avro's resolution rules (also for JSON schemas), PROTOBUF_NATIVE,
KEY_VALUE, a change of type, an identical schema, and definitions that do not parse."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import pytest

from magnetar.broker.schema import avro
from magnetar.broker.schema.compatibility import (
    SchemaCompatibilityStrategy,
    SchemaType,
    effective,
    first_incompatibility,
    incompatibility,
    validate,
)
from magnetar.common.errors import InvalidArgument, InvalidSchema
from magnetar.metadata.schemas import SchemaInfo

S = SchemaCompatibilityStrategy


def record(*fields: dict[str, Any], name: str = "User", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "acme", "fields": list(fields), **extra}


def field(name: str, kind: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, **extra}


def avro_schema(doc: Any, kind: SchemaType = SchemaType.AVRO) -> SchemaInfo:
    return SchemaInfo(int(kind), json.dumps(doc).encode())


def can_read(reader: Any, writer: Any) -> str | None:
    return avro.incompatibility(avro.parse(json.dumps(reader)), avro.parse(json.dumps(writer)))


V1 = record(field("name", "string"))
V2_DEFAULT = record(field("name", "string"), field("age", "int", default=0))
V2_NO_DEFAULT = record(field("name", "string"), field("age", "int"))


# -- Avro's resolution rules ----------------------------------------------------------------
@pytest.mark.parametrize(("writer", "reader"), [
    ("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"), ("long", "double"),
    ("float", "double"), ("string", "bytes"), ("bytes", "string"), ("null", "null"),
])  # fmt: skip
def test_promotions_read(writer: str, reader: str) -> None:
    assert can_read(reader, writer) is None


@pytest.mark.parametrize(("writer", "reader"), [
    ("long", "int"), ("double", "float"), ("float", "long"), ("string", "int"), ("boolean", "int"),
])  # fmt: skip
def test_narrowings_do_not_read(writer: str, reader: str) -> None:
    assert can_read(reader, writer) is not None


def test_a_field_added_with_a_default_reads_old_data_and_without_one_does_not() -> None:
    assert can_read(V2_DEFAULT, V1) is None
    why = can_read(V2_NO_DEFAULT, V1)
    assert why is not None and why.startswith("age:") and "no default" in why
    assert can_read(V1, V2_NO_DEFAULT) is None  # a field the reader lacks is skipped


def test_a_field_alias_reads_the_writers_old_name() -> None:
    renamed = record(field("full_name", "string", aliases=["name"]))
    assert can_read(renamed, V1) is None
    assert can_read(record(field("full_name", "string")), V1) is not None


def test_unions_enums_records_arrays_and_maps() -> None:
    optional = record(field("name", ["null", "string"], default=None))
    assert can_read(optional, V1) is None  # the reader's union has a branch for string
    why = can_read(V1, optional)  # the writer may have written null
    assert why is not None and "name" in why
    assert can_read(["null", "long"], ["null", "int"]) is None
    colour = {"type": "enum", "name": "Colour", "symbols": ["RED", "GREEN"]}
    more = {"type": "enum", "name": "Colour", "symbols": ["RED", "GREEN", "BLUE"]}
    assert can_read(more, colour) is None
    assert "BLUE" in (can_read(colour, more) or "")
    assert can_read({**colour, "default": "RED"}, more) is None
    assert "another name" in (can_read(record(field("x", "int"), name="Other"), record(field("x", "int"))) or "")
    assert can_read({"type": "array", "items": "long"}, {"type": "array", "items": "int"}) is None
    why = can_read({"type": "map", "values": "int"}, {"type": "map", "values": "string"})
    assert why is not None and "{}" in why
    nested_old = record(field("address", record(field("city", "string"), name="Address")))
    nested_new = record(field("address", record(field("city", "string"), field("zip", "string"), name="Address")))
    assert (can_read(nested_new, nested_old) or "").startswith("address.zip:")
    assert can_read({"type": "fixed", "name": "F", "size": 4}, {"type": "fixed", "name": "F", "size": 8}) is not None


def test_named_references_and_recursive_records_resolve() -> None:
    node = {"type": "record", "name": "Node", "fields": [
        {"name": "value", "type": "int"}, {"name": "next", "type": ["null", "Node"], "default": None},
    ]}  # fmt: skip
    assert can_read(node, node) is None
    with pytest.raises(avro.AvroSchemaError, match="unknown type"):
        avro.parse(json.dumps(record(field("x", "Missing"))))


# -- strategies -------------------------------------------------------------------------------
@pytest.mark.parametrize(("strategy", "new", "refused"), [
    (S.ALWAYS_COMPATIBLE, V2_NO_DEFAULT, False),
    (S.ALWAYS_INCOMPATIBLE, V2_DEFAULT, True),
    (S.BACKWARD, V2_DEFAULT, False),
    (S.BACKWARD, V2_NO_DEFAULT, True),   # the new reader has no default for age
    (S.FORWARD, V2_NO_DEFAULT, False),   # the old reader skips age
    (S.FORWARD, record(), True),         # the old reader needs name, the new writer drops it
    (S.FULL, V2_DEFAULT, False),
    (S.FULL, V2_NO_DEFAULT, True),
    (S.FULL, record(field("name", "int")), True),  # a type change
])  # fmt: skip
def test_each_strategy_checks_its_direction(strategy: S, new: dict[str, Any], refused: bool) -> None:
    why = incompatibility(avro_schema(V1), avro_schema(new), strategy)
    assert (why is not None) is refused, why


def test_json_schemas_are_checked_as_avro_definitions() -> None:
    old, new = avro_schema(V1, SchemaType.JSON), avro_schema(V2_NO_DEFAULT, SchemaType.JSON)
    assert "age" in (incompatibility(old, new, S.FULL) or "")
    assert incompatibility(old, avro_schema(V2_DEFAULT, SchemaType.JSON), S.FULL) is None


def test_transitive_strategies_check_every_version_the_others_only_the_latest() -> None:
    # v0: name; v1: name, age (default); v2: name, age without default. v2 reads v1's
    # data (it has age) but not v0's.
    history = [(0, avro_schema(V1)), (1, avro_schema(V2_DEFAULT))]
    new = avro_schema(V2_NO_DEFAULT)
    assert first_incompatibility(history, new, S.BACKWARD) is None
    found = first_incompatibility(history, new, S.BACKWARD_TRANSITIVE)
    assert found is not None and found[0] == 0 and "age" in found[1]
    assert first_incompatibility([], new, S.FULL_TRANSITIVE) is None


def test_an_identical_schema_passes_every_strategy_and_a_type_change_fails_all_but_always_compatible() -> None:
    schema = avro_schema(V1)
    for strategy in S:
        if strategy is not S.UNDEFINED:
            assert incompatibility(schema, avro_schema(V1), strategy) is None
    string = SchemaInfo(int(SchemaType.STRING))
    assert "from AVRO to STRING" in (incompatibility(schema, string, S.BACKWARD) or "")
    assert incompatibility(schema, string, S.ALWAYS_COMPATIBLE) is None


def test_types_without_a_definition_are_refused_only_by_always_incompatible() -> None:
    a, b = SchemaInfo(int(SchemaType.STRING), b"", {"x": "1"}), SchemaInfo(int(SchemaType.STRING), b"other")
    assert incompatibility(a, b, S.FULL_TRANSITIVE) is None
    assert incompatibility(a, b, S.ALWAYS_INCOMPATIBLE) is not None


def _native(root: str) -> SchemaInfo:
    from google.protobuf import descriptor_pb2

    files = descriptor_pb2.FileDescriptorSet(file=[descriptor_pb2.FileDescriptorProto(name="a.proto", package="acme")])
    doc = {"fileDescriptorSet": base64.b64encode(files.SerializeToString()).decode(),
           "rootMessageTypeName": root, "rootFileDescriptorName": "a.proto"}
    return SchemaInfo(int(SchemaType.PROTOBUF_NATIVE), json.dumps(doc).encode())


def test_protobuf_native_keeps_its_root_message() -> None:
    old = _native("acme.User")
    assert incompatibility(old, _native("acme.User") , S.FULL) is None
    assert "acme.Order" in (incompatibility(old, _native("acme.Order"), S.BACKWARD) or "")
    with pytest.raises(InvalidSchema, match="PROTOBUF_NATIVE"):
        validate(SchemaInfo(int(SchemaType.PROTOBUF_NATIVE), b"{}"))


def _key_value(key: SchemaInfo, value: SchemaInfo) -> SchemaInfo:
    data = struct.pack(">i", len(key.data)) + key.data + struct.pack(">i", len(value.data)) + value.data
    props = {"key.schema.type": SchemaType(key.type).name, "value.schema.type": SchemaType(value.type).name,
             "kv.encoding.type": "INLINE"}
    return SchemaInfo(int(SchemaType.KEY_VALUE), data, props)


def test_key_value_checks_its_key_and_value_each_by_its_type() -> None:
    string = SchemaInfo(int(SchemaType.STRING))
    old = _key_value(string, avro_schema(V1))
    assert incompatibility(old, _key_value(string, avro_schema(V2_DEFAULT)), S.FULL) is None
    why = incompatibility(old, _key_value(string, avro_schema(V2_NO_DEFAULT)), S.FULL)
    assert why is not None and why.startswith("value:") and "age" in why
    assert "type" in (incompatibility(old, _key_value(SchemaInfo(int(SchemaType.INT32)), avro_schema(V1)), S.FULL) or "")
    with pytest.raises(InvalidSchema, match="KEY_VALUE"):
        validate(SchemaInfo(int(SchemaType.KEY_VALUE), b"\x00\x00\x00\x09ab"))
    unknown = _key_value(string, string)
    with pytest.raises(InvalidSchema, match="KEY_VALUE schema's key: unknown schema type 'WHAT'"):
        validate(SchemaInfo(unknown.type, unknown.data, {**unknown.properties, "key.schema.type": "WHAT"}))


def test_definitions_that_do_not_parse_are_refused_clearly() -> None:
    with pytest.raises(InvalidSchema, match="not JSON"):
        validate(SchemaInfo(int(SchemaType.AVRO), b"{not json"))
    with pytest.raises(InvalidSchema, match="no list of fields"):
        validate(avro_schema({"type": "record", "name": "X"}))
    with pytest.raises(InvalidSchema, match="unknown schema type"):
        validate(SchemaInfo(99))
    validate(avro_schema(V2_DEFAULT))  # parses


def test_strategy_names_and_the_undefined_fallback() -> None:
    assert S.parse("backward_transitive") is S.BACKWARD_TRANSITIVE
    with pytest.raises(InvalidArgument, match="unknown schemaCompatibilityStrategy 'SIDEWAYS'"):
        S.parse("SIDEWAYS")
    assert effective(S.UNDEFINED, S.FORWARD) is S.FORWARD
    assert effective(S.UNDEFINED, S.UNDEFINED) is S.FULL
    assert effective(S.BACKWARD, S.FORWARD) is S.BACKWARD
    assert SchemaType.parse("BYTES") is SchemaType.NONE and SchemaType.parse("avro") is SchemaType.AVRO


def test_an_avro_definition_written_otherwise_is_the_same_schema() -> None:
    from magnetar.broker.schema.compatibility import same_schema

    spaced = SchemaInfo(int(SchemaType.AVRO), json.dumps(V1, indent=2, sort_keys=True).encode())
    assert same_schema(avro_schema(V1), spaced)
    assert incompatibility(avro_schema(V1), spaced, S.ALWAYS_INCOMPATIBLE) is None
    assert not same_schema(avro_schema(V1), avro_schema(V2_DEFAULT))
    assert not same_schema(SchemaInfo(int(SchemaType.STRING), b"{}"), SchemaInfo(int(SchemaType.STRING), b"{ }"))
