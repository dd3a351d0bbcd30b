"""Schemas at the Pulsar protocol door: the schema a PRODUCER or SUBSCRIBE declares,
GET_SCHEMA and GET_OR_CREATE_SCHEMA.

Each goes to the topic's schema registry (:meth:`BrokerService.declare_schema`,
docs/schemas.md): a producer's schema gets the version identical to it or is registered
as the next one when the namespace's compatibility strategy and
``isAllowAutoUpdateSchema`` allow, else it is refused with ``IncompatibleSchema``; a
consumer's is checked (registered when the topic has none and is idle). A producer
without a schema or of type NONE (pulsar-client's bytes, which sends none) is refused on
a topic with a schema only while ``schemaValidationEnforced``. The version travels as
Pulsar's: 8 bytes, big-endian. Messages carry the version their producer got in their
metadata, stored as sent.
"""

from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING, Protocol

from magnetar.broker.authorization import Action, Request
from magnetar.broker.protocol.errors import server_error
from magnetar.common.errors import MagnetarError, TopicNotFound
from magnetar.metadata.schemas import SchemaInfo, StoredSchema
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol import commands

if TYPE_CHECKING:
    from magnetar.broker.authorizer import Authorizer
    from magnetar.broker.service import BrokerService
    from magnetar.protocol.frames import Frame

log = logging.getLogger(__name__)

Type = pb.BaseCommand.Type
_VERSION = struct.Struct(">q")


class SchemaConnection(Protocol):
    service: BrokerService
    role: str | None

    @property
    def authorizer(self) -> Authorizer | None: ...

    def write(self, command: pb.BaseCommand) -> None: ...

    def topic_name(self, value: str | bytes) -> str: ...


def version_bytes(version: int) -> bytes:
    return _VERSION.pack(version)


def declared(schema: pb.Schema) -> SchemaInfo | None:
    """The schema a command declares; None for none (no field, or type NONE: bytes)."""
    if schema.type == pb.Schema.NONE:
        return None
    return SchemaInfo(int(schema.type), bytes(schema.schema_data), {kv.key: kv.value for kv in schema.properties})


async def declare(
    service: BrokerService, topic: str, schema: pb.Schema | None, *, consumer: bool = False,
) -> bytes | None:
    """Register or check the schema a PRODUCER (or, ``consumer``, a SUBSCRIBE) declares;
    its version's bytes (None: the command declares none).

    Raises:
        IncompatibleSchema: the registry refuses it (or, ``schemaValidationEnforced``,
            a producer without one). InvalidSchema: it does not parse.
    """
    info = declared(schema) if schema is not None else None
    if info is None:
        if not consumer:
            await service.declare_schema(topic, SchemaInfo(pb.Schema.NONE), consumer=False)
        return None
    return version_bytes((await service.declare_schema(topic, info, consumer=consumer)).version)


def _wire(stored: StoredSchema, topic: str) -> pb.Schema:
    s = stored.schema
    out = pb.Schema(name=topic, schema_data=s.data, type=s.type)  # type: ignore[arg-type]
    out.properties.extend(pb.KeyValue(key=k, value=v) for k, v in sorted(s.properties.items()))
    return out


async def get_schema(conn: SchemaConnection, frame: Frame) -> None:
    """GET_SCHEMA: the topic's latest schema, or the version asked for (any registered
    one); error_code TopicNotFound (Pulsar's answer) for none, a deleted one or no such
    version."""
    request = frame.command.getSchema
    answer = pb.CommandGetSchemaResponse(request_id=request.request_id)
    try:
        topic = conn.topic_name(request.topic)
        if conn.authorizer is not None:
            await conn.authorizer.check(conn.role, Request(Action.LOOKUP, topic))
        version = None
        if request.HasField("schema_version") and request.schema_version:
            if len(request.schema_version) != _VERSION.size:
                raise TopicNotFound(f"topic {topic} has no schema version {request.schema_version.hex()} (not 8 bytes)")
            (version,) = _VERSION.unpack(request.schema_version)
        stored = await conn.service.topic_schema(topic, version)
        if stored is None:
            raise TopicNotFound(f"topic {topic} has no schema" + ("" if version is None else f" version {version}"))
        answer.schema.CopyFrom(_wire(stored, topic))
        answer.schema_version = version_bytes(stored.version)
    except MagnetarError as exc:
        answer.error_code, answer.error_message = server_error(exc), commands.error_text(exc.message)
    except Exception as exc:
        log.exception("GET_SCHEMA of %r failed", request.topic)
        answer.error_code, answer.error_message = pb.UnknownError, f"internal error: {exc!r}"
    conn.write(pb.BaseCommand(type=Type.GET_SCHEMA_RESPONSE, getSchemaResponse=answer))


async def get_or_create_schema(conn: SchemaConnection, frame: Frame) -> None:
    """GET_OR_CREATE_SCHEMA: the version of the schema given, registered as a producer's
    would be, or error_code IncompatibleSchema. Needs produce on the topic."""
    request = frame.command.getOrCreateSchema
    answer = pb.CommandGetOrCreateSchemaResponse(request_id=request.request_id)
    try:
        topic = conn.topic_name(request.topic)
        if conn.authorizer is not None:
            await conn.authorizer.check(conn.role, Request(Action.PRODUCE, topic))
        version = await declare(conn.service, topic, request.schema)
        answer.schema_version = version if version is not None else b""
    except MagnetarError as exc:
        answer.error_code, answer.error_message = server_error(exc), commands.error_text(exc.message)
    except Exception as exc:
        log.exception("GET_OR_CREATE_SCHEMA of %r failed", request.topic)
        answer.error_code, answer.error_message = pb.UnknownError, f"internal error: {exc!r}"
    conn.write(pb.BaseCommand(type=Type.GET_OR_CREATE_SCHEMA_RESPONSE, getOrCreateSchemaResponse=answer))
