"""magnetar.schema against pulsar-client's pulsar.schema: for the same Record class (built
once with each library's field types), the same declared definition and the same encoded
bytes, and each decodes what the other encoded."""

from __future__ import annotations

import enum
import json
import types
from typing import Any

import pulsar.schema as ps
import pytest
from google.protobuf import descriptor_pb2, timestamp_pb2

import magnetar.schema as ms
from magnetar.proto.v1 import broker_pb2


class Color(enum.Enum):
    RED = 1
    GREEN = 2


def records(lib: types.ModuleType) -> dict[str, Any]:
    """The same Record classes, made with ``lib``'s types (pulsar.schema or magnetar.schema)."""

    class Point(lib.Record):
        x = lib.Integer(required=True)
        y = lib.Double()

    class Everything(lib.Record):
        nothing = lib.Null()
        flag = lib.Boolean()
        small = lib.Integer()
        big = lib.Long(required=True)
        ratio = lib.Float(default=0.5, required_default=True)
        precise = lib.Double()
        raw = lib.Bytes()
        text = lib.String(default="none", required_default=True)
        tags = lib.Array(lib.String())
        counts = lib.Map(lib.Long())
        color = lib.CustomEnum(Color, default=Color.RED, required_default=True)
        shade = Color
        point = Point(required=True)
        maybe_point = Point()
        points = lib.Array(Point())
        named_points = lib.Map(Point())

    class Sorted(lib.Record):
        _sorted_fields = True
        _avro_namespace = "org.example"
        zeta = lib.String()
        alpha = lib.Integer()

    return {"Point": Point, "Everything": Everything, "Sorted": Sorted}


OURS, THEIRS = records(ms), records(ps)

VALUES: dict[str, Any] = {
    "nothing": None, "flag": True, "small": -7, "big": 2**40, "ratio": 1.25, "precise": 3.141592653589793,
    "raw": b"raw bytes", "text": "héllo", "tags": ["a", "b"], "counts": {"x": 1, "y": 2**33},
    "color": Color.GREEN, "shade": Color.RED, "point": {"x": 1, "y": 2.5}, "maybe_point": None,
    "points": [{"x": 3, "y": None}, {"x": 4, "y": 0.0}], "named_points": {"p": {"x": 5, "y": 1.0}},
}  # fmt: skip


@pytest.mark.parametrize("name", ["Point", "Everything", "Sorted"])
def test_a_record_defines_the_same_avro_schema(name: str) -> None:
    assert OURS[name].schema() == THEIRS[name].schema()
    assert json.dumps(OURS[name].schema()) == json.dumps(THEIRS[name].schema())  # key order too


@pytest.mark.parametrize("make", ["JsonSchema", "AvroSchema"])
@pytest.mark.parametrize("name", ["Point", "Everything", "Sorted"])
def test_json_and_avro_schemas_declare_the_same_definition(make: str, name: str) -> None:
    ours, theirs = getattr(ms, make)(OURS[name]).schema_info(), getattr(ps, make)(THEIRS[name]).schema_info()
    assert ours.schema() == theirs.schema()
    assert ours.name() == theirs.name()
    assert int(ours.schema_type()) == int(theirs.schema_type())


@pytest.mark.parametrize("make", ["BytesSchema", "StringSchema"])
def test_bytes_and_string_declare_what_pulsar_client_declares(make: str) -> None:
    ours, theirs = getattr(ms, make)().schema_info(), getattr(ps, make)().schema_info()
    assert (ours.schema(), ours.name(), int(ours.schema_type())) == (theirs.schema(), theirs.name(), int(theirs.schema_type()))


def test_protobuf_native_declares_what_pulsar_client_declares() -> None:
    for cls in (timestamp_pb2.Timestamp, broker_pb2.OpenProducer):  # the second imports another file
        ours, theirs = ms.ProtobufNativeSchema(cls).schema_info(), ps.ProtobufNativeSchema(cls).schema_info()
        assert (ours.schema(), ours.name(), int(ours.schema_type())) == (theirs.schema(), theirs.name(), int(theirs.schema_type()))
    files = descriptor_pb2.FileDescriptorSet.FromString(
        __import__("base64").b64decode(json.loads(ours.schema())["fileDescriptorSet"]))
    assert files.file[-1].name == broker_pb2.DESCRIPTOR.name and len(files.file) > 1


@pytest.mark.parametrize("make", ["JsonSchema", "AvroSchema"])
def test_each_field_type_encodes_to_the_same_bytes_and_decodes_both_ways(make: str) -> None:
    ours_schema, theirs_schema = getattr(ms, make)(OURS["Everything"]), getattr(ps, make)(THEIRS["Everything"])
    ours, theirs = OURS["Everything"](**VALUES), THEIRS["Everything"](**VALUES)
    data = ours_schema.encode(ours)
    assert data == theirs_schema.encode(theirs)
    back = ours_schema.decode(theirs_schema.encode(theirs))
    assert isinstance(back, OURS["Everything"])
    assert theirs_schema.decode(data).__dict__ == theirs_schema.decode(theirs_schema.encode(theirs)).__dict__
    assert back.__dict__ == ours_schema.decode(data).__dict__


def test_each_field_one_at_a_time_encodes_the_same() -> None:
    """Every field type alone (the rest left at their defaults), in both encodings."""
    for field, value in VALUES.items():
        if field in ("big", "point", "maybe_point"):
            continue
        kwargs = {"big": 1, "point": {"x": 0}, "maybe_point": None, field: value}  # records set, and this one
        for make in ("JsonSchema", "AvroSchema"):
            ours = getattr(ms, make)(OURS["Everything"]).encode(OURS["Everything"](**kwargs))
            theirs = getattr(ps, make)(THEIRS["Everything"]).encode(THEIRS["Everything"](**kwargs))
            assert ours == theirs, (field, make)


