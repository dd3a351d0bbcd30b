"""``/admin/v2/zookeeper`` (Magnetar's; the console's overview): the gateway's ZooKeeper
session and each server of its connect string as ``srvr`` describes it (mode, version,
latency, connections, node count). Superusers only, as the broker stats are."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from magnetar.common.zkstatus import ensemble_status
from magnetar.gateway.deps import Context, SuperUser
from magnetar.gateway.errors import responses

router = APIRouter(prefix="/admin/v2", tags=["zookeeper"])


@router.get("/zookeeper", summary="The gateway's ZooKeeper session and the state of each ZooKeeper server",
            operation_id="Magnetar_getZooKeeperStatus", responses=responses(), dependencies=[SuperUser])
async def get_zookeeper_status(ctx: Context) -> dict[str, Any]:
    """``connected``: the gateway's session; ``root``: its metadata root; ``servers``: each
    server of the connect string (``reachable``, ``mode``, ``version``, ``latencyMs``,
    ``connections``, ``outstanding``, ``nodeCount``, ``zxid``; ``error`` when it could
    not be asked or does not allow ``srvr``)."""
    return {"connected": ctx.zookeeper_up(), "root": ctx.config.zk_root,
            "servers": await ensemble_status(ctx.config.zookeeper)}
