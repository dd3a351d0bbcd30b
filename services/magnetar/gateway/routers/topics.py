"""``/admin/v2/persistent``: list, create, grow and delete topics; stats, internal
stats, last message id, examine a message (Pulsar's PersistentTopics).

Where Magnetar differs from Pulsar:

- Topic properties (the body of a create) are accepted and not stored.
- ``includeSystemTopic`` is ignored: there are no system topics.
- Growing a partitioned topic creates each durable subscription on the new partitions
  first and raises the count last (as Pulsar does); a failed grow leaves the topic as it
  was. Producers and consumers of the SDK already open add the new partitions within
  their ``auto_update_partitions_interval_seconds`` (60 s, Pulsar's
  ``autoUpdatePartitionsInterval``).
- A partitioned topic's partitions exist by declaration: stats of one nothing was
  published to open it (empty) rather than answer 404.
- Rates (``msgRateIn`` …) are those of the broker's last stats interval
  (``stats_interval_s``, 10 s), Pulsar's of its own (60 s); what Magnetar does not
  have (offloading, replication, expiry and redelivery rates) is 0.
- ``examinemessage`` counts messages, not entries (see :mod:`magnetar.gateway.messages`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Body, Query, Response

from magnetar.common.bundles import bundles_of_names
from magnetar.common.errors import AlreadyExists, MagnetarError
from magnetar.common.names import NamespaceName, TopicName
from magnetar.gateway import topic_stats
from magnetar.gateway.deps import Context, Namespace, Topic
from magnetar.gateway.errors import HttpError, responses
from magnetar.gateway.messages import MESSAGE_RESPONSE, message_response
from magnetar.gateway.topic_models import (
    MessageIdData,
    PartitionedTopicMetadata,
    PartitionedTopicStats,
    PersistentTopicInternalStats,
    TopicStats,
)
from magnetar.gateway.topic_support import (
    create_partitioned,
    grow_partitioned,
    partition_count,
    pulsar_reasons,
    refuse_partitioned,
)

router = APIRouter(prefix="/admin/v2/persistent", tags=["persistent topic"])
NO_CONTENT = Response(status_code=204)


# -- listing -------------------------------------------------------------------
async def _partitioned(ctx: Context, namespace: str) -> dict[str, int]:
    ns = NamespaceName.parse(namespace)
    names = await ctx.tenants.list_partitioned_topics(ns.tenant, ns.namespace)
    counts = {}
    for name in names:
        t = TopicName.parse(name)
        counts[name] = await ctx.tenants.get_partitions(t.tenant, t.namespace_part, t.local_name)
    return counts


@router.get("/{tenant}/{namespace}", summary="List the topics of a namespace (partitions one by one)",
            operation_id="PersistentTopics_getList", responses=responses(400, 404, 412))
async def get_list(
    namespace: Namespace, ctx: Context,
    bundle: Annotated[str | None, Query(description="only the topics of this bundle (0x00000000_0x40000000)")] = None,
    includeSystemTopic: Annotated[bool, Query(description="ignored: there are no system topics")] = False,
) -> list[str]:
    listed = await ctx.admin.topics(namespace)  # NamespaceNotFound: 404
    partitioned = await _partitioned(ctx, namespace)
    names = [t for t in listed if t not in partitioned]
    for base, count in partitioned.items():
        names.extend(str(TopicName.parse(base).partition(i)) for i in range(count))
    if bundle is not None:
        bundles = [b.bundle for b in await ctx.admin.bundles(namespace)]
        if bundle not in bundles:
            raise HttpError(400, f"{bundle!r} is not a bundle of {namespace}; its bundles are {', '.join(bundles)}")
        ranges = bundles_of_names(bundles)
        names = [t for t in names if ranges.bundle_of(t) == bundle]
    return sorted(names, key=TopicName.parse)


@router.get("/{tenant}/{namespace}/partitioned", summary="List the partitioned topics of a namespace",
            operation_id="PersistentTopics_getPartitionedTopicList", responses=responses(404, 412))
async def get_partitioned_topic_list(
    namespace: Namespace, ctx: Context,
    includeSystemTopic: Annotated[bool, Query(description="ignored: there are no system topics")] = False,
) -> list[str]:
    if ctx.authenticator is not None:
        await ctx.admin.topics(namespace)  # read from ZooKeeper: a broker decides whether the caller may list them
    return sorted(await _partitioned(ctx, namespace))


# -- creating, growing, deleting -----------------------------------------------
@router.put("/{tenant}/{namespace}/{topic}", status_code=204, summary="Create a non-partitioned topic",
            operation_id="PersistentTopics_createNonPartitionedTopic", responses=responses(400, 404, 409, 412))
async def create_non_partitioned_topic(
    topic: Topic, ctx: Context,
    properties: Annotated[dict[str, str] | None, Body(description="topic properties, stored with the topic")] = None,
) -> Response:
    if properties and "" in properties:  # refused before the topic is made
        raise HttpError(400, "Topic property keys must not be empty")
    try:
        await ctx.admin.create_topic(topic)
    except AlreadyExists:
        raise HttpError(409, "This topic already exists") from None
    if properties:
        with pulsar_reasons(topic):
            await ctx.admin.update_topic_properties(topic, properties)
    return NO_CONTENT


@router.put("/{tenant}/{namespace}/{topic}/partitions", status_code=204, summary="Create a partitioned topic",
            operation_id="PersistentTopics_createPartitionedTopic", responses=responses(400, 404, 406, 409, 412))
async def create_partitioned_topic(
    topic: Topic, ctx: Context, partitions: Annotated[int, Body(description="the partition count, e.g. 4")],
) -> Response:
    await create_partitioned(ctx, topic, partitions)
    return NO_CONTENT


@router.get("/{tenant}/{namespace}/{topic}/partitions", summary="Get a topic's partition count (0: not partitioned)",
            operation_id="PersistentTopics_getPartitionedMetadata", responses=responses(404, 412))
async def get_partitioned_metadata(topic: Topic, ctx: Context) -> PartitionedTopicMetadata:
    return PartitionedTopicMetadata(partitions=await partition_count(ctx, topic))


@router.post("/{tenant}/{namespace}/{topic}/createMissedPartitions", status_code=204,
             summary="Give each partition of a partitioned topic that lacks one its managed ledger",
             operation_id="PersistentTopics_createMissedPartitions", responses=responses(404, 409, 412))
async def create_missed_partitions(topic: Topic, ctx: Context) -> Response:
    if await partition_count(ctx, topic) == 0:
        raise HttpError(409, f"Partitioned topic does not exist: {topic}")  # Pulsar's 409
    await ctx.admin.create_missed_partitions(topic)
    return NO_CONTENT


@router.post("/{tenant}/{namespace}/{topic}/partitions", status_code=204,
             summary="Grow a partitioned topic (the same count changes nothing)",
             operation_id="PersistentTopics_updatePartitionedTopic", responses=responses(400, 404, 409, 412, 422))
async def update_partitioned_topic(
    topic: Topic, ctx: Context, partitions: Annotated[int, Body(description="the new partition count")],
) -> Response:
    await grow_partitioned(ctx, topic, partitions)
    return NO_CONTENT


@router.delete("/{tenant}/{namespace}/{topic}", status_code=204,
               summary="Delete a topic (force: also with producers or consumers connected)",
               operation_id="PersistentTopics_deleteTopic", responses=responses(404, 409, 412))
async def delete_topic(topic: Topic, ctx: Context, force: bool = False) -> Response:
    await refuse_partitioned(
        ctx, topic, 409,
        f"{topic} is a partitioned topic, instead of calling delete topic, please call delete-partitioned-topic.",
    )
    with pulsar_reasons(topic):
        await ctx.admin.delete_topic(topic, force=force)
    return NO_CONTENT


@router.delete("/{tenant}/{namespace}/{topic}/partitions", status_code=204,
               summary="Delete a partitioned topic and its partitions",
               operation_id="PersistentTopics_deletePartitionedTopic", responses=responses(404, 412))
async def delete_partitioned_topic(topic: Topic, ctx: Context, force: bool = False) -> Response:
    if not await partition_count(ctx, topic):
        raise HttpError(404, f"Partitioned Topic {topic} not found")
    await ctx.admin.delete_partitioned_topic(topic, force=force)
    return NO_CONTENT


# -- reading ---------------------------------------------------------------------
async def _not_partitioned(ctx: Context, topic: str) -> None:
    """A partitioned topic's own name is no topic of its own (Pulsar: 404)."""
    await refuse_partitioned(ctx, topic, 404, f"Topic {topic} not found")


