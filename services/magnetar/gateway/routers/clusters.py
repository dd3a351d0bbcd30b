"""``/admin/v2/clusters`` and ``/admin/v2/brokers``: the one cluster, its live brokers
and the brokers' health check.

With authentication on, the cluster's details, its broker list (read from ZooKeeper) and
the health check are the superusers' (Pulsar's ``validateSuperUserAccess``); the
cluster's name is any authenticated role's."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import PlainTextResponse

from magnetar.common.errors import AuthenticationError, AuthorizationError, MagnetarError
from magnetar.gateway.deps import Context, SuperUser
from magnetar.gateway.errors import HttpError, responses
from magnetar.gateway.healthcheck import health_check_topic, run_health_check
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


# Before /brokers/{cluster}, which would take "health" for a cluster's name.
@router.get("/brokers/health", summary="Produce and read back a message through the brokers",
            operation_id="BrokersBase_healthCheck", responses=responses(400, 500), dependencies=[SuperUser],
            response_class=PlainTextResponse)
async def health_check(
    ctx: Context,
    topicVersion: Annotated[Literal["V1", "V2"] | None, Query(
        description="Pulsar's heartbeat namespace form; both use persistent://pulsar/<cluster>/healthcheck here")] = None,
    brokerId: Annotated[str | None, Query(description="refused: the check runs through the cluster's brokers")] = None,
) -> PlainTextResponse:
    """200 ``ok`` once a message produced to ``persistent://pulsar/<cluster>/healthcheck``
    is read back (see :mod:`magnetar.gateway.healthcheck`); 500 with the reason otherwise."""
    if brokerId is not None:
        raise HttpError(400, f"brokerId is not supported: the gateway checks the cluster through the broker that "
                             f"owns {health_check_topic(ctx.config.cluster_name)}")
    async with ctx.caller_client() as client:
        try:
            await run_health_check(ctx.admin, client, ctx.config.cluster_name, ctx.config.operation_timeout_s)
        except (AuthenticationError, AuthorizationError):
            raise
        except MagnetarError as exc:  # Pulsar answers any failed check with 500
            raise HttpError(500, f"Health check failed: {exc.message}") from exc
    return PlainTextResponse("ok")


@router.get("/brokers/{cluster}", summary="List the cluster's live brokers (host:port)",
            operation_id="BrokersBase_getActiveBrokers", responses=responses(404), dependencies=[SuperUser])
async def get_active_brokers(cluster: str, ctx: Context) -> list[str]:
    _require_cluster(ctx, cluster)
    return await ctx.refresh_brokers()
