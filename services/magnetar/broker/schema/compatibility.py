"""Pulsar's schema compatibility strategies and the check each schema type gets.

A strategy says which versions a new schema is checked against and in which direction:
BACKWARD (the new schema reads data written with the old), FORWARD (the old reads data
written with the new), FULL (both); against the latest version only, or every version
since the last delete (the ``_TRANSITIVE`` forms). ALWAYS_COMPATIBLE checks nothing,
ALWAYS_INCOMPATIBLE refuses any change, UNDEFINED is "the broker's default" (resolved by
:func:`effective`).

Per type, as Pulsar's brokers check them: AVRO and JSON (a JSON schema is an Avro
definition) by Avro's resolution rules (:mod:`.avro`); PROTOBUF_NATIVE: the root message
must keep its name; KEY_VALUE: key and value parts, each by its own type's check (their
types must not change); every other type (STRING, INT32, PROTOBUF...) has nothing to
compare and is only refused by ALWAYS_INCOMPATIBLE. A schema of another type than the
existing one is incompatible under every strategy but ALWAYS_COMPATIBLE.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from collections.abc import Mapping, Sequence
from enum import Enum, IntEnum

from magnetar.broker.schema import avro
from magnetar.common.errors import InvalidArgument, InvalidSchema
from magnetar.metadata.schemas import SchemaInfo


class SchemaType(IntEnum):
    """Pulsar's schema types, by the names of its admin API and the numbers of its wire
    (``Schema.Type``; NONE is pulsar-client's bytes)."""

    NONE = 0
    STRING = 1
    JSON = 2
    PROTOBUF = 3
    AVRO = 4
    BOOLEAN = 5
    INT8 = 6
    INT16 = 7
    INT32 = 8
    INT64 = 9
    FLOAT = 10
    DOUBLE = 11
    DATE = 12
    TIME = 13
    TIMESTAMP = 14
    KEY_VALUE = 15
    INSTANT = 16
    LOCAL_DATE = 17
    LOCAL_TIME = 18
    LOCAL_DATE_TIME = 19
    PROTOBUF_NATIVE = 20

    @classmethod
    def parse(cls, value: str | int) -> SchemaType:
        """``value`` as a type: its admin name (``"AVRO"``; ``"BYTES"`` is NONE) or wire number.

        Raises:
            InvalidArgument: no such type.
        """
        try:
            if isinstance(value, str):
                return cls.NONE if value.upper() == "BYTES" else cls[value.upper()]
            return cls(value)
        except (KeyError, ValueError):
            raise InvalidArgument(f"unknown schema type {value!r}; one of {', '.join(t.name for t in cls)}") from None

    @staticmethod
    def name_of(value: int) -> str:
        try:
            return SchemaType(value).name
        except ValueError:
            return f"type {value}"


class SchemaCompatibilityStrategy(Enum):
    """Pulsar's SchemaCompatibilityStrategy."""

    UNDEFINED = "UNDEFINED"
    ALWAYS_INCOMPATIBLE = "ALWAYS_INCOMPATIBLE"
    ALWAYS_COMPATIBLE = "ALWAYS_COMPATIBLE"
    BACKWARD = "BACKWARD"
    FORWARD = "FORWARD"
    FULL = "FULL"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @classmethod
    def parse(cls, value: object) -> SchemaCompatibilityStrategy:
        """Raises: InvalidArgument: not one of Pulsar's names (case-insensitive)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                pass
        raise InvalidArgument(
            f"unknown schemaCompatibilityStrategy {value!r}; one of {', '.join(s.value for s in cls)}"
        )

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")


def effective(strategy: SchemaCompatibilityStrategy, default: SchemaCompatibilityStrategy) -> SchemaCompatibilityStrategy:
    """``strategy``, or ``default`` (the broker's ``schema_compatibility_strategy``) for
    UNDEFINED (and FULL when that is UNDEFINED too)."""
    if strategy is not SchemaCompatibilityStrategy.UNDEFINED:
        return strategy
    return default if default is not SchemaCompatibilityStrategy.UNDEFINED else SchemaCompatibilityStrategy.FULL


def validate(schema: SchemaInfo) -> None:
    """Check that ``schema``'s definition parses for its type (AVRO, JSON, PROTOBUF,
    PROTOBUF_NATIVE, KEY_VALUE; other types are not parsed).

    Raises:
        InvalidSchema: it does not parse, or the type is unknown.
    """
    try:
        kind = SchemaType(schema.type)
    except ValueError:
        raise InvalidSchema(f"unknown schema type {schema.type}") from None
    if kind in (SchemaType.AVRO, SchemaType.JSON, SchemaType.PROTOBUF):
        _avro(schema.data, kind)
    elif kind is SchemaType.PROTOBUF_NATIVE:
        _root_message(schema.data)
    elif kind is SchemaType.KEY_VALUE:
        for part in _key_value(schema):
            validate(part)


def same_schema(a: SchemaInfo, b: SchemaInfo) -> bool:
    """The same schema, as Pulsar's brokers find an existing version: the same type and
    definition; for AVRO, JSON and PROTOBUF the same Avro definition however written
    (spacing, key order), as parsed definitions compare."""
    if a.same_as(b):
        return True
    if a.type != b.type or a.type not in (SchemaType.AVRO, SchemaType.JSON, SchemaType.PROTOBUF):
        return False
    try:
        return bool(json.loads(a.data) == json.loads(b.data))
    except (ValueError, UnicodeDecodeError):
        return False


def incompatibility(existing: SchemaInfo, new: SchemaInfo, strategy: SchemaCompatibilityStrategy) -> str | None:
    """Why ``new`` may not follow ``existing`` under ``strategy`` (not UNDEFINED: resolve
    it with :func:`effective` first); None: it may. An identical schema always may."""
    S = SchemaCompatibilityStrategy
    if strategy is S.ALWAYS_COMPATIBLE:
        return None
    if existing.type != new.type:
        return f"the schema type changes from {SchemaType.name_of(existing.type)} to {SchemaType.name_of(new.type)}"
    if same_schema(existing, new):
        return None
    if strategy is S.ALWAYS_INCOMPATIBLE:
        return "the strategy is ALWAYS_INCOMPATIBLE: no schema may change"
    kind = SchemaType(new.type)
    if kind in (SchemaType.AVRO, SchemaType.JSON):
        old_def, new_def = _avro(existing.data, kind), _avro(new.data, kind)
        if strategy in (S.BACKWARD, S.BACKWARD_TRANSITIVE, S.FULL, S.FULL_TRANSITIVE):
            why = avro.incompatibility(new_def, old_def)
            if why is not None:
                return f"the new schema cannot read data written with the existing one: {why}"
        if strategy in (S.FORWARD, S.FORWARD_TRANSITIVE, S.FULL, S.FULL_TRANSITIVE):
            why = avro.incompatibility(old_def, new_def)
            if why is not None:
                return f"the existing schema cannot read data written with the new one: {why}"
        return None
    if kind is SchemaType.PROTOBUF_NATIVE:
        old_root, new_root = _root_message(existing.data), _root_message(new.data)
        if old_root != new_root:
            return f"the protobuf root message changes from {old_root} to {new_root}"
        return None
    if kind is SchemaType.KEY_VALUE:
        (old_key, old_value), (new_key, new_value) = _key_value(existing), _key_value(new)
        if old_key.type != new_key.type or old_value.type != new_value.type:
            return "the key or value schema changes its type"
        for part, old, now in (("key", old_key, new_key), ("value", old_value, new_value)):
            why = incompatibility(old, now, strategy)
            if why is not None:
                return f"{part}: {why}"
        return None
    return None  # nothing to compare for the other types


def first_incompatibility(
    history: Sequence[tuple[int, SchemaInfo]], new: SchemaInfo, strategy: SchemaCompatibilityStrategy,
    *, every: bool | None = None,
) -> tuple[int, str] | None:
    """Check ``new`` against ``history`` (live versions, oldest first): the latest one,
    or every one (newest first) for a ``_TRANSITIVE`` strategy or ``every``. The first
    version it fails against and why; None: compatible (also with no history)."""
    every = strategy.transitive if every is None else every
    targets = list(reversed(history)) if every else list(history[-1:])
    for version, existing in targets:
        why = incompatibility(existing, new, strategy)
        if why is not None:
            return version, why
    return None


# -- definitions -------------------------------------------------------------------------
def _avro(data: bytes, kind: SchemaType) -> object:
    try:
        return avro.parse(data)
    except avro.AvroSchemaError as exc:
        raise InvalidSchema(f"the {kind.name} schema does not parse as an Avro definition: {exc}") from None


def _root_message(data: bytes) -> str:
    """ProtobufNativeSchemaData's ``rootMessageTypeName`` (its descriptor set must parse)."""
    from google.protobuf import descriptor_pb2

    try:
        doc = json.loads(data)
        root, files = doc["rootMessageTypeName"], doc["fileDescriptorSet"]
        descriptors = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(files, validate=True))
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidSchema(f"the PROTOBUF_NATIVE schema does not parse: {exc!r}") from None
    if not isinstance(root, str) or not descriptors.file:
        raise InvalidSchema("the PROTOBUF_NATIVE schema names no root message or holds no file descriptor")
    return root


