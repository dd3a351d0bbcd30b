"""Terminating topics: ``POST /admin/v2/persistent/{t}/{ns}/{topic}/terminate`` (a
non-partitioned topic or one partition; answers its last message id) and
``.../terminate/partitions`` (every partition of a partitioned topic), as Pulsar's
PersistentTopics ``terminate`` and ``terminatePartitionedTopic``.

A terminated topic refuses producers (TopicTerminated); its consumers get every message
and then learn they reached its end. Terminating again answers the same message id. The
state is stored with the managed ledger (see :mod:`magnetar.broker.termination`), so it
holds after broker restarts and hand-overs.
"""

from __future__ import annotations

from fastapi import APIRouter

from magnetar.gateway.deps import Context, Topic
from magnetar.gateway.errors import HttpError, responses
from magnetar.gateway.topic_models import MessageIdData
from magnetar.gateway.topic_support import partition_count, pulsar_reasons

router = APIRouter(prefix="/admin/v2/persistent", tags=["persistent topic"])


@router.post("/{tenant}/{namespace}/{topic}/terminate",
             summary="Terminate a topic: no more messages are taken; answers its last message id",
             operation_id="PersistentTopics_terminate", responses=responses(404, 405, 412))
async def terminate(topic: Topic, ctx: Context) -> MessageIdData:
    if await partition_count(ctx, topic):
        raise HttpError(405, "Termination of a partitioned topic is not allowed")
    with pulsar_reasons(topic):
        mid = await ctx.admin.terminate_topic(topic)
    return MessageIdData(ledgerId=mid.ledger_id, entryId=mid.entry_id, partitionIndex=mid.partition)


@router.post("/{tenant}/{namespace}/{topic}/terminate/partitions",
             summary="Terminate every partition of a partitioned topic; answers each one's last message id",
             operation_id="PersistentTopics_terminatePartitionedTopic", responses=responses(404, 405, 412))
async def terminate_partitioned_topic(topic: Topic, ctx: Context) -> dict[int, MessageIdData]:
    # Pulsar's swagger says 204, its broker answers each partition's last message id
    # (Map<Integer, MessageId>): so does this route.
    if not await partition_count(ctx, topic):
        with pulsar_reasons(topic):
            await ctx.admin.topic_stats(topic)  # TopicNotFound: 404, as Pulsar
        raise HttpError(405, "Termination of a non-partitioned topic is not allowed")
    with pulsar_reasons(topic):
        ids = await ctx.admin.terminate_partitioned_topic(topic)
    return {i: MessageIdData(ledgerId=m.ledger_id, entryId=m.entry_id, partitionIndex=m.partition) for i, m in enumerate(ids)}
