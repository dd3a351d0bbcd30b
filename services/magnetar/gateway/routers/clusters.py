"""``/admin/v2/clusters`` and ``/admin/v2/brokers``: the clusters (the brokers' own and
the registered ones, :mod:`magnetar.broker.clusters`), the live brokers and the brokers'
health check.

With authentication on, a cluster's details and changes, the broker list (read from
ZooKeeper) and the health check are the superusers' (Pulsar's
``validateSuperUserAccess``); the clusters' names are any authenticated role's."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import PlainTextResponse

from magnetar.common.errors import AuthenticationError, AuthorizationError, MagnetarError
from magnetar.gateway.deps import Context, SuperUser
from magnetar.gateway.errors import HttpError, responses
from magnetar.gateway.healthcheck import health_check_topic, run_health_check
from magnetar.gateway.models import ClusterData

router = APIRouter(prefix="/admin/v2", tags=["clusters"])
NO_CONTENT = Response(status_code=204)


def _require_cluster(ctx: Context, cluster: str) -> None:
    if cluster != ctx.config.cluster_name:
        raise HttpError(404, "Cluster does not exist")


@router.get("/clusters", summary="List the clusters (this one and the registered ones)",
            operation_id="ClustersBase_getClusters", responses=responses())
async def get_clusters(ctx: Context) -> list[str]:
    return sorted({ctx.config.cluster_name, *await ctx.clusters.list_clusters()})


@router.get("/clusters/{cluster}", summary="Get a cluster's service URLs", operation_id="ClustersBase_getCluster",
            responses=responses(404), dependencies=[SuperUser])
async def get_cluster(cluster: str, ctx: Context, request: Request) -> ClusterData:
    data = await ctx.admin.cluster(cluster)  # ClusterNotFound: 404
    out = ClusterData(serviceUrl=data.service_url, serviceUrlTls=data.service_url_tls,
                      brokerServiceUrl=data.broker_service_url, brokerServiceUrlTls=data.broker_service_url_tls)
    if cluster == ctx.config.cluster_name:  # what was not stored for it: its live URLs
        brokers = await ctx.refresh_brokers()
        out.serviceUrl = out.serviceUrl or str(request.base_url).rstrip("/")
        out.brokerServiceUrl = out.brokerServiceUrl or ("magnetar://" + ",".join(brokers) if brokers else "")
    return out


@router.put("/clusters/{cluster}", status_code=204, summary="Register a cluster with its service URLs",
            operation_id="ClustersBase_createCluster", responses=responses(400, 409, 412), dependencies=[SuperUser])
async def create_cluster(cluster: str, body: ClusterData, ctx: Context) -> Response:
    await ctx.admin.create_cluster(cluster, body.to_proto())
    return NO_CONTENT


@router.post("/clusters/{cluster}", status_code=204, summary="Replace a cluster's service URLs",
             operation_id="ClustersBase_updateCluster", responses=responses(400, 404, 412), dependencies=[SuperUser])
async def update_cluster(cluster: str, body: ClusterData, ctx: Context) -> Response:
    await ctx.admin.update_cluster(cluster, body.to_proto())
    return NO_CONTENT


@router.delete("/clusters/{cluster}", status_code=204,
               summary="Delete a registered cluster (no namespace may replicate to it)",
               operation_id="ClustersBase_deleteCluster", responses=responses(404, 412), dependencies=[SuperUser])
async def delete_cluster(cluster: str, ctx: Context) -> Response:
    await ctx.admin.delete_cluster(cluster)
    return NO_CONTENT


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