@router.get("/{tenant}/{namespace}/{topic}/stats", summary="Get a topic's (or a partition's) stats",
            operation_id="PersistentTopics_getStats", responses=responses(404, 412), response_model=TopicStats)
async def get_stats(
    topic: Topic, ctx: Context, getPreciseBacklog: bool = False, subscriptionBacklogSize: bool = True,
    getEarliestTimeInBacklog: bool = False,
) -> Response:
    # The stats are asked first: the partition count is read only when they are refused
    # (one broker call on the hot path instead of two). The model is serialized here, once
    # (returned as a model, FastAPI would validate it again).
    try:
        with pulsar_reasons(topic):
            stats = topic_stats.topic_stats(await ctx.admin.topic_stats(topic))
            return Response(stats.model_dump_json(), media_type="application/json")
    except (MagnetarError, HttpError):
        await _not_partitioned(ctx, topic)
        raise


@router.get("/{tenant}/{namespace}/{topic}/partitioned-stats",
            summary="Get a partitioned topic's stats: the sum of its partitions', and each one's",
            operation_id="PersistentTopics_getPartitionedStats", responses=responses(404, 412))
async def get_partitioned_stats(
    topic: Topic, ctx: Context, perPartition: bool = True, getPreciseBacklog: bool = False,
    subscriptionBacklogSize: bool = True, getEarliestTimeInBacklog: bool = False,
) -> PartitionedTopicStats:
    count = await partition_count(ctx, topic)
    if not count:
        raise HttpError(404, f"Partitioned Topic {topic} not found")
    with pulsar_reasons(topic):
        each = await ctx.admin.partition_stats(topic)
    names = [str(TopicName.parse(topic).partition(i)) for i in range(len(each))]
    return topic_stats.partitioned_stats(names, each, perPartition)


