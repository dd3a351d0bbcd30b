"""``/admin/v2/schemas/{tenant}/{namespace}/{topic}``: a topic's schema registry (Pulsar's
SchemasResource) over the brokers' schema admin RPCs (docs/schemas.md).

The brokers decide who may: reading needs lookup (produce or consume) on the topic,
changing needs a tenant admin, as Pulsar's. Answers and codes are Pulsar's: 404 for no
schema (none, deleted, or no such version), 409 with the refusal for an incompatible
upload, 422 for a definition that does not parse (Pulsar's "Invalid schema data"), 400
for an unknown type or a malformed body.

Where Magnetar differs from Pulsar:

- ``force`` on DELETE is accepted; the history is kept either way (the versions before
  the delete stay readable by number), since it lives in ZooKeeper with its topic.
- A delete when there is no schema answers version -1 (Pulsar's answer when its
  registry returns none).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query
from fastapi.responses import JSONResponse
from pydantic import Field

from magnetar.client.schema_json import payload_to_proto, schema_to_json
from magnetar.gateway.deps import Context, Topic
from magnetar.gateway.errors import responses
from magnetar.gateway.models import PulsarModel
from magnetar.proto.v1 import broker_pb2 as pb

router = APIRouter(prefix="/admin/v2/schemas", tags=["schemas"])
Authoritative = Annotated[bool, Query(description="accepted and ignored: any broker answers")]


class PostSchemaPayload(PulsarModel):
    type: str = Field(description="Pulsar's schema type name: STRING, JSON, AVRO, PROTOBUF_NATIVE, KEY_VALUE …")
    schema_: str = Field("", alias="schema", description="the definition (AVRO/JSON: the Avro schema's JSON text)")
    properties: dict[str, str] = Field(default_factory=dict)

    def to_proto(self, topic: str) -> pb.SchemaInfo:
        return payload_to_proto(self.model_dump(by_alias=True), topic)


class GetSchemaResponse(PulsarModel):
    version: int
    type: str
    timestamp: int = Field(description="when it was registered, ms since the epoch")
    data: str = Field(description="the definition")
    properties: dict[str, str]


class GetAllVersionsSchemaResponse(PulsarModel):
    getSchemaResponses: list[GetSchemaResponse]


class LongSchemaVersion(PulsarModel):
    version: int


class PostSchemaResponse(PulsarModel):
    version: LongSchemaVersion


class LongSchemaVersionResponse(PulsarModel):
    version: int


class IsCompatibilityResponse(PulsarModel):
    compatibility: bool = Field(description="Pulsar's isCompatibility, as its JSON names it")
    schemaCompatibilityStrategy: str


Payload = Annotated[PostSchemaPayload, Body(description='{"type": "AVRO", "schema": "<definition>", "properties": {}}')]


@router.get("/{tenant}/{namespace}/{topic}/schema", summary="Get the topic's latest schema",
            operation_id="SchemasResource_getSchema", responses=responses(404, 412))
async def get_schema(topic: Topic, ctx: Context, authoritative: Authoritative = False) -> GetSchemaResponse:
    return GetSchemaResponse(**schema_to_json(await ctx.admin.schema(topic)))


@router.get("/{tenant}/{namespace}/{topic}/schema/{version}", summary="Get a version of the topic's schema",
            operation_id="SchemasResource_getSchema_1", responses=responses(400, 404, 412))
async def get_schema_version(
    topic: Topic, ctx: Context, version: Annotated[int, Path(ge=0, lt=2**63, description="the version")],
    authoritative: Authoritative = False,
) -> GetSchemaResponse:
    return GetSchemaResponse(**schema_to_json(await ctx.admin.schema(topic, version)))


@router.get("/{tenant}/{namespace}/{topic}/schemas", summary="Get every live version of the topic's schema",
            operation_id="SchemasResource_getAllSchemas", responses=responses(404, 412))
async def get_all_schemas(topic: Topic, ctx: Context, authoritative: Authoritative = False) -> GetAllVersionsSchemaResponse:
    versions = await ctx.admin.all_schemas(topic)
    return GetAllVersionsSchemaResponse(getSchemaResponses=[GetSchemaResponse(**schema_to_json(v)) for v in versions])


@router.delete("/{tenant}/{namespace}/{topic}/schema", summary="Delete the topic's schema (a version of its own)",
               operation_id="SchemasResource_deleteSchema", responses=responses(404, 412))
async def delete_schema(
    topic: Topic, ctx: Context, authoritative: Authoritative = False,
    force: Annotated[bool, Query(description="accepted; the history is kept either way")] = False,
) -> LongSchemaVersionResponse:
    version = await ctx.admin.delete_schema(topic)
    return LongSchemaVersionResponse(version=-1 if version is None else version)


@router.post("/{tenant}/{namespace}/{topic}/schema",
             summary="Upload a schema (the namespace's compatibility strategy applies)",
             operation_id="SchemasResource_postSchema", responses=responses(400, 404, 409, 412, 422))
async def post_schema(topic: Topic, ctx: Context, body: Payload, authoritative: Authoritative = False) -> PostSchemaResponse:
    version = await ctx.admin.post_schema(topic, body.to_proto(topic))
    return PostSchemaResponse(version=LongSchemaVersion(version=version))


@router.post("/{tenant}/{namespace}/{topic}/compatibility", status_code=202,
             summary="Test whether a schema would be registered (stores nothing)",
             operation_id="SchemasResource_testCompatibility", responses=responses(400, 404, 412, 422))
async def test_compatibility(topic: Topic, ctx: Context, body: Payload, authoritative: Authoritative = False) -> Any:
    answer = await ctx.admin.test_schema_compatibility(topic, body.to_proto(topic))
    doc = IsCompatibilityResponse(compatibility=answer.compatible, schemaCompatibilityStrategy=answer.strategy)
    return JSONResponse(doc.model_dump(), status_code=202)


@router.post("/{tenant}/{namespace}/{topic}/version", summary="The version of the live schema identical to this one",
             operation_id="SchemasResource_getVersionBySchema", responses=responses(400, 404, 412, 422))
async def get_version_by_schema(
    topic: Topic, ctx: Context, body: Payload, authoritative: Authoritative = False,
) -> LongSchemaVersionResponse:
    return LongSchemaVersionResponse(version=await ctx.admin.schema_version(topic, body.to_proto(topic)))

