"""``/admin/v2/non-persistent``: Pulsar's NonPersistentTopics: list the loaded topics of
a namespace, create, delete and unload one, its stats (``NonPersistentTopicStats``: with
``msgDropRate``).

A non-persistent topic exists while a broker serves it (nothing of it is stored): it is
listed by the brokers owning the namespace's bundles, a topic no broker has loaded is
404, and one unloaded starts empty at its next owner (see docs/non-persistent.md).
A partitioned non-persistent topic is its partition count in ZooKeeper (kept apart from
the persistent topics' counts); its partitions are loaded on first use, each on the owner
of its bundle, and answer as the persistent routes do (create, get, grow, delete,
``partitioned-stats``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Response

from magnetar.common.errors import AlreadyExists, InvalidArgument
from magnetar.common.names import NON_PERSISTENT, TopicName
from magnetar.gateway import topic_stats
from magnetar.gateway.deps import Context, Namespace
from magnetar.gateway.errors import HttpError, responses
from magnetar.gateway.nonpersistent_stats import NonPersistentTopicStats, non_persistent_stats
from magnetar.gateway.topic_models import PartitionedTopicMetadata, PartitionedTopicStats
from magnetar.gateway.topic_support import (
    create_partitioned,
    grow_partitioned,
    partition_count,
    pulsar_reasons,
)

router = APIRouter(prefix="/admin/v2/non-persistent", tags=["non-persistent topic"])
NO_CONTENT = Response(status_code=204)


async def non_persistent_topic(
    tenant: Annotated[str, Path(description="tenant name")],
    namespace: Annotated[str, Path(description="namespace name")],
    topic: Annotated[str, Path(description="topic name")],
) -> str:
    """``non-persistent://tenant/namespace/topic``. Raises: HttpError 412 ``Topic name is not valid``."""
    try:
        return str(TopicName(NON_PERSISTENT, tenant, namespace, topic))
    except InvalidArgument as exc:
        raise HttpError(412, f"Topic name is not valid: {exc.message}") from None


NpTopic = Annotated[str, Depends(non_persistent_topic)]


@router.get("/{tenant}/{namespace}", summary="List the non-persistent topics loaded in a namespace",
            operation_id="NonPersistentTopics_getList", responses=responses(404, 412))
async def get_list(namespace: Namespace, ctx: Context) -> list[str]:
    await ctx.admin.topics(namespace)  # NamespaceNotFound: 404 (and a broker decides whether the caller may list)
    return await ctx.admin.non_persistent_topics(namespace)


@router.put("/{tenant}/{namespace}/{topic}", status_code=204, summary="Create (load) a non-persistent topic",
            operation_id="NonPersistentTopics_createNonPartitionedTopic", responses=responses(404, 409, 412))
async def create_non_partitioned_topic(
    topic: NpTopic, ctx: Context,
    properties: Annotated[dict[str, str] | None, Body(description="topic properties (accepted, not stored)")] = None,
) -> Response:
    try:
        await ctx.admin.create_topic(topic)
    except AlreadyExists:
        raise HttpError(409, "This topic already exists") from None
    return NO_CONTENT


@router.put("/{tenant}/{namespace}/{topic}/partitions", status_code=204,
            summary="Create a partitioned non-persistent topic",
            operation_id="NonPersistentTopics_createPartitionedTopic", responses=responses(404, 406, 409, 412))
async def create_partitioned_topic(
    topic: NpTopic, ctx: Context, partitions: Annotated[int, Body(description="the partition count, e.g. 4")],
) -> Response:
    await create_partitioned(ctx, topic, partitions)
    return NO_CONTENT


@router.get("/{tenant}/{namespace}/{topic}/partitions", summary="Get a topic's partition count (0: not partitioned)",
            operation_id="NonPersistentTopics_getPartitionedMetadata", responses=responses(404, 412))
async def get_partitioned_metadata(topic: NpTopic, ctx: Context) -> PartitionedTopicMetadata:
    return PartitionedTopicMetadata(partitions=await partition_count(ctx, topic))


@router.post("/{tenant}/{namespace}/{topic}/partitions", status_code=204,
             summary="Grow a partitioned non-persistent topic (the same count changes nothing)",
             operation_id="NonPersistentTopics_updatePartitionedTopic", responses=responses(404, 409, 412, 422))
async def update_partitioned_topic(
    topic: NpTopic, ctx: Context, partitions: Annotated[int, Body(description="the new partition count")],
) -> Response:
    await grow_partitioned(ctx, topic, partitions)
    return NO_CONTENT


@router.delete("/{tenant}/{namespace}/{topic}/partitions", status_code=204,
               summary="Delete a partitioned non-persistent topic (its loaded partitions are unloaded)",
               operation_id="NonPersistentTopics_deletePartitionedTopic", responses=responses(404, 412))
async def delete_partitioned_topic(topic: NpTopic, ctx: Context, force: bool = False) -> Response:
    if not await partition_count(ctx, topic):
        raise HttpError(404, f"Partitioned Topic {topic} not found")
    with pulsar_reasons(topic):
        await ctx.admin.delete_partitioned_topic(topic, force=force)
    return NO_CONTENT


@router.get("/{tenant}/{namespace}/{topic}/partitioned-stats",
            summary="Get a partitioned non-persistent topic's stats: the sum of its partitions', and each one's",
            operation_id="NonPersistentTopics_getPartitionedStats", responses=responses(404, 412))
async def get_partitioned_stats(
    topic: NpTopic, ctx: Context, perPartition: bool = True, getPreciseBacklog: bool = False,
) -> PartitionedTopicStats:
    if not await partition_count(ctx, topic):
        raise HttpError(404, f"Partitioned Topic {topic} not found")
    with pulsar_reasons(topic):
        each = await ctx.admin.partition_stats(topic)
    names = [str(TopicName.parse(topic).partition(i)) for i in range(len(each))]
    return topic_stats.partitioned_stats(names, each, perPartition)


@router.get("/{tenant}/{namespace}/{topic}/stats", summary="Get a non-persistent topic's stats (with msgDropRate)",
            operation_id="NonPersistentTopics_getStats", responses=responses(404, 412))
async def get_stats(topic: NpTopic, ctx: Context, getPreciseBacklog: bool = False) -> NonPersistentTopicStats:
    with pulsar_reasons(topic):
        return non_persistent_stats(await ctx.admin.topic_stats(topic))


@router.put("/{tenant}/{namespace}/{topic}/unload", status_code=204,
            summary="Unload a non-persistent topic (it starts empty at its next owner)",
            operation_id="NonPersistentTopics_unloadTopic", responses=responses(404, 412))
async def unload_topic(topic: NpTopic, ctx: Context) -> Response:
    with pulsar_reasons(topic):
        await ctx.admin.unload_topic(topic)
    return NO_CONTENT


@router.delete("/{tenant}/{namespace}/{topic}", status_code=204,
               summary="Delete a non-persistent topic (force: also with producers or consumers connected)",
               operation_id="NonPersistentTopics_deleteTopic", responses=responses(404, 412))
async def delete_topic(topic: NpTopic, ctx: Context, force: bool = False) -> Response:
    with pulsar_reasons(topic):
        await ctx.admin.delete_topic(topic, force=force)
    return NO_CONTENT