@router.get("/{tenant}/{namespace}/{topic}/internalStats",
            summary="Get the managed ledger's figures: ledgers, cursors, counters",
            operation_id="PersistentTopics_getInternalStats", responses=responses(404, 412))
async def get_internal_stats(topic: Topic, ctx: Context, metadata: bool = False) -> PersistentTopicInternalStats:
    await _not_partitioned(ctx, topic)
    with pulsar_reasons(topic):
        return topic_stats.internal_stats(await ctx.admin.internal_stats(topic))


@router.get("/{tenant}/{namespace}/{topic}/lastMessageId", summary="Get the id of the last message stored",
            operation_id="PersistentTopics_getLastMessageId", responses=responses(404, 405, 412))
async def get_last_message_id(topic: Topic, ctx: Context) -> MessageIdData:
    await refuse_partitioned(ctx, topic, 405, "Get the last message id on a partitioned topic is not allowed")
    with pulsar_reasons(topic):
        mid = await ctx.admin.last_message_id(topic)
    return MessageIdData(ledgerId=mid.ledger_id, entryId=mid.entry_id, partitionIndex=mid.partition)


@router.get("/{tenant}/{namespace}/{topic}/examinemessage",
            summary="Read the nth message from the start or the end of the topic",
            operation_id="PersistentTopics_examineMessage", responses=MESSAGE_RESPONSE | responses(400, 404, 405, 412),
            response_class=Response)
async def examine_message(
    topic: Topic, ctx: Context,
    initialPosition: Annotated[Literal["earliest", "latest"], Query(description="count from the first or the last message")] = "latest",
    messagePosition: Annotated[int, Query(ge=1, description="1: the first (or last) message")] = 1,
) -> Response:
    await refuse_partitioned(
        ctx, topic, 405,
        "Examine messages on a partitioned topic is not allowed, please try examine message on specific topic partition",
    )
    with pulsar_reasons(topic):
        found = await ctx.admin.examine_message(topic, initialPosition, messagePosition)
    return message_response(found)
