"""The gateway's storage routes: bookies, ledger metadata, the auditor."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from gateway_support import GatewayCluster, unique

import magnetar.asyncio as mg
from magnetar.testing.processes import AuditorProcess, ServiceFactory


async def test_bookies_are_listed_with_state_and_free_space(http: httpx.AsyncClient, gateway_cluster: GatewayCluster):
    bookies = (await http.get("/admin/v2/bookies")).json()
    assert [b["bookieId"] for b in bookies] == sorted(b.address for b in gateway_cluster.bookies)
    for b in bookies:
        assert b["state"] == "writable" and b["reachable"] is True
        assert 0 < b["diskFreeBytes"] <= b["diskTotalBytes"]
        assert b["version"]


async def test_ledger_metadata_of_a_topics_ledger(http: httpx.AsyncClient, gateway_cluster: GatewayCluster):
    client = mg.Client(gateway_cluster.service_url)
    try:
        producer = await client.create_producer(f"persistent://public/default/{unique('ledger')}")
        mid = await producer.send(b"x")
    finally:
        await client.close()
    r = await http.get(f"/admin/v2/ledgers/{mid.ledger_id()}")
    assert r.status_code == 200
    doc = r.json()
    assert doc["ledgerId"] == mid.ledger_id()
    assert (doc["ensemble_size"], doc["write_quorum"], doc["ack_quorum"]) == (2, 2, 2)
    assert set(doc["fragments"][0]["bookies"]) == {b.address for b in gateway_cluster.bookies}
    assert (await http.get("/admin/v2/ledgers/999999999")).status_code == 404
    for bad in ("-1", "abc"):
        r = await http.get(f"/admin/v2/ledgers/{bad}")
        assert r.status_code == 400 and r.json()["reason"]


async def test_auditor_status_and_audit(http: httpx.AsyncClient, gateway_cluster: GatewayCluster, tmp_path: Path):
    r = await http.get("/admin/v2/auditor")
    assert r.status_code == 503 and "no auditor is running" in r.json()["reason"]
    assert (await http.post("/admin/v2/auditor/audit")).status_code == 503

    auditors = ServiceFactory(AuditorProcess, gateway_cluster.zk_connect, gateway_cluster.zk_root, tmp_path)
    try:
        auditor = await asyncio.to_thread(auditors)
        for _ in range(100):
            r = await http.get("/admin/v2/auditor")
            if r.status_code == 200 and r.json()["isLeader"]:
                break
            await asyncio.sleep(0.1)
        status = r.json()
        assert r.status_code == 200, r.text
        assert status["leaderId"] == auditor.address and status["underReplicatedCount"] == 0
        report = (await http.post("/admin/v2/auditor/audit")).json()
        assert report["auditorId"] == auditor.address and report["ledgersMarked"] == 0
    finally:
        auditors.kill_all()
