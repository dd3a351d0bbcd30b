"""``/admin/v2/broker-stats``: a broker's load report (Pulsar's ``BrokerStatsBase``), as
the broker wrote it to ZooKeeper for the load manager (docs/load-balancing.md).

Pulsar answers with the report of the broker serving the call; the gateway is no broker,
so it answers with the first live broker's (sorted by id), or ``?broker=host:port``'s.
Superusers only, as in Pulsar."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from magnetar.gateway.deps import Context, SuperUser
from magnetar.gateway.errors import HttpError, responses
from magnetar.metadata.loadbalance import ZkLoadReportStore

router = APIRouter(prefix="/admin/v2/broker-stats", tags=["broker-stats"])


@router.get("/load-report", summary="A broker's load report (CPU, memory, bandwidth, message rates, bundles)",
            operation_id="BrokerStatsBase_getLoadReport", responses=responses(404), dependencies=[SuperUser])
async def get_load_report(
    ctx: Context,
    broker: Annotated[str | None, Query(description="host:port of a live broker; default: the first live broker")] = None,
) -> dict[str, Any]:
    brokers = await ctx.refresh_brokers()
    chosen = broker or (brokers[0] if brokers else "")
    if not chosen or chosen not in brokers:
        raise HttpError(404, f"Broker {chosen} is not a live broker" if chosen else "No broker is live")
    doc = await ZkLoadReportStore(ctx.session).read(chosen)
    if doc is None:
        raise HttpError(404, f"Broker {chosen} has not written a load report (is its load manager on?)")
    return doc
