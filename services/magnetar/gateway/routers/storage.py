"""Beyond Pulsar's admin API: the storage layer as an operator sees it.

``/admin/v2/bookies`` (registered bookies, writable or read-only, free space),
``/admin/v2/ledgers/{id}`` (a ledger's metadata, as ``magnetar shell ledgermetadata``
prints it), ``/admin/v2/auditor`` (leader, under-replicated ledgers, progress) and
``POST /admin/v2/auditor/audit`` (run the periodic check now, on the leader).

With authentication on, only the gateway's superuser roles may use them (403 otherwise).
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Path, Query

from magnetar.auditor.rpc.client import fetch_status, forward_trigger
from magnetar.common.errors import MagnetarError, NotConnected
from magnetar.gateway.deps import Context, SuperUser
from magnetar.gateway.errors import responses
from magnetar.gateway.models import PulsarModel
from magnetar.gateway.protojson import to_json
from magnetar.metadata.election import leader_of

# Served from ZooKeeper and the bookies, which no broker authorizes: superusers only.
router = APIRouter(prefix="/admin/v2", tags=["storage"], dependencies=[SuperUser])
BOOKIE_INFO_TIMEOUT_S = 3.0


class BookieState(PulsarModel):
    bookieId: str
    state: str  # "writable" | "readonly"
    reachable: bool
    diskFreeBytes: int | None = None
    diskTotalBytes: int | None = None
    ledgers: int | None = None
    version: str | None = None
    error: str | None = None


@router.get("/bookies", summary="List the registered bookies with their state and free space",
            operation_id="Magnetar_getBookies", responses=responses())
async def get_bookies(ctx: Context) -> list[BookieState]:
    registry = ctx.ledgers.registry
    writable, read_only = await asyncio.gather(registry.list_writable(), registry.list_read_only())
    states = [(b, "writable") for b in writable] + [(b, "readonly") for b in read_only]
    return list(await asyncio.gather(*(_bookie_state(ctx, b, s) for b, s in sorted(states))))


async def _bookie_state(ctx: Context, bookie: str, state: str) -> BookieState:
    try:
        info = await asyncio.wait_for(ctx.ledgers.pool.get(bookie).info(), BOOKIE_INFO_TIMEOUT_S)
    except (MagnetarError, TimeoutError) as exc:
        reason = exc.message if isinstance(exc, MagnetarError) else f"no answer within {BOOKIE_INFO_TIMEOUT_S:g} s"
        return BookieState(bookieId=bookie, state=state, reachable=False, error=reason)
    return BookieState(
        bookieId=bookie, state=state, reachable=True, diskFreeBytes=info.disk_free_bytes,
        diskTotalBytes=info.disk_total_bytes, ledgers=info.ledger_count, version=info.version,
    )


@router.get("/ledgers/{ledger_id}", summary="Get a ledger's metadata (ensemble, quorums, state, fragments)",
            operation_id="Magnetar_getLedgerMetadata", responses=responses(400, 404))
async def get_ledger(ctx: Context, ledger_id: int = Path(ge=0, le=2**63 - 1)) -> dict[str, Any]:
    metadata = await ctx.ledgers.ledger_metadata(ledger_id)
    return {"ledgerId": ledger_id, **metadata.to_dict()}


@router.get("/auditor", summary="The auditor: leader, under-replicated ledgers and replication progress",
            operation_id="Magnetar_getAuditorStatus", responses=responses())
async def get_auditor(ctx: Context, maxLedgers: int = Query(1000, ge=1, le=100_000)) -> dict[str, Any]:  # noqa: N803
    status = await fetch_status(await _leader(ctx), maxLedgers, tls=ctx.tls, token=ctx.service_token)
    return to_json(status)


@router.post("/auditor/audit", summary="Run the auditor's check of every closed ledger now (on the leader)",
             operation_id="Magnetar_triggerAudit", responses=responses())
async def trigger_audit(ctx: Context) -> dict[str, Any]:
    report = await forward_trigger(await _leader(ctx), tls=ctx.tls, token=ctx.service_token)
    return to_json(report)


async def _leader(ctx: Context) -> str:
    leader = await leader_of(ctx.session, ctx.session.paths.auditor_election())
    if not leader:
        raise NotConnected("no auditor is running: start one with `magnetar auditor`")
    return leader
