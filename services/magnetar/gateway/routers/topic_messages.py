"""Finding and expiring a topic's messages: ``GET .../{topic}/messageid/{timestamp}``
(the first message published at or after a time), ``GET
.../{topic}/ledger/{ledgerId}/entry/{entryId}`` (one message by id, answered as peek and
examine answer: see :mod:`magnetar.gateway.messages`) and ``POST
.../{topic}/all_subscription/expireMessages/{expireTimeInSeconds}`` (expiry on every
subscription), as Pulsar's PersistentTopics ``getMessageIdByTimestamp``,
``getMessageById`` and ``expireMessagesForAllSubscriptions``.

Where Magnetar differs from Pulsar: a message of a batch is answered alone (the first
message of the entry, with its batch index in ``X-Pulsar-Message-ID``), as peek does.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from magnetar.common.errors import NoSuchEntry, NotFound
from magnetar.gateway.deps import Context, Topic
from magnetar.gateway.errors import HttpError, responses
from magnetar.gateway.messages import MESSAGE_RESPONSE, message_response
from magnetar.gateway.topic_models import MessageIdData
from magnetar.gateway.topic_support import pulsar_reasons, refuse_partitioned

router = APIRouter(prefix="/admin/v2/persistent", tags=["persistent topic"])
INT64_MAX = 2**63 - 1


@router.get("/{tenant}/{namespace}/{topic}/messageid/{timestamp}",
            summary="Get the id of the first message published at or after a time (ms since the epoch)",
            operation_id="PersistentTopics_getMessageIdByTimestamp", responses=responses(400, 404, 405, 412))
async def get_message_id_by_timestamp(
    topic: Topic, ctx: Context, timestamp: Annotated[int, Path(ge=0, le=INT64_MAX, description="ms since the epoch")],
) -> MessageIdData:
    await refuse_partitioned(
        ctx, topic, 405,
        "Get message ID by timestamp on a partitioned topic is not allowed, please try get message ID by timestamp on a partition",
    )
    try:
        with pulsar_reasons(topic):
            mid = await ctx.admin.message_id_by_timestamp(topic, timestamp)
    except NotFound as exc:  # no message published then or later (TopicNotFound is answered above)
        raise HttpError(404, "Message ID not found") from exc
    return MessageIdData(ledgerId=mid.ledger_id, entryId=mid.entry_id, partitionIndex=mid.partition)


@router.get("/{tenant}/{namespace}/{topic}/ledger/{ledgerId}/entry/{entryId}",
            summary="Read the message stored at ledgerId:entryId (of a batch, its first message)",
            operation_id="PersistentTopics_getMessageById", responses=MESSAGE_RESPONSE | responses(400, 404, 412),
            response_class=Response)
async def get_message_by_id(
    topic: Topic, ctx: Context,
    ledgerId: Annotated[int, Path(ge=0, le=INT64_MAX)], entryId: Annotated[int, Path(ge=0, le=INT64_MAX)],
) -> Response:
    await refuse_partitioned(ctx, topic, 404, f"Topic {topic} not found")
    try:
        with pulsar_reasons(topic):
            found = await ctx.admin.message_by_id(topic, ledgerId, entryId)
    except NoSuchEntry as exc:
        raise HttpError(404, f"Message id not found: {ledgerId}:{entryId}") from exc
    return message_response(found)


@router.post("/{tenant}/{namespace}/{topic}/all_subscription/expireMessages/{expireTimeInSeconds}", status_code=204,
             summary="On every subscription, acknowledge every message published more than n seconds ago",
             operation_id="PersistentTopics_expireMessagesForAllSubscriptions", responses=responses(400, 404, 412))
async def expire_messages_for_all_subscriptions(
    topic: Topic, ctx: Context, expireTimeInSeconds: Annotated[int, Path(ge=0, le=INT64_MAX // 1000)],
) -> Response:
    with pulsar_reasons(topic):
        await ctx.admin.expire_messages_all_subscriptions(topic, expireTimeInSeconds)
    return Response(status_code=204)