def test_defaults_and_validation_follow_pulsar_client() -> None:
    ours, theirs = OURS["Everything"](big=1), THEIRS["Everything"](big=1)
    assert {k: v for k, v in ours.__dict__.items()} == {k: v for k, v in theirs.__dict__.items()}
    assert OURS["Everything"](big=1, color="GREEN").color is Color.GREEN
    assert OURS["Everything"](big=1, color=2).color is Color.GREEN
    assert OURS["Everything"](big=1, raw="text").raw == b"text"
    assert OURS["Everything"](big=1, text=b"bytes").text == "bytes"
    for bad in ({"small": "7"}, {"tags": [1]}, {"counts": {1: 1}}, {"color": "BLUE"}, {"point": OURS["Everything"](big=1)}):
        with pytest.raises(TypeError):
            OURS["Everything"](big=1, **bad)
        with pytest.raises(TypeError):
            THEIRS["Everything"](big=1, **bad)
    with pytest.raises(AttributeError, match="undeclared field"):
        OURS["Point"](z=1).z = 1  # type: ignore[attr-defined]
    assert OURS["Point"](x=1, y=2.0) == OURS["Point"](x=1, y=2.0) and OURS["Point"](x=1) != OURS["Point"](x=2)


def test_string_bytes_and_protobuf_encode_the_same() -> None:
    assert ms.StringSchema().encode("héllo") == ps.StringSchema().encode("héllo")
    assert ms.StringSchema().decode("héllo".encode()) == "héllo"
    assert ms.BytesSchema().encode(b"\x00") == b"\x00"
    ts = timestamp_pb2.Timestamp(seconds=12, nanos=34)
    assert ms.ProtobufNativeSchema(timestamp_pb2.Timestamp).encode(ts) == ps.ProtobufNativeSchema(timestamp_pb2.Timestamp).encode(ts)
    assert ms.ProtobufNativeSchema(timestamp_pb2.Timestamp).decode(ts.SerializeToString()) == ts


def test_a_value_the_schema_cannot_encode_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="expected type"):
        ms.StringSchema().encode(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expected type"):
        ms.AvroSchema(OURS["Point"]).encode(OURS["Sorted"]())
    with pytest.raises(TypeError, match="expected type"):
        ms.ProtobufNativeSchema(timestamp_pb2.Timestamp).encode(b"x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dict"):
        ms.AvroSchema(None, OURS["Point"].schema()).encode([1])
    with pytest.raises(TypeError):
        ms.ProtobufNativeSchema(dict)  # type: ignore[arg-type]


def test_avro_with_a_dict_definition_encodes_dicts_as_pulsar_client() -> None:
    definition = OURS["Point"].schema()
    ours, theirs = ms.AvroSchema(None, definition), ps.AvroSchema(None, dict(definition))
    value = {"x": 3, "y": 1.5}
    assert ours.encode(value) == theirs.encode(value)
    assert ours.decode(ours.encode(value)) == value


def test_avro_decodes_with_the_writers_schema() -> None:
    """A message written with an older version (no ``y``), read with a newer one (``y``
    with a default) and with a renamed record: Avro's resolution, as pulsar-client's."""

    class Old(ms.Record):
        x = ms.Integer(required=True)

    class New(ms.Record):
        x = ms.Integer(required=True)
        y = ms.String(default="dflt", required_default=True)

    written = ms.AvroSchema(Old).encode(Old(x=9))
    reader = ms.AvroSchema(New)
    back = reader.decode_with(written, ms.AvroSchema(Old).schema_info())
    assert (back.x, back.y) == (9, "dflt")
    with pytest.raises(TypeError, match="STRING"):
        reader.decode_with(written, ms.StringSchema().schema_info())


def test_key_value_encodes_inline_as_javas() -> None:
    kv = ms.KeyValueSchema(ms.StringSchema(), ms.AvroSchema(OURS["Point"]))
    info = kv.schema_info()
    assert info.schema_type() == ms.SchemaType.KEY_VALUE and info.name() == "KeyValue"
    value_def = ms.AvroSchema(OURS["Point"]).schema_info().data
    assert info.data == b"\x00\x00\x00\x00" + len(value_def).to_bytes(4, "big") + value_def  # a string key: no definition
    assert info.properties() == {
        "kv.encoding.type": "INLINE", "key.schema.name": "STRING", "key.schema.type": "STRING",
        "key.schema.properties": "{}", "value.schema.name": "AVRO", "value.schema.type": "AVRO",
        "value.schema.properties": "{}",
    }  # fmt: skip
    data = kv.encode(("k", OURS["Point"](x=1, y=2.0)))
    point = ps.AvroSchema(THEIRS["Point"]).encode(THEIRS["Point"](x=1, y=2.0))
    assert data == b"\x00\x00\x00\x01k" + len(point).to_bytes(4, "big") + point
    back = kv.decode(data)
    assert back.key == "k" and back.value == OURS["Point"](x=1, y=2.0)
    assert kv.decode(kv.encode((None, None))) == (None, None)
    assert ms.KeyValueSchema(ms.BytesSchema(), ms.StringSchema()).schema_info().data == b"\x00" * 8
    for torn in (data[:-1], data + b"x", b"\x00\x00"):
        with pytest.raises(ValueError):
            kv.decode(torn)
    with pytest.raises(TypeError, match="pair"):
        kv.encode("k")
