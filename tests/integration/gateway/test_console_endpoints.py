"""The REST endpoints the web console reads that Pulsar lacks, on the shared gateway
cluster: a namespace's topics' stats in one call."""

from __future__ import annotations

import httpx
import pytest
from gateway_support import GatewayCluster, eventually, unique

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient

pytestmark = pytest.mark.integration


async def test_namespace_topic_stats_in_one_call(http: httpx.AsyncClient, gateway_cluster: GatewayCluster):
    namespace = f"public/{unique('ns')}"
    async with AdminClient(gateway_cluster.service_url) as admin:
        await admin.create_namespace(namespace)
    full = f"persistent://{namespace}"
    assert (await http.put(f"/admin/v2/persistent/{namespace}/idle")).status_code == 204
    async with mg.Client(gateway_cluster.service_url) as client:
        consumer = await client.subscribe(f"{full}/busy", "waiting")
        producer = await client.create_producer(f"{full}/busy")
        for i in range(5):
            await producer.send(f"m{i}".encode())

        async def busy_with_backlog() -> dict | None:
            body = (await http.get(f"/admin/v2/namespaces/{namespace}/topicStats")).json()
            busy = body["topics"].get(f"{full}/busy")
            return body if busy and busy["msgBacklog"] == 5 and busy["msgRateIn"] > 0 else None

        body = await eventually(busy_with_backlog)
        assert body, (await http.get(f"/admin/v2/namespaces/{namespace}/topicStats")).json()
        busy = body["topics"][f"{full}/busy"]
        assert (busy["producerCount"], busy["subscriptionCount"], busy["consumerCount"]) == (1, 1, 1)
        assert busy["storageSize"] > 0
        assert body["brokers"] == [gateway_cluster.broker.address] and body["unreachable"] == []
        assert f"{full}/idle" not in body["topics"]  # created, never loaded
        await producer.close()
        await consumer.close()


async def test_namespace_topic_stats_of_a_namespace_that_does_not_exist(http: httpx.AsyncClient):
    r = await http.get(f"/admin/v2/namespaces/public/{unique('none')}/topicStats")
    assert r.status_code == 404 and "does not exist" in r.json()["reason"]
    r = await http.get("/admin/v2/namespaces/public/bad%20name/topicStats")
    assert r.status_code == 412


async def test_rates_history_has_a_sample_of_each_live_broker_from_the_start(http: httpx.AsyncClient,
                                                                             gateway_cluster: GatewayCluster):
    async def sampled() -> dict | None:
        body = (await http.get("/admin/v2/broker-stats/rates-history")).json()
        return body if body["samples"] else None

    body = await eventually(sampled)
    assert body, "no sample"
    assert body["windowSeconds"] == 900 and body["intervalSeconds"] > 0
    latest = body["samples"][-1]
    assert latest["brokers"] == 1 and latest["msgRateIn"] >= 0 and latest["timestamp"] > 0
    report = body["brokers"][gateway_cluster.broker.address]
    assert report["brokerId"] == gateway_cluster.broker.address and report["numBundles"] >= 0


async def test_zookeeper_status_names_each_server_with_its_mode(http: httpx.AsyncClient, gateway_cluster: GatewayCluster):
    body = (await http.get("/admin/v2/zookeeper")).json()
    assert body["connected"] is True and body["root"] == gateway_cluster.zk_root
    (server,) = body["servers"]
    assert server["address"] == gateway_cluster.zk_connect and server["reachable"] is True, server
    assert server["mode"] == "standalone" and server["version"].startswith("3."), server
    assert server["nodeCount"] > 10 and server["connections"] >= 3, server  # the broker's, the gateway's, the bookies'
