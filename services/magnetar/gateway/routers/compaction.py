"""Topic compaction: ``PUT .../persistent/{t}/{ns}/{topic}/compaction`` (trigger) and
``GET`` (status as Pulsar's LongRunningProcessStatus), Pulsar's
PersistentTopics_compact and PersistentTopics_compactionStatus.

A partitioned topic's trigger compacts every partition, as Pulsar's; its status is asked
of one partition (``{topic}-partition-N``): on the partitioned topic's own name it is a
405.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Response

from magnetar.common.errors import AlreadyExists
from magnetar.common.names import TopicName
from magnetar.gateway.deps import Context, Topic
from magnetar.gateway.errors import HttpError, responses
from magnetar.gateway.models import PulsarModel
from magnetar.gateway.topic_support import partition_count, pulsar_reasons, refuse_partitioned

router = APIRouter(prefix="/admin/v2/persistent", tags=["topics"])


class LongRunningProcessStatus(PulsarModel):
    status: Literal["NOT_RUN", "RUNNING", "SUCCESS", "ERROR"]
    lastError: str = ""


@router.put("/{tenant}/{namespace}/{topic}/compaction", status_code=204,
            summary="Compact a topic (every partition of a partitioned one): the latest message of each key",
            operation_id="PersistentTopics_compact", responses=responses(404, 409, 412))
async def compact(topic: Topic, ctx: Context) -> Response:
    count = await partition_count(ctx, topic)
    targets = [str(TopicName.parse(topic).partition(i)) for i in range(count)] if count else [topic]
    with pulsar_reasons(topic):
        for target in targets:
            try:
                await ctx.admin.trigger_compaction(target)
            except AlreadyExists:
                raise HttpError(409, "Compaction already in progress") from None
    return Response(status_code=204)


@router.get("/{tenant}/{namespace}/{topic}/compaction",
            summary="The status of the last compaction of a topic (or partition) on its broker",
            operation_id="PersistentTopics_compactionStatus", responses=responses(404, 405, 412))
async def compaction_status(topic: Topic, ctx: Context) -> LongRunningProcessStatus:
    await refuse_partitioned(ctx, topic, 405, "Compaction status of a partitioned topic is asked of each partition")
    with pulsar_reasons(topic):
        status = await ctx.admin.compaction_status(topic)
    return LongRunningProcessStatus(status=status.status, lastError=status.last_error)  # type: ignore[arg-type]
