"""The schema registry's admin RPCs (GetTopicSchema, GetAllTopicSchemas,
PostTopicSchema, DeleteTopicSchema, TestSchemaCompatibility, GetSchemaVersion) and the
schema namespace policies over gRPC, on the run's shared cluster."""

from __future__ import annotations

import json

import pytest

from magnetar.client.admin import AdminClient
from magnetar.common.errors import (
    IncompatibleSchema,
    InvalidArgument,
    InvalidSchema,
    SchemaNotFound,
)
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.testing.namespaces import new_namespace

pytestmark = pytest.mark.integration

AVRO = 4


def _avro(*fields: dict) -> pb.SchemaInfo:
    doc = {"type": "record", "name": "Order", "namespace": "acme", "fields": list(fields)}
    return pb.SchemaInfo(type=AVRO, data=json.dumps(doc).encode())


V0 = _avro({"name": "item", "type": "string"})
V1 = _avro({"name": "item", "type": "string"}, {"name": "count", "type": "int", "default": 0})
NO_DEFAULT = _avro({"name": "item", "type": "string"}, {"name": "count", "type": "int"})


async def test_upload_get_versions_test_and_delete_as_pulsars_schema_admin(shared_cluster) -> None:  # type: ignore[no-untyped-def]
    ns = await new_namespace(shared_cluster.broker.address, "schemadmin")
    topic = f"persistent://{ns}/orders"
    async with AdminClient(shared_cluster.broker.address, 10) as admin:

        async def call(method: str, request: object) -> object:
            return await admin.call(lambda s: getattr(s, method)(request, timeout=10))

        def req(schema: pb.SchemaInfo) -> pb.TopicSchemaRequest:
            return pb.TopicSchemaRequest(topic=topic, schema=schema)

        with pytest.raises(SchemaNotFound):
            await call("GetTopicSchema", pb.GetTopicSchemaRequest(topic=topic))
        assert (await call("PostTopicSchema", req(V0))).version == 0
        answer = await call("TestSchemaCompatibility", req(NO_DEFAULT))
        assert (answer.compatible, answer.strategy) == (False, "FULL") and "count" in answer.reason
        with pytest.raises(IncompatibleSchema, match="count"):
            await call("PostTopicSchema", req(NO_DEFAULT))
        with pytest.raises(InvalidSchema):
            await call("PostTopicSchema", req(pb.SchemaInfo(type=AVRO, data=b"{nope")))
        assert (await call("PostTopicSchema", req(V1))).version == 1  # FULL (the broker's default) allows it
        # NO_DEFAULT and V1 read each other's data: FULL checks the latest only,
        # FULL_TRANSITIVE version 0 too.
        assert (await call("TestSchemaCompatibility", req(NO_DEFAULT))).compatible
        await admin.set_namespace_policy(ns, schema_compatibility_strategy="full_transitive")
        answer = await call("TestSchemaCompatibility", req(NO_DEFAULT))
        assert (answer.compatible, answer.strategy) == (False, "FULL_TRANSITIVE") and "version 0" in answer.reason
        with pytest.raises(InvalidArgument, match="SIDEWAYS"):
            await admin.set_namespace_policy(ns, schema_compatibility_strategy="SIDEWAYS")
        assert (await admin.namespace_policies(ns)).schema_compatibility_strategy == "FULL_TRANSITIVE"

        latest = await call("GetTopicSchema", pb.GetTopicSchemaRequest(topic=f"{topic}-partition-0"))
        assert (latest.version, latest.schema.data, latest.timestamp_ms > 0) == (1, V1.data, True)
        first = await call("GetTopicSchema", pb.GetTopicSchemaRequest(topic=topic, version=0))
        assert first.schema.data == V0.data
        every = await call("GetAllTopicSchemas", pb.GetAllTopicSchemasRequest(topic=topic))
        assert [(v.version, v.schema.data) for v in every.versions] == [(0, V0.data), (1, V1.data)]
        assert (await call("GetSchemaVersion", req(V0))).version == 0

        deleted = await call("DeleteTopicSchema", pb.DeleteTopicSchemaRequest(topic=topic))
        assert deleted.version == 2
        assert not (await call("DeleteTopicSchema", pb.DeleteTopicSchemaRequest(topic=topic))).HasField("version")
        with pytest.raises(SchemaNotFound):
            await call("GetTopicSchema", pb.GetTopicSchemaRequest(topic=topic))
        assert list((await call("GetAllTopicSchemas", pb.GetAllTopicSchemasRequest(topic=topic))).versions) == []
        # After a delete the next upload starts again unchecked, numbered on.
        assert (await call("PostTopicSchema", req(_avro({"name": "other", "type": "long"})))).version == 3