_LENGTH = struct.Struct(">i")


def _key_value(schema: SchemaInfo) -> tuple[SchemaInfo, SchemaInfo]:
    """The key and value schemas a KEY_VALUE schema holds: its data is the key's
    definition then the value's, each after a 4-byte big-endian length; the properties
    ``key.schema.type`` / ``value.schema.type`` (and ``*.schema.properties``, JSON) say
    their types."""
    data, parts = schema.data, []
    offset = 0
    try:
        for _ in range(2):
            (size,) = _LENGTH.unpack_from(data, offset)
            offset += 4
            size = max(size, 0)
            if offset + size > len(data):
                raise ValueError("a part runs past the end")
            parts.append(data[offset:offset + size])
            offset += size
    except (struct.error, ValueError) as exc:
        raise InvalidSchema(f"the KEY_VALUE schema's data is not a key and a value definition: {exc}") from None
    out = []
    for part, raw in zip(("key", "value"), parts, strict=True):
        try:
            kind = SchemaType.parse(schema.properties.get(f"{part}.schema.type", "BYTES"))
        except InvalidArgument as exc:
            raise InvalidSchema(f"the KEY_VALUE schema's {part}: {exc.message}") from None
        out.append(SchemaInfo(int(kind), raw, _properties(schema.properties.get(f"{part}.schema.properties"))))
    return out[0], out[1]


def _properties(text: str | None) -> Mapping[str, str]:
    if not text:
        return {}
    try:
        doc = json.loads(text)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in doc.items()} if isinstance(doc, dict) else {}
