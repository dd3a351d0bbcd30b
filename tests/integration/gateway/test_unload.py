"""Unloading a topic, a bundle or a namespace through the gateway; bundles data."""

from __future__ import annotations

import httpx
from gateway_support import GatewayCluster, unique

import magnetar.asyncio as mg


async def test_bundles_data_names_boundaries_and_owners(http: httpx.AsyncClient, gateway_cluster: GatewayCluster):
    data = (await http.get("/admin/v2/namespaces/public/default/bundles")).json()
    assert data["numBundles"] == len(data["owners"]) >= 1
    assert data["boundaries"][0] == "0x00000000" and data["boundaries"][-1] == "0xffffffff"
    assert len(data["boundaries"]) == data["numBundles"] + 1
    r = await http.get("/admin/v2/namespaces/public/nosuch/bundles")
    assert r.status_code == 404 and r.json()["reason"]


async def test_unloads_keep_clients_working(http: httpx.AsyncClient, gateway_cluster: GatewayCluster):
    topic = f"persistent://public/default/{unique('unload')}"
    client = mg.Client(gateway_cluster.service_url)
    try:
        producer = await client.create_producer(topic)
        consumer = await client.subscribe(topic, "s")
        await producer.send(b"before")
        local = topic.rsplit("/", 1)[1]
        assert (await http.put(f"/admin/v2/persistent/public/default/{local}/unload")).status_code == 204
        owners = (await http.get("/admin/v2/namespaces/public/default/bundles")).json()["owners"]
        bundle = next(b for b, owner in owners.items() if owner)
        assert (await http.put(f"/admin/v2/namespaces/public/default/{bundle}/unload")).status_code == 204
        assert (await http.put("/admin/v2/namespaces/public/default/unload")).status_code == 204
        await producer.send(b"after")
        got = [(await consumer.receive(10_000)).data() for _ in range(2)]
        assert got == [b"before", b"after"]
    finally:
        await client.close()
    r = await http.put("/admin/v2/namespaces/public/nosuch/unload")
    assert r.status_code == 404
    r = await http.put("/admin/v2/persistent/public/default/bad%01name/unload")
    assert r.status_code == 412 and r.json()["reason"].startswith("Topic name is not valid")
