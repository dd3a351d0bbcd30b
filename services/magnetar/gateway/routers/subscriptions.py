"""``/admin/v2/persistent/{t}/{ns}/{topic}/subscription…``: list, create at a
position, delete, skip, clear the backlog, reset the cursor, expire, peek (Pulsar's
PersistentTopics subscription calls). On a partitioned topic they apply to every
partition, but skipping n messages, peeking and resetting to a position, which Pulsar
refuses there (405).

Where Magnetar differs from Pulsar:

- Subscriptions move by whole entries: a ResetCursorData's ``batchIndex`` is ignored,
  and ``excluded`` starts after the entry.
- Creating a subscription at an entry's id on a partitioned topic is refused (400):
  an id names one partition; create it at earliest or latest, or on one partition.
- Subscription properties are kept (set at subscribe, read and replaced by the
  ``/properties`` routes, shown in the stats); ResetCursorData's ``properties`` are not.
- Peek counts messages, not entries (see :mod:`magnetar.gateway.messages`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Body, Path, Response

from magnetar.common.errors import AlreadyExists, ConsumerBusy
from magnetar.common.message_id import MessageId
from magnetar.gateway.deps import Context, Topic
from magnetar.gateway.errors import HttpError, responses
from magnetar.gateway.messages import MESSAGE_RESPONSE, message_response
from magnetar.gateway.topic_models import ResetCursorData
from magnetar.gateway.topic_support import pulsar_reasons, refuse_partitioned

router = APIRouter(prefix="/admin/v2/persistent", tags=["persistent topic"])
NO_CONTENT = Response(status_code=204)
SUB = "/{tenant}/{namespace}/{topic}/subscription/{subName}"
SubName = Annotated[str, Path(description="subscription name")]


def _message_id(data: ResetCursorData) -> MessageId:
    entry = data.entryId + 1 if data.excluded else data.entryId
    return MessageId(ledger_id=data.ledgerId, entry_id=entry, partition=data.partitionIndex)


@router.get("/{tenant}/{namespace}/{topic}/subscriptions", summary="List a topic's subscriptions",
            operation_id="PersistentTopics_getSubscriptions", responses=responses(404, 412))
async def get_subscriptions(topic: Topic, ctx: Context) -> list[str]:
    with pulsar_reasons(topic):
        return await ctx.admin.subscriptions(topic)


@router.put("/{tenant}/{namespace}/{topic}/subscription/{subscriptionName}", status_code=204,
            summary="Create a subscription at a message id, 'earliest' or 'latest' (none: latest)",
            operation_id="PersistentTopics_createSubscription", responses=responses(400, 404, 409, 412))
async def create_subscription(
    topic: Topic, ctx: Context, subscriptionName: SubName,
    messageId: Annotated[ResetCursorData | Literal["earliest", "latest"] | None, Body()] = None,
    replicated: bool = False,
) -> Response:
    if messageId is None or messageId == "latest":
        start = MessageId.latest
    elif messageId == "earliest":
        start = MessageId.earliest
    else:
        start = _message_id(messageId)
    with pulsar_reasons(topic, subscriptionName):
        try:
            await ctx.admin.create_subscription(topic, subscriptionName, start)
        except AlreadyExists:
            raise HttpError(409, "Subscription already exists for topic") from None
    return NO_CONTENT


@router.delete(SUB, status_code=204, summary="Delete a subscription (force: also with consumers attached)",
               operation_id="PersistentTopics_deleteSubscription", responses=responses(400, 404, 412))
async def delete_subscription(topic: Topic, ctx: Context, subName: SubName, force: bool = False) -> Response:
    with pulsar_reasons(topic, subName):
        try:
            await ctx.admin.delete_subscription(topic, subName, force=force)
        except ConsumerBusy:
            raise HttpError(412, "Subscription has active connected consumers") from None
    return NO_CONTENT


@router.post(SUB + "/skip/{numMessages}", status_code=204, summary="Acknowledge the next n messages",
             operation_id="PersistentTopics_skipMessages", responses=responses(400, 404, 405, 412))
async def skip_messages(topic: Topic, ctx: Context, subName: SubName, numMessages: int) -> Response:
    await refuse_partitioned(ctx, topic, 405, "Skipping messages on a partitioned topic is not allowed")
    with pulsar_reasons(topic, subName):
        await ctx.admin.skip(topic, subName, numMessages)
    return NO_CONTENT


@router.post(SUB + "/skip_all", status_code=204, summary="Acknowledge the whole backlog (clear-backlog)",
             operation_id="PersistentTopics_skipAllMessages", responses=responses(400, 404, 412))
async def skip_all_messages(topic: Topic, ctx: Context, subName: SubName) -> Response:
    with pulsar_reasons(topic, subName):
        await ctx.admin.clear_backlog(topic, subName)
    return NO_CONTENT


@router.post(SUB + "/resetcursor/{timestamp}", status_code=204,
             summary="Move the subscription to the first message published at or after a time (ms)",
             operation_id="PersistentTopics_resetCursor", responses=responses(400, 404, 412))
async def reset_cursor(topic: Topic, ctx: Context, subName: SubName, timestamp: int) -> Response:
    with pulsar_reasons(topic, subName):
        await ctx.admin.reset_cursor_to_time(topic, subName, timestamp)
    return NO_CONTENT


@router.post(SUB + "/resetcursor", status_code=204, summary="Move the subscription to a message id",
             operation_id="PersistentTopics_resetCursorOnPosition", responses=responses(400, 404, 405, 412))
async def reset_cursor_on_position(
    topic: Topic, ctx: Context, subName: SubName, messageId: Annotated[ResetCursorData, Body()],
) -> Response:
    await refuse_partitioned(ctx, topic, 405, "Reset-cursor at position is not allowed for partitioned-topic")
    with pulsar_reasons(topic, subName):
        await ctx.admin.reset_cursor(topic, subName, _message_id(messageId))
    return NO_CONTENT


@router.post(SUB + "/expireMessages/{expireTimeInSeconds}", status_code=204,
             summary="Acknowledge every message published more than n seconds ago",
             operation_id="PersistentTopics_expireTopicMessages", responses=responses(400, 404, 412))
async def expire_topic_messages(topic: Topic, ctx: Context, subName: SubName, expireTimeInSeconds: int) -> Response:
    with pulsar_reasons(topic, subName):
        await ctx.admin.expire_messages(topic, subName, expireTimeInSeconds)
    return NO_CONTENT


@router.get(SUB + "/properties", summary="Return all the properties on the given subscription",
            operation_id="PersistentTopics_getSubscriptionProperties", responses=responses(400, 404, 412))
async def get_subscription_properties(topic: Topic, ctx: Context, subName: SubName) -> dict[str, str]:
    with pulsar_reasons(topic, subName):
        return await ctx.admin.subscription_properties(topic, subName)


@router.put(SUB + "/properties", status_code=204, summary="Replace all the properties on the given subscription",
            operation_id="PersistentTopics_updateSubscriptionProperties", responses=responses(400, 404, 412))
async def update_subscription_properties(
    topic: Topic, ctx: Context, subName: SubName, subscriptionProperties: Annotated[dict[str, str] | None, Body()] = None,
) -> Response:
    with pulsar_reasons(topic, subName):
        await ctx.admin.update_subscription_properties(topic, subName, subscriptionProperties or {})
    return NO_CONTENT


@router.get(SUB + "/position/{messagePosition}", summary="Read the nth message the subscription has not acknowledged",
            operation_id="PersistentTopics_peekNthMessage", responses=MESSAGE_RESPONSE | responses(400, 404, 405, 412),
            response_class=Response)
async def peek_nth_message(
    topic: Topic, ctx: Context, subName: SubName,
    messagePosition: Annotated[int, Path(ge=1, description="1: the first unacknowledged message")],
) -> Response:
    await refuse_partitioned(ctx, topic, 405, "Peek messages on a partitioned topic is not allowed")
    with pulsar_reasons(topic, subName):
        found = await ctx.admin.peek_message(topic, subName, messagePosition)
    if not found.found:
        raise HttpError(404, "Message not found")
    return message_response(found)
