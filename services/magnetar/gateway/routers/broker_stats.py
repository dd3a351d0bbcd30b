"""``/admin/v2/broker-stats``: a broker's load report (Pulsar's ``BrokerStatsBase``), as
the broker wrote it to ZooKeeper for the load manager (docs/load-balancing.md).

Pulsar answers with the report of the broker serving the call; the gateway is no broker,
so it answers with the first live broker's (sorted by id), or ``?broker=host:port``'s.
Superusers only, as in Pulsar.

``/admin/v2/broker-stats/rates-history`` (Magnetar's, for the console's overview): the
cluster's rates over the last 15 minutes as the gateway sampled them
(:mod:`magnetar.gateway.rate_history`)."""

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


@router.get("/rates-history", summary="The cluster's message rates over the last 15 minutes, and each broker's load now",
            operation_id="Magnetar_getRatesHistory", responses=responses(), dependencies=[SuperUser])
async def get_rates_history(ctx: Context) -> dict[str, Any]:
    """Magnetar's (the console's overview): samples every ``console_rates_interval_s``
    of the sums over the live brokers of ``msgRateIn``, ``msgRateOut``,
    ``msgThroughputIn`` and ``msgThroughputOut``, oldest first, kept by the gateway
    (a restarted gateway starts afresh); ``brokers``: each broker's last load report."""
    return ctx.rates.doc()
