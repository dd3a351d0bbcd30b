"""Dead letters, for the operator who gets paged at night (Magnetar's own routes):
``/admin/v2/dlq/{t}/{ns}`` lists a namespace's DLQ topics; under
``/admin/v2/dlq/{t}/{ns}/{topic}``: ``messages`` (peek), ``replay`` and ``purge``.
See gateway/deadletters.py for how a replay moves each message exactly once."""

from __future__ import annotations

import base64
from collections import defaultdict
from contextlib import aclosing
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query

from magnetar.common import letters
from magnetar.common.errors import InvalidArgument
from magnetar.common.names import TopicName
from magnetar.gateway import deadletters
from magnetar.gateway.deps import Context, Namespace, Topic
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


class ReplayFailure(PulsarModel):
    messageId: str
    target: str
    reason: str
    """Why it was not moved, as the broker said (a role that may not produce there)."""


class ReplayResult(PulsarModel):
    subscription: str
    moved: int
    skipped: int
    failed: int
    failedMessageIds: list[str]
    failures: list[ReplayFailure]
    """The failed messages with their reasons."""
    movedByTarget: dict[str, int]


class PurgeRequest(PulsarModel):
    messageIds: list[str] | None = None
    """Only these messages (ledgerId:entryId[:partition[:batch]]; default: the whole backlog)."""


class PurgeResult(PulsarModel):
    subscription: str
    purgedMessageIds: list[str] | None = None
    """With ``messageIds``: those found and dropped (one not found was acknowledged before, or never was)."""


class DlqInfo(PulsarModel):
    """One subscription of a DLQ topic (a DLQ without subscriptions: one entry, ``subscription`` null)."""

    topic: str
    subscription: str | None
    backlog: int
    """Unacknowledged messages (counted up to ``scanLimit``; see ``complete``)."""
    complete: bool
    oldestPublishTime: str | None
    oldestAgeSeconds: float | None
    countsByRealTopic: dict[str, int]


class DeadLetter(PulsarModel):
    messageId: str
    realTopic: str | None
    originMessageId: str | None
    reconsumeTimes: int | None
    reason: str | None
    publishTime: str
    eventTime: str | None
    key: str | None
    producerName: str
    properties: dict[str, str]
    payload: str
    """base64; a chunked message's whole payload"""
    chunks: int
    """Entries the message is stored in: 1, or a chunked message's chunks."""


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def _dlq_topics(names: list[str]) -> dict[str, list[str]]:
    """The namespace's DLQ topics (partitioned ones by their own name), with their partitions."""
    out: dict[str, list[str]] = defaultdict(list)
    for name in sorted(names):
        if deadletters.is_dlq_topic(name):
            out[str(TopicName.parse(name).partitioned_topic_name)].append(name)
    return out


@router.get("/{tenant}/{namespace}", summary="List a namespace's DLQ topics with, per subscription, backlog, oldest message and counts by REAL_TOPIC",
            operation_id="Magnetar_getDeadLetterTopics", responses=responses(400, 404, 412))
async def list_dlqs(namespace: Namespace, ctx: Context,
                    scanLimit: int = Query(10_000, ge=1, le=1_000_000)) -> list[DlqInfo]:
    out = []
    now_ms = datetime.now(UTC).timestamp() * 1000
    for topic, partitions in _dlq_topics(await ctx.admin.topics(namespace)).items():
        subscriptions: list[str | None] = list(await ctx.admin.subscriptions(topic))
        for sub in subscriptions or [None]:
            if sub is None:  # nothing keeps its messages: none to count
                out.append(DlqInfo(topic=topic, subscription=None, backlog=0, complete=True, oldestPublishTime=None,
                                   oldestAgeSeconds=None, countsByRealTopic={}))
                continue
            summary = await deadletters.summarize(ctx.admin, topic, partitions, sub, scanLimit)
            oldest = summary.oldest_publish_ms
            out.append(DlqInfo(
                topic=topic, subscription=sub, backlog=summary.backlog, complete=summary.complete,
                oldestPublishTime=_iso(oldest) if oldest is not None else None,
                oldestAgeSeconds=max(0.0, (now_ms - oldest) / 1000) if oldest is not None else None,
                countsByRealTopic=dict(summary.by_real_topic),
            ))
    return out


@router.get("/{tenant}/{namespace}/{topic}/messages", summary="Peek a DLQ's messages with their provenance (nothing is acknowledged)",
            operation_id="Magnetar_peekDeadLetters", responses=responses(400, 404, 412))
async def peek_dlq(topic: Topic, ctx: Context, subscription: Subscription = None,
                   limit: int = Query(10, ge=1, le=1000)) -> list[DeadLetter]:
    sub = await dlq_subscription(ctx, topic, subscription)
    partitions = await ctx.admin.partitions(topic)
    names = [str(TopicName.parse(topic).partition(i)) for i in range(partitions)] if partitions else [topic]
    out: list[DeadLetter] = []
    async with aclosing(deadletters.letters(ctx.admin, names, sub, limit)) as found:
        async for letter in found:
            m = letter.entry
            props = dict(m.message.properties)
            times = props.get(letters.RECONSUMETIMES)
            out.append(DeadLetter(
                messageId=letter.message_id,
                realTopic=props.get(letters.REAL_TOPIC), originMessageId=props.get(letters.ORIGIN_MESSAGE_ID),
                reconsumeTimes=int(times) if times and times.isdigit() else None,
                reason=props.get(letters.DEAD_LETTER_REASON), publishTime=_iso(m.publish_time_ms),
                eventTime=_iso(m.message.event_time_ms) if m.message.event_time_ms else None,
                key=m.message.partition_key if m.message.has_partition_key else None, producerName=m.producer_name,
                properties=props, payload=base64.b64encode(letter.payload).decode(), chunks=letter.chunks,
            ))
            if len(out) == limit:
                break
    return out


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
    """A replay that moved nothing because a message could not be moved answers that
    message's error (403 with the broker's reason when the caller may not produce to its
    target); one that moved some answers 200 with each failed message's reason."""
    body = body or ReplayRequest()
    sub = await dlq_subscription(ctx, topic, subscription)
    async with ctx.caller_client() as client:  # the caller's token: it needs consume here, produce on the targets
        report = await deadletters.replay(client, topic, sub, count=body.count, ids=body.messageIds, target=body.target)
    if report.moved == 0 and report.failures:
        raise report.failures[0].error
    return ReplayResult(
        subscription=sub, moved=report.moved, skipped=report.skipped, failed=report.failed,
        failedMessageIds=report.failed_ids,
        failures=[ReplayFailure(messageId=f.message_id, target=f.target, reason=f.error.message) for f in report.failures],
        movedByTarget=dict(report.by_target),
    )


@router.post("/{tenant}/{namespace}/{topic}/purge",
             summary="Acknowledge (drop) a DLQ's whole backlog, or only the messages named",
             operation_id="Magnetar_purgeDeadLetters", responses=responses(400, 404),
             response_model_exclude_none=True)  # a whole purge answers {"subscription"} as it always did
async def purge(topic: Topic, ctx: Context, body: PurgeRequest | None = None,
                subscription: Subscription = None) -> PurgeResult:
    sub = await dlq_subscription(ctx, topic, subscription)
    if body is None or body.messageIds is None:
        await ctx.admin.clear_backlog(topic, sub)
        return PurgeResult(subscription=sub)
    async with ctx.caller_client() as client:  # the caller's token: it needs consume here
        dropped = await deadletters.purge_messages(client, topic, sub, body.messageIds)
    return PurgeResult(subscription=sub, purgedMessageIds=dropped)
