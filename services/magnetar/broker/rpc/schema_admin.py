"""The broker's schema registry admin RPCs (a mixin of ``BrokerServicer``): wire ↔
the admin operations of :class:`BrokerService` (docs/schemas.md). Pulsar's
``/admin/v2/schemas`` (the gateway) and ``magnetar admin schemas`` build on these."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from magnetar.common.errors import InvalidArgument
from magnetar.common.grpcutil import rpc_errors
from magnetar.metadata.schemas import SchemaInfo, StoredSchema
from magnetar.proto.v1 import broker_pb2 as pb

if TYPE_CHECKING:
    from magnetar.broker.service import BrokerService


def schema_from_proto(p: pb.SchemaInfo) -> SchemaInfo:
    return SchemaInfo(p.type, bytes(p.data), dict(p.properties))


def schema_to_proto(stored: StoredSchema, topic: str) -> pb.TopicSchema:
    s = stored.schema
    info = pb.SchemaInfo(type=s.type, data=s.data, properties=dict(s.properties), name=topic)
    return pb.TopicSchema(version=stored.version, schema=info, timestamp_ms=stored.timestamp_ms)


def _given(request: pb.TopicSchemaRequest) -> SchemaInfo:
    if not request.HasField("schema"):
        raise InvalidArgument("give the schema")
    return schema_from_proto(request.schema)


class SchemaAdminRpcs:
    service: BrokerService

    @rpc_errors
    async def GetTopicSchema(self, request: pb.GetTopicSchemaRequest, context: grpc.aio.ServicerContext) -> pb.TopicSchema:
        version = request.version if request.HasField("version") else None
        return schema_to_proto(await self.service.get_schema(request.topic, version), request.topic)

    @rpc_errors
    async def GetAllTopicSchemas(self, request: pb.GetAllTopicSchemasRequest, context: grpc.aio.ServicerContext) -> pb.TopicSchemas:
        versions = await self.service.get_all_schemas(request.topic)
        return pb.TopicSchemas(versions=[schema_to_proto(s, request.topic) for s in versions])

    @rpc_errors
    async def PostTopicSchema(self, request: pb.TopicSchemaRequest, context: grpc.aio.ServicerContext) -> pb.SchemaVersion:
        return pb.SchemaVersion(version=(await self.service.post_schema(request.topic, _given(request))).version)

    @rpc_errors
    async def DeleteTopicSchema(self, request: pb.DeleteTopicSchemaRequest, context: grpc.aio.ServicerContext) -> pb.SchemaVersion:
        version = await self.service.delete_schema(request.topic)
        return pb.SchemaVersion() if version is None else pb.SchemaVersion(version=version)

    @rpc_errors
    async def TestSchemaCompatibility(
        self, request: pb.TopicSchemaRequest, context: grpc.aio.ServicerContext,
    ) -> pb.SchemaCompatibility:
        answer = await self.service.test_schema_compatibility(request.topic, _given(request))
        return pb.SchemaCompatibility(compatible=answer.compatible, strategy=answer.strategy.value, reason=answer.reason)

    @rpc_errors
    async def GetSchemaVersion(self, request: pb.TopicSchemaRequest, context: grpc.aio.ServicerContext) -> pb.SchemaVersion:
        return pb.SchemaVersion(version=await self.service.schema_version_of(request.topic, _given(request)))
