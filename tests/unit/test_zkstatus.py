"""common/zkstatus.py: a connect string's servers and their ``srvr`` answers."""

from __future__ import annotations

import asyncio

from magnetar.common.netutil import free_port
from magnetar.common.zkstatus import ensemble_status, parse_srvr, servers_of

SRVR = """Zookeeper version: 3.8.0-5a02a05eddb59aee6ac762f7ea82e92a68eb9c0f, built on 2022-02-25 08:49 UTC
Latency min/avg/max: 0/0.4/12
Received: 1234
Sent: 1240
Connections: 5
Outstanding: 0
Zxid: 0x2a
Mode: leader
Node count: 87
"""


def test_servers_of_a_connect_string_leave_the_chroot_out_and_default_the_port() -> None:
    assert servers_of("a:2182,b,c:2183/magnetar/x") == ["a:2182", "b:2181", "c:2183"]
    assert servers_of(" 127.0.0.1:1 ") == ["127.0.0.1:1"]


def test_srvr_fields_are_read_and_odd_lines_ignored() -> None:
    assert parse_srvr(SRVR + "garbage\nLatency min/avg/max: x/y\n") == {
        "version": "3.8.0-5a02a05eddb59aee6ac762f7ea82e92a68eb9c0f", "latencyMs": {"min": 0.0, "avg": 0.4, "max": 12.0},
        "received": 1234, "sent": 1240, "connections": 5, "outstanding": 0, "zxid": "0x2a", "mode": "leader",
        "nodeCount": 87,
    }


async def test_each_server_is_asked_and_one_that_refuses_or_is_gone_says_why() -> None:
    async def answer(text: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert await reader.readexactly(4) == b"srvr"
        writer.write(text.encode())
        await writer.drain()
        writer.close()

    good = await asyncio.start_server(lambda r, w: answer(SRVR, r, w), "127.0.0.1", 0)
    refusing = await asyncio.start_server(
        lambda r, w: answer("srvr is not executed because it is not in the whitelist.\\n", r, w), "127.0.0.1", 0)
    gone = free_port()
    ports = [s.sockets[0].getsockname()[1] for s in (good, refusing)]
    try:
        status = await ensemble_status(f"127.0.0.1:{ports[0]},127.0.0.1:{ports[1]},127.0.0.1:{gone}/root")
    finally:
        for server in (good, refusing):
            server.close()
            await server.wait_closed()
    assert [s["reachable"] for s in status] == [True, True, False]
    assert status[0]["mode"] == "leader" and status[0]["nodeCount"] == 87
    assert "4lw.commands.whitelist" in status[1]["error"] and "mode" not in status[1]
    assert status[2]["error"].startswith(f"cannot ask 127.0.0.1:{gone}:")
