"""``/admin/v2/persistent/{t}/{ns}/{topic}/properties``: a topic's properties (Pulsar's
PersistentTopics ``getProperties``, ``updateProperties``, ``removeProperties``), kept
in its managed ledger (see :mod:`magnetar.broker.topic_properties`). An update merges
keys in; a remove takes out the ``key`` given. On a partitioned topic they apply to
every partition (a GET merges the partitions').
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Response

from magnetar.gateway.deps import Context, Topic
from magnetar.gateway.errors import HttpError, responses
from magnetar.gateway.topic_support import pulsar_reasons

router = APIRouter(prefix="/admin/v2/persistent", tags=["persistent topic"])
NO_CONTENT = Response(status_code=204)
PROPERTIES = "/{tenant}/{namespace}/{topic}/properties"


@router.get(PROPERTIES, summary="Get topic properties", operation_id="PersistentTopics_getProperties",
            responses=responses(404, 412))
async def get_properties(topic: Topic, ctx: Context) -> dict[str, str]:
    with pulsar_reasons(topic):
        return await ctx.admin.topic_properties(topic)


@router.put(PROPERTIES, status_code=204, summary="Update the properties on the given topic (merged in)",
            operation_id="PersistentTopics_updateProperties", responses=responses(400, 404, 412))
async def update_properties(
    topic: Topic, ctx: Context, properties: Annotated[dict[str, str] | None, Body()] = None,
) -> Response:
    with pulsar_reasons(topic):
        await ctx.admin.update_topic_properties(topic, properties or {})
    return NO_CONTENT


@router.delete(PROPERTIES, status_code=204, summary="Remove the key in properties on the given topic",
               operation_id="PersistentTopics_removeProperties", responses=responses(400, 404, 412))
async def remove_properties(topic: Topic, ctx: Context, key: Annotated[str | None, Query()] = None) -> Response:
    if not key:
        raise HttpError(400, "Key of the topic property to remove is required")
    with pulsar_reasons(topic):
        await ctx.admin.remove_topic_property(topic, key)
    return NO_CONTENT
