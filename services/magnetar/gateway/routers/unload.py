"""Unloading and bundles: ``PUT .../namespaces/{t}/{ns}/unload``, ``.../{bundle}/unload``,
``.../{bundle}/split``, ``PUT .../persistent/{t}/{ns}/{topic}/unload`` and
``GET .../namespaces/{t}/{ns}/bundles`` (Pulsar's BundlesData, plus each bundle's owner
under ``owners``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Response

from magnetar.gateway.deps import Context, Namespace, Topic
from magnetar.gateway.errors import responses
from magnetar.gateway.models import PulsarModel

router = APIRouter(prefix="/admin/v2", tags=["unloading"])
NO_CONTENT = Response(status_code=204)


class BundlesData(PulsarModel):
    boundaries: list[str]
    numBundles: int
    owners: dict[str, str | None]
    """Magnetar's addition: each bundle (``0x00000000_0x40000000``) and its broker (null: unowned)."""


@router.get("/namespaces/{tenant}/{namespace}/bundles", summary="Get a namespace's bundles and their owners",
            operation_id="Namespaces_getBundlesData", responses=responses(404, 412))
async def get_bundles(namespace: Namespace, ctx: Context) -> BundlesData:
    owners = await ctx.admin.bundles(namespace)
    edges = sorted({edge for o in owners for edge in o.bundle.split("_")})
    return BundlesData(boundaries=edges, numBundles=len(owners),
                       owners={o.bundle: o.broker_address or None for o in owners})


@router.put("/namespaces/{tenant}/{namespace}/unload", status_code=204,
            summary="Unload every owned bundle of a namespace (clients reconnect; the next lookup takes them)",
            operation_id="Namespaces_unloadNamespace", responses=responses(404, 412))
async def unload_namespace(namespace: Namespace, ctx: Context) -> Response:
    await ctx.admin.unload_namespace(namespace)
    return NO_CONTENT


@router.put("/namespaces/{tenant}/{namespace}/{bundle}/unload", status_code=204,
            summary="Unload one bundle of a namespace", operation_id="Namespaces_unloadNamespaceBundle",
            responses=responses(400, 404, 412))
async def unload_bundle(namespace: Namespace, bundle: str, ctx: Context) -> Response:
    await ctx.admin.unload_namespace(namespace, bundle)
    return NO_CONTENT


@router.put("/namespaces/{tenant}/{namespace}/{bundle}/split", status_code=204,
            summary="Split a namespace bundle on its owner (its topics stay served unless unload)",
            operation_id="Namespaces_splitNamespaceBundle", responses=responses(400, 404, 412))
async def split_bundle(
    namespace: Namespace, bundle: str, ctx: Context,
    unload: Annotated[bool, Query(description="unload both halves after the split (the next lookups place them)")] = False,
    splitAlgorithmName: Annotated[str | None, Query(  # noqa: N803
        description="range_equally_divide (default), topic_count_equally_divide, specified_positions_divide")] = None,
    authoritative: Annotated[bool, Query(description="accepted: the split runs on the bundle's owner either way")] = False,
    body: Annotated[list[int] | None, Body(description="splitBoundaries: where specified_positions_divide splits")] = None,
) -> Response:
    await ctx.admin.split_bundle(namespace, bundle, splitAlgorithmName or "", unload, body or ())
    return NO_CONTENT


@router.put("/persistent/{tenant}/{namespace}/{topic}/unload", status_code=204,
            summary="Unload a topic from its broker (clients reconnect)", operation_id="PersistentTopics_unloadTopic",
            responses=responses(404, 412))
async def unload_topic(topic: Topic, ctx: Context) -> Response:
    await ctx.admin.unload_topic(topic)
    return NO_CONTENT
