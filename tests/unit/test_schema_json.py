"""Pulsar's admin JSON for schemas (magnetar.client.schema_json): type names as the
broker's, payloads refused with a clear error, KEY_VALUE both ways."""

from __future__ import annotations

import json
from typing import Any

import pytest

from magnetar.broker.schema.compatibility import SchemaType, validate
from magnetar.client.schema_json import (
    TYPE_NAMES,
    payload_to_proto,
    schema_from_json,
    schema_to_json,
)
from magnetar.common.errors import InvalidArgument, InvalidSchema
from magnetar.metadata.schemas import SchemaInfo
from magnetar.proto.v1 import broker_pb2 as pb


def test_type_names_are_the_brokers() -> None:
    assert {name: number for number, name in enumerate(TYPE_NAMES)} == {t.name: t.value for t in SchemaType}
    assert payload_to_proto({"type": "bytes"}).type == SchemaType.NONE
    assert payload_to_proto({"type": "avro", "schema": "{}"}).type == SchemaType.AVRO


@pytest.mark.parametrize("payload", [
    [], {"schema": ""}, {"type": 4}, {"type": "AVRO", "schema": {"type": "record"}}, {"type": "NOPE"},
    {"type": "STRING", "properties": {"a": 1}},
])
def test_a_malformed_payload_is_an_invalid_argument(payload: Any) -> None:
    with pytest.raises(InvalidArgument):
        payload_to_proto(payload)


def test_key_value_definition_is_stored_as_the_registry_reads_it_and_shown_back() -> None:
    value = {"type": "record", "name": "V", "fields": [{"name": "a", "type": "int"}]}
    props = {"key.schema.type": "STRING", "value.schema.type": "AVRO"}
    info = payload_to_proto({"type": "KEY_VALUE", "schema": json.dumps({"key": "", "value": value}), "properties": props})
    validate(SchemaInfo(info.type, bytes(info.data), dict(info.properties)))  # the registry parses it
    shown = schema_to_json(pb.TopicSchema(version=3, schema=info, timestamp_ms=5))
    assert (shown["type"], json.loads(shown["data"]), shown["version"], shown["timestamp"]) == (
        "KEY_VALUE", {"key": "", "value": value}, 3, 5)
    assert schema_from_json(shown) == pb.TopicSchema(version=3, schema=pb.SchemaInfo(
        type=info.type, data=info.data, properties=props), timestamp_ms=5)
    with pytest.raises(InvalidSchema):
        payload_to_proto({"type": "KEY_VALUE", "schema": "[]", "properties": props})
