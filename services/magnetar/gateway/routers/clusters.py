"""``/admin/v2/clusters`` and ``/admin/v2/brokers``: the one cluster and its live brokers.

With authentication on, the cluster's details and its broker list (read from ZooKeeper)
are the superusers' (Pulsar's ``validateSuperUserAccess``); the cluster's name is any
authenticated role's."""

from __future__ import annotations

from fastapi import APIRouter, Request

from magnetar.gateway.deps import Context, SuperUser
from magnetar.gateway.errors import HttpError, responses
from magnetar.gateway.models import ClusterData

router = APIRouter(prefix="/admin/v2", tags=["clusters"])


def _require_cluster(ctx: Context, cluster: str) -> None:
    if cluster != ctx.config.cluster_name:
        raise HttpError(404, "Cluster does not exist")


@router.get("/clusters", summary="List the clusters (this one)", operation_id="ClustersBase_getClusters",
            responses=responses())
async def get_clusters(ctx: Context) -> list[str]:
    return [ctx.config.cluster_name]


@router.get("/clusters/{cluster}", summary="Get a cluster's service URLs", operation_id="ClustersBase_getCluster",
            responses=responses(404), dependencies=[SuperUser])
async def get_cluster(cluster: str, ctx: Context, request: Request) -> ClusterData:
    _require_cluster(ctx, cluster)
    brokers = await ctx.refresh_brokers()
    return ClusterData(
        serviceUrl=str(request.base_url).rstrip("/"),
        brokerServiceUrl="magnetar://" + ",".join(brokers) if brokers else "",
    )


@router.get("/brokers/{cluster}", summary="List the cluster's live brokers (host:port)",
            operation_id="BrokersBase_getActiveBrokers", responses=responses(404), dependencies=[SuperUser])
async def get_active_brokers(cluster: str, ctx: Context) -> list[str]:
    _require_cluster(ctx, cluster)
    return await ctx.refresh_brokers()
