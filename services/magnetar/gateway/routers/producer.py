"""Pulsar's REST producer (PIP-64, TopicsBase): ``POST /topics/persistent/{t}/{ns}/{topic}``
publishes the body's messages and answers each one's message id or error, in order.

Each call opens an unbatched SDK producer with the caller's token (with authentication
on, the role needs produce on the namespace), sends every message, waits for each one's
outcome and closes the producer.

Without a schema payloads are base64 bytes (Pulsar's REST producer reads them as STRING
text then; Magnetar keeps bytes, as before it took schemas). With ``valueSchema`` (a JSON
SchemaInfo, its definition base64) or ``schemaVersion`` (a version of the topic's
registry) the producer declares that schema, registered as any producer's would be
(the compatibility strategy and ``isAllowAutoUpdateSchema`` apply: an incompatible one is
409), and each payload is text encoded with it (:mod:`magnetar.gateway.rest_schemas`).
Every payload is encoded before anything is sent: one that does not encode refuses the
whole request (400), nothing stored. ``keySchema`` (KEY_VALUE) is refused.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Body
from pydantic import Field

from magnetar.client.producer import Producer
from magnetar.common.errors import InvalidArgument, MagnetarError
from magnetar.common.message_id import MessageId
from magnetar.gateway.deps import Context, Topic
from magnetar.gateway.errors import responses
from magnetar.gateway.models import PulsarModel
from magnetar.gateway.rest_schemas import RestSchema, value_schema
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.schema import BytesSchema, Schema

router = APIRouter(prefix="/topics/persistent", tags=["producer"])
MAX_MESSAGES = 10_000
RETRIABLE, NOT_RETRIABLE = 1, 2
"""Pulsar's errorCode of a message that failed: it may succeed if sent again, or not."""


class ProducerMessage(PulsarModel):
    payload: str = Field(description="the payload: base64 without a schema, else the value as text")
    key: str | None = None
    properties: dict[str, str] = Field(default_factory=dict)
    sequenceId: int | None = Field(default=None, ge=0, le=2**63 - 1)
    deliverAt: int | None = Field(default=None, le=2**63 - 1, description="epoch ms (applied when > 0)")
    deliverAfterMs: int | None = Field(default=None, le=2**53, description="ms (applied when > 0)")


class ProducerMessages(PulsarModel):
    producerName: str | None = None
    messages: list[ProducerMessage] = Field(max_length=MAX_MESSAGES)
    valueSchema: str | None = Field(default=None, description='a JSON SchemaInfo {"name", "schema": <base64>, "type", "properties"}')
    keySchema: str | None = Field(default=None, description="refused: KEY_VALUE schemas are not supported here")
    schemaVersion: int = Field(default=-1, ge=-1, le=2**63 - 1, description="a registered version to produce with (-1: none)")


class MessagePublishResult(PulsarModel):
    messageId: str | None = None
    """``ledgerId:entryId:partitionIndex`` (``:batchIndex`` too when batched)."""
    errorCode: int = 0
    """0: stored; 1: failed, may succeed if sent again; 2: failed."""
    errorMsg: str | None = None
    schemaVersion: int = 0


class ProducerAcks(PulsarModel):
    messagePublishResults: list[MessagePublishResult]
    schemaVersion: int = 0


def _payload(text: str, index: int) -> bytes:
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgument(f"messages[{index}].payload is not base64") from None


def _message_id(mid: MessageId) -> str:
    text = f"{mid.ledger_id()}:{mid.entry_id()}:{mid.partition()}"
    return f"{text}:{mid.batch_index()}" if mid.batch_index() >= 0 else text


def _result(outcome: MessageId | BaseException) -> MessagePublishResult:
    if isinstance(outcome, MessageId):
        return MessagePublishResult(messageId=_message_id(outcome))
    retriable = isinstance(outcome, MagnetarError) and outcome.retriable
    message = outcome.message if isinstance(outcome, MagnetarError) else repr(outcome)
    return MessagePublishResult(errorCode=RETRIABLE if retriable else NOT_RETRIABLE, errorMsg=message)


@router.post("/{tenant}/{namespace}/{topic}", summary="Produce messages to a topic",
             operation_id="Topics_produceOnPersistentTopic", responses=responses(400, 404, 409, 412, 422))
async def produce(topic: Topic, ctx: Context, body: Annotated[ProducerMessages, Body()]) -> ProducerAcks:
    schema = await _schema(ctx, topic, body)
    if schema is None:
        values: list[bytes | str] = [_payload(m.payload, i) for i, m in enumerate(body.messages)]
    else:
        for i, m in enumerate(body.messages):  # all checked first: a bad one refuses the request, nothing sent
            try:
                schema.encode(m.payload)
            except InvalidArgument as exc:
                raise InvalidArgument(f"messages[{i}].payload: {exc.message}") from None
        values = [m.payload for m in body.messages]
    async with ctx.caller_client() as client:
        producer = await client.create_producer(topic, producer_name=body.producerName, batching_enabled=False,
                                                max_pending_messages=max(1, len(values)),
                                                schema=schema or BytesSchema())
        try:
            version = 0 if schema is None else await _version(ctx, topic, body, schema)
            sends = _send_all(producer, values, body.messages)
            outcomes = await asyncio.gather(*sends, return_exceptions=True)
        finally:
            await producer.close()
    results = [_result(o) for o in outcomes]
    for r in results:
        r.schemaVersion = version if r.messageId else 0
    return ProducerAcks(messagePublishResults=results, schemaVersion=version)


async def _schema(ctx: Context, topic: str, body: ProducerMessages) -> RestSchema | None:
    """The schema the request produces with (None: bytes).

    Raises:
        InvalidArgument: a keySchema, a valueSchema that does not parse, a type the REST
            producer does not encode. SchemaNotFound: no such schemaVersion.
    """
    if body.keySchema:
        raise InvalidArgument("keySchema (a KEY_VALUE schema) is not supported by the REST producer; "
                              "produce key/value messages with the SDK or pulsar-client")
    if body.schemaVersion >= 0:
        info = (await ctx.admin.schema(topic, body.schemaVersion)).schema
    elif body.valueSchema:
        info = value_schema(body.valueSchema, topic)
    else:
        return None
    return None if info.type == 0 else RestSchema(info)


async def _version(ctx: Context, topic: str, body: ProducerMessages, schema: Schema) -> int:
    """The registry's version of the schema the producer declared."""
    if body.schemaVersion >= 0:
        return body.schemaVersion
    info = schema.schema_info()
    declared = pb.SchemaInfo(type=int(info.schema_type()), data=info.data, properties=info.properties())
    return await ctx.admin.schema_version(topic, declared)


def _send_all(
    producer: Producer, payloads: list[bytes | str], messages: list[ProducerMessage],
) -> list[asyncio.Future[MessageId]]:
    """Raises: InvalidArgument: a message the producer refuses at once (nothing is sent after it)."""
    try:
        return [
            producer.send_async(
                payload,  # with a RestSchema, the payload text it encodes
                None, properties=m.properties, partition_key=m.key, sequence_id=m.sequenceId,
                deliver_at=m.deliverAt if m.deliverAt and m.deliverAt > 0 else None,
                deliver_after=timedelta(milliseconds=m.deliverAfterMs) if m.deliverAfterMs and m.deliverAfterMs > 0
                else None,
            )
            for payload, m in zip(payloads, messages, strict=True)
        ]
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidArgument(f"a message cannot be sent: {exc}") from None
