"""Dead letters, for the operator who gets paged at night (Magnetar's own routes):
``/admin/v2/dlq/{t}/{ns}`` lists a namespace's DLQ topics; under
``/admin/v2/dlq/{t}/{ns}/{topic}``: ``messages`` (peek), ``replay`` and ``purge``.
See gateway/deadletters.py for how a replay moves each message exactly once."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from magnetar.common.errors import InvalidArgument
from magnetar.gateway import deadletters
from magnetar.gateway.deps import Context, Topic
from magnetar.gateway.errors import responses
from magnetar.gateway.models import PulsarModel

router = APIRouter(prefix="/admin/v2/dlq", tags=["dead letters"])
Subscription = Annotated[
    str | None,
    Query(description="the DLQ subscription to read through (default: its only one, or dlq-replay when it has none)"),
]


class ReplayRequest(PulsarModel):
    count: int | None = None
    """Only the first N messages (default: all)."""
    messageIds: list[str] | None = None
    """Only these messages (ledgerId:entryId[:partition[:batch]])."""
    target: str | None = None
    """Publish every message to this topic instead of its REAL_TOPIC."""


class ReplayResult(PulsarModel):
    subscription: str
    moved: int
    skipped: int
    failed: int
    failedMessageIds: list[str]
    movedByTarget: dict[str, int]


class PurgeResult(PulsarModel):
    subscription: str


async def dlq_subscription(ctx: Context, dlq: str, requested: str | None) -> str:
    """The subscription the DLQ tools act on.

    Raises:
        TopicNotFound: no such DLQ. InvalidArgument: several subscriptions and none named.
    """
    subscriptions = await ctx.admin.subscriptions(dlq)
    if requested:
        return requested
    if len(subscriptions) > 1:
        raise InvalidArgument(
            f"{dlq} has several subscriptions ({', '.join(subscriptions)}): name one with ?subscription="
        )
    return subscriptions[0] if subscriptions else deadletters.DEFAULT_SUBSCRIPTION


@router.post("/{tenant}/{namespace}/{topic}/replay", summary="Move DLQ messages back to their real topic, exactly once",
             operation_id="Magnetar_replayDeadLetters", responses=responses(400, 404, 412))
async def replay(topic: Topic, ctx: Context, body: ReplayRequest | None = None,
                 subscription: Subscription = None) -> ReplayResult:
    body = body or ReplayRequest()
    sub = await dlq_subscription(ctx, topic, subscription)
    report = await deadletters.replay(
        ctx.admin.pool.service_hosts, topic, sub, count=body.count, ids=body.messageIds, target=body.target,
        timeout_s=ctx.config.operation_timeout_s,
    )
    return ReplayResult(
        subscription=sub, moved=report.moved, skipped=report.skipped, failed=report.failed,
        failedMessageIds=report.failed_ids, movedByTarget=dict(report.by_target),
    )


@router.post("/{tenant}/{namespace}/{topic}/purge", summary="Acknowledge (drop) a DLQ's whole backlog",
             operation_id="Magnetar_purgeDeadLetters", responses=responses(400, 404))
async def purge(topic: Topic, ctx: Context, subscription: Subscription = None) -> PurgeResult:
    sub = await dlq_subscription(ctx, topic, subscription)
    await ctx.admin.clear_backlog(topic, sub)
    return PurgeResult(subscription=sub)
