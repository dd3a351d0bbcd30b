"""``/admin/v2/non-persistent``: Pulsar's NonPersistentTopics: list the loaded topics of
a namespace, create, delete and unload one, its stats (``NonPersistentTopicStats``: with
``msgDropRate``).

A non-persistent topic exists while a broker serves it (nothing of it is stored): it is
listed by the brokers owning the namespace's bundles, a topic no broker has loaded is
404, and one unloaded starts empty at its next owner (see docs/non-persistent.md).
Partitioned non-persistent topics are not served: ``PUT .../partitions`` answers 406 and
``GET .../partitions`` 0 partitions.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Response

from magnetar.common.errors import AlreadyExists, InvalidArgument
from magnetar.common.names import NON_PERSISTENT, TopicName
from magnetar.gateway.deps import Context, Namespace
from magnetar.gateway.errors import HttpError, responses
from magnetar.gateway.nonpersistent_stats import NonPersistentTopicStats, non_persistent_stats
from magnetar.gateway.topic_models import PartitionedTopicMetadata
from magnetar.gateway.topic_support import pulsar_reasons

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
            summary="Create a partitioned non-persistent topic (not served: 406)",
            operation_id="NonPersistentTopics_createPartitionedTopic", responses=responses(406, 412))
async def create_partitioned_topic(
    topic: NpTopic, ctx: Context, partitions: Annotated[int, Body(description="the partition count, e.g. 4")],
) -> Response:
    raise HttpError(406, f"{topic}: partitioned non-persistent topics are not supported; use persistent:// or one non-persistent topic")


@router.get("/{tenant}/{namespace}/{topic}/partitions", summary="Get a topic's partition count (always 0)",
            operation_id="NonPersistentTopics_getPartitionedMetadata", responses=responses(412))
async def get_partitioned_metadata(topic: NpTopic, ctx: Context) -> PartitionedTopicMetadata:
    return PartitionedTopicMetadata(partitions=0)


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
