"""Schemas at the gRPC door (a mixin of ``BrokerServicer``): the schema an OpenProducer or
a Subscribe declares, and GetSchema. Thin: :meth:`BrokerService.declare_schema` keeps or
checks a declaration (``IncompatibleSchema``: the stream is refused with
INCOMPATIBLE_SCHEMA), :meth:`BrokerService.topic_schema` answers GetSchema. As at the
Pulsar protocol door, a producer declaring no schema or type NONE (bytes) is refused on a
topic with a schema only while the namespace's ``schemaValidationEnforced`` is on (a
consumer's is not checked), and versions travel to producers as Pulsar's: 8 bytes,
big-endian.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import grpc

from magnetar.common.errors import NotFound
from magnetar.common.grpcutil import rpc_errors
from magnetar.common.names import TopicName
from magnetar.metadata.schemas import SchemaInfo
from magnetar.proto.v1 import broker_pb2 as pb

if TYPE_CHECKING:
    from magnetar.broker.service import BrokerService

_VERSION = struct.Struct(">q")


def declared(message: pb.OpenProducer | pb.Subscribe) -> SchemaInfo | None:
    """The schema an OpenProducer or Subscribe declares; None: none (unset, or NONE)."""
    if not message.HasField("schema") or message.schema.type == 0:
        return None
    s = message.schema
    return SchemaInfo(s.type, bytes(s.data), dict(s.properties))


async def declare(service: BrokerService, topic: str, message: pb.OpenProducer | pb.Subscribe, *, consumer: bool) -> bytes:
    """Keep or check the schema ``message`` declares for ``topic``; its version as
    Pulsar's 8 bytes (b"": it declares none).

    Raises:
        IncompatibleSchema: the topic's schema refuses this one.
    """
    info = declared(message)
    if info is None:
        if not consumer:  # schemaValidationEnforced may refuse a producer without one
            await service.declare_schema(topic, SchemaInfo(0), consumer=False)
        return b""
    stored = await service.declare_schema(topic, info, consumer=consumer)
    return _VERSION.pack(stored.version)


class SchemaRpcs:
    service: BrokerService

    @rpc_errors
    async def GetSchema(self, request: pb.GetSchemaRequest, context: grpc.aio.ServicerContext) -> pb.GetSchemaResponse:
        """A version of the topic's schema (the latest when none is asked); NOT_FOUND when
        the topic has none or not that version. Needs lookup on the topic, as Pulsar's
        (checked by the authorization interceptor, :mod:`.authorization`)."""
        topic = str(TopicName.parse(request.topic))
        version = request.version if request.HasField("version") else None
        stored = await self.service.topic_schema(topic, version)
        if stored is None:
            which = "a schema" if version is None else f"schema version {version}"
            raise NotFound(f"topic {topic} has no {which}")
        s = stored.schema
        return pb.GetSchemaResponse(
            schema=pb.SchemaInfo(type=s.type, data=s.data, properties=dict(s.properties), name=topic),
            version=stored.version,
        )
