"""The FastAPI application: routers, error handlers, metrics, health and readiness."""

from __future__ import annotations

from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse

import magnetar
from magnetar.gateway import console, errors
from magnetar.gateway.auth import AuthenticationMiddleware
from magnetar.gateway.context import GatewayContext
from magnetar.gateway.deps import Context
from magnetar.gateway.metrics import GatewayMetrics
from magnetar.gateway.models import Health
from magnetar.gateway.routers import (
    broker_stats,
    clusters,
    compaction,
    dlq,
    lookup,
    namespace_stats,
    namespaces,
    nonpersistent,
    peek,
    permissions,
    producer,
    schemas,
    storage,
    subscriptions,
    tenants,
    terminate,
    topic_messages,
    topic_permissions,
    topic_policies,
    topic_properties,
    topics,
    unload,
    whoami,
    zookeeper,
)
from magnetar.gateway.websocket import router as websocket

ROUTERS = (
    clusters.router, broker_stats.router, tenants.router, namespace_stats.router, namespaces.router, permissions.router, lookup.router, topic_permissions.router,
    topics.router, schemas.router, subscriptions.router, unload.router, compaction.router, storage.router, dlq.router,
    producer.router, terminate.router, topic_messages.router, topic_properties.router, topic_policies.router,
    nonpersistent.router, zookeeper.router, websocket.router,
    peek.router, whoami.router,  # the web console's (issue 36)
)


def create_app(context: GatewayContext) -> FastAPI:
    app = FastAPI(
        title="Magnetar gateway",
        version=magnetar.__version__,
        description="Pulsar's admin REST API (v2) and WebSocket API, plus storage and dead-letter tools.",
    )
    app.state.context = context
    errors.install(app)
    if context.authenticator is not None:
        app.add_middleware(AuthenticationMiddleware, authenticator=context.authenticator)
    metrics = GatewayMetrics()
    metrics.install(app)  # outside authentication: refusals are counted too
    for router in ROUTERS:
        app.include_router(router)

    @app.get("/healthz", tags=["health"], summary="The gateway process is up")
    async def healthz() -> Health:
        return Health(status="ok")

    @app.get("/readyz", tags=["health"], summary="Ready: ZooKeeper session up and a broker registered",
             responses=errors.responses())
    async def readyz(ctx: Context) -> Response:
        zookeeper = ctx.zookeeper_up()
        brokers = len(ctx.brokers)
        if zookeeper and brokers:
            return JSONResponse(Health(status="ready", zookeeper=True, brokers=brokers).model_dump())
        reason = "no ZooKeeper session" if not zookeeper else "no broker registered"
        return JSONResponse(Health(status="not ready", zookeeper=zookeeper, brokers=brokers, reason=reason).model_dump(),
                            status_code=503)

    @app.get("/metrics", tags=["health"], summary="Prometheus metrics", include_in_schema=False)
    async def prometheus() -> Response:
        return metrics.exposition()

    console.install(app)

    return app
