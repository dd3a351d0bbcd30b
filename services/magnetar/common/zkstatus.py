"""ZooKeeper's servers as an operator sees them: each server of a connect string asked
``srvr`` (one of ZooKeeper's four-letter words; the server must list it in
``4lw.commands.whitelist``, as the servers Magnetar starts do). Read by the gateway's
``GET /admin/v2/zookeeper`` (the console's overview)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

DEFAULT_PORT = 2181
NOT_WHITELISTED = "is not executed because it is not in the whitelist"


def servers_of(connect: str) -> list[str]:
    """The ``host:port`` of each server of a connect string (its chroot left out)."""
    hosts = connect.split("/", 1)[0]
    return [h if ":" in h else f"{h}:{DEFAULT_PORT}" for h in (p.strip() for p in hosts.split(",")) if h]


def parse_srvr(text: str) -> dict[str, Any]:
    """The fields of a ``srvr`` answer, named as the REST API answers them."""
    out: dict[str, Any] = {}
    counts = {"Received": "received", "Sent": "sent", "Connections": "connections",
              "Outstanding": "outstanding", "Node count": "nodeCount"}  # fmt: skip
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if not sep:
            continue
        if key == "Zookeeper version":
            out["version"] = value.split(",", 1)[0]
        elif key == "Latency min/avg/max":
            parts = value.split("/")
            if len(parts) == 3:
                with contextlib.suppress(ValueError):
                    out["latencyMs"] = dict(zip(("min", "avg", "max"), map(float, parts), strict=True))
        elif key in counts:
            with contextlib.suppress(ValueError):
                out[counts[key]] = int(value)
        elif key == "Zxid":
            out["zxid"] = value
        elif key == "Mode":
            out["mode"] = value
    return out


async def server_status(address: str, timeout_s: float = 2.0) -> dict[str, Any]:
    """One server's ``srvr`` answer; ``reachable`` false (with ``error``) when it cannot be
    asked, ``error`` alone when it answers but does not allow ``srvr``."""
    host, _, port = address.rpartition(":")
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(host, int(port))
            try:
                writer.write(b"srvr")
                await writer.drain()
                data = await reader.read()
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except (OSError, TimeoutError, ValueError) as exc:
        reason = "no answer in time" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
        return {"address": address, "reachable": False, "error": f"cannot ask {address}: {reason}"}
    text = data.decode(errors="replace")
    if NOT_WHITELISTED in text:
        return {"address": address, "reachable": True,
                "error": "srvr is not in this server's 4lw.commands.whitelist: add it to see its state"}
    return {"address": address, "reachable": True, **parse_srvr(text)}


async def ensemble_status(connect: str, timeout_s: float = 2.0) -> list[dict[str, Any]]:
    """:func:`server_status` of every server of ``connect``, asked together."""
    return list(await asyncio.gather(*(server_status(a, timeout_s) for a in servers_of(connect))))
