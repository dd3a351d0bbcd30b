"""``GET /admin/v2/peek/{t}/{ns}/{topic}/subscription/{sub}`` (Magnetar's own): the first
``count`` messages a subscription has not acknowledged, as JSON, each with its payload
(base64) and, where the topic has a schema, the value decoded with the message's schema
version (:mod:`magnetar.gateway.schema_values`): what the web console's peek shows. Pulsar's
``.../subscription/{sub}/position/{n}`` answers one message's raw bytes; this answers many,
decoded, and nothing is acknowledged either way.

On a partitioned topic the partitions are read in order until ``count`` are found. A
stored chunk is one message here, as in Pulsar's peek (``chunk`` says which).
"""

from __future__ import annotations

import base64
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from magnetar.client.schema_json import type_name
from magnetar.common.errors import InvalidArgument, SchemaNotFound
from magnetar.common.names import TopicName
from magnetar.gateway.deps import Context, Topic
from magnetar.gateway.errors import responses
from magnetar.gateway.messages import message_headers
from magnetar.gateway.models import PulsarModel
from magnetar.gateway.schema_values import decode_value, schema_version_number
from magnetar.gateway.topic_stats import iso_time
from magnetar.gateway.topic_support import pulsar_reasons
from magnetar.proto.v1 import broker_pb2 as pb

router = APIRouter(prefix="/admin/v2/peek", tags=["persistent topic"])
MAX_COUNT = 100


class PeekedMessage(PulsarModel):
    messageId: str
    """As peek's ``X-Pulsar-Message-ID`` (``ledgerId:entryId``; of a batch, with partition and batch index)."""
    partition: int
    publishTime: str
    eventTime: str | None
    key: str | None
    producerName: str
    sequenceId: int
    properties: dict[str, str]
    payload: str
    """base64"""
    size: int
    schemaVersion: int | None
    schemaType: str | None
    """The schema's type when the message has a schema version (None: bytes)."""
    value: Any = None
    """The decoded value (JSON), when ``schemaType`` is one decoded here."""
    decodeError: str | None = None
    """Why the value is not given although the message has a schema."""
    chunk: str | None = None
    """``i/n`` for a stored chunk of a chunked message."""


async def _schemas(ctx: Context, topic: str) -> dict[int, pb.SchemaInfo]:
    """Every live version of the topic's schema (none: no schema)."""
    try:
        return {v.version: v.schema for v in await ctx.admin.all_schemas(topic)}
    except SchemaNotFound:
        return {}


def _peeked(m: pb.PeekMessageResponse, schemas: dict[int, pb.SchemaInfo]) -> PeekedMessage:
    msg = m.message
    version = schema_version_number(m.schema_version)
    info = schemas.get(version) if version is not None else None
    out = PeekedMessage(
        messageId=message_headers(m)["X-Pulsar-Message-ID"], partition=m.message_id.partition,
        publishTime=iso_time(m.publish_time_ms), eventTime=iso_time(msg.event_time_ms) or None,
        key=msg.partition_key if msg.has_partition_key or msg.partition_key else None,
        producerName=m.producer_name, sequenceId=msg.sequence_id, properties=dict(msg.properties),
        payload=base64.b64encode(msg.payload).decode(), size=len(msg.payload), schemaVersion=version,
        schemaType=type_name(info.type) if info is not None else None,
        chunk=f"{m.chunk_id + 1}/{m.num_chunks_from_msg}" if m.num_chunks_from_msg > 1 else None,
    )
    if version is not None and info is None:
        out.decodeError = f"schema version {version} is not a live version of the topic's schema"
    elif info is not None and m.num_chunks_from_msg > 1:
        out.decodeError = "a chunk holds part of its message: decode the whole message"
    elif info is not None and info.type != 0:
        try:
            out.value = decode_value(info, msg.payload)
        except InvalidArgument as exc:
            out.decodeError = exc.message
    return out


@router.get("/{tenant}/{namespace}/{topic}/subscription/{subName}",
            summary="Peek the first messages a subscription has not acknowledged, decoded with the topic's schema",
            operation_id="Magnetar_peekMessages", responses=responses(400, 404, 412))
async def peek_messages(
    topic: Topic, ctx: Context, subName: Annotated[str, Path(description="subscription name")],
    count: Annotated[int, Query(ge=1, le=MAX_COUNT)] = 10,
) -> list[PeekedMessage]:
    partitions = await ctx.admin.partitions(topic)
    names = [str(TopicName.parse(topic).partition(i)) for i in range(partitions)] if partitions else [topic]
    found: list[pb.PeekMessageResponse] = []
    with pulsar_reasons(topic, subName):
        for name in names:
            found += await ctx.admin.peek_messages(name, subName, 1, count - len(found))
            if len(found) >= count:
                break
        schemas = await _schemas(ctx, topic) if any(m.schema_version for m in found) else {}
    return [_peeked(m, schemas) for m in found]
