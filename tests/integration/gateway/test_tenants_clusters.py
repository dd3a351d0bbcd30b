"""The gateway's clusters, brokers, tenants and lookup routes against a real broker, with
Pulsar's paths, JSON and status codes; health, readiness and metrics."""

from __future__ import annotations

import asyncio
import json

import httpx
from gateway_support import GatewayCluster, unique

from magnetar.client.admin import AdminClient
from magnetar.testing.pulsarclient import pulsar_client
from magnetar.testing.shell import WarmMagnetar, cli_fails, cli_ok, warm_magnetar

INFO = {"adminRoles": ["ops"], "allowedClusters": ["standalone"]}


async def test_clusters_and_brokers(http: httpx.AsyncClient, gateway_cluster: GatewayCluster):
    assert (await http.get("/admin/v2/clusters")).json() == ["standalone"]
    assert (await http.get("/admin/v2/brokers/standalone")).json() == [gateway_cluster.broker.address]
    cluster = (await http.get("/admin/v2/clusters/standalone")).json()
    assert cluster["brokerServiceUrl"] == gateway_cluster.service_url
    for path in ("/admin/v2/clusters/other", "/admin/v2/brokers/other"):
        r = await http.get(path)
        assert r.status_code == 404 and r.json() == {"reason": "Cluster does not exist"}


async def test_broker_load_report_through_rest_and_cli(http: httpx.AsyncClient, gateway_cluster: GatewayCluster):
    """GET /admin/v2/broker-stats/load-report and ``magnetar admin broker-stats load-report``:
    the report the broker's load manager wrote (Pulsar's LocalBrokerData names)."""
    address = gateway_cluster.broker.address
    r = await http.get("/admin/v2/broker-stats/load-report")
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["brokerId"] == address and report["loadReportType"] == "LocalBrokerData"
    assert report["cpu"]["limit"] > 0 and report["memory"]["usage"] > 0 and report["lastUpdate"] > 0
    assert isinstance(report["bundles"], list) and report["numBundles"] == len(report["bundles"])
    r = await http.get("/admin/v2/broker-stats/load-report", params={"broker": "127.0.0.1:1"})
    assert r.status_code == 404 and "not a live broker" in r.json()["reason"]
    printed = json.loads(cli_ok(await asyncio.to_thread(
        warm_magnetar, "admin", "--admin-url", gateway_cluster.url, "broker-stats", "load-report", "--broker", address)))
    assert printed["brokerId"] == address and printed["numTopics"] >= 0


async def test_registered_clusters_through_rest_and_cli(http: httpx.AsyncClient, gateway_cluster: GatewayCluster):
    """PUT/POST/GET/DELETE /admin/v2/clusters/{c} and ``magnetar admin clusters``: stored
    in ZooKeeper (read back through the other door), named by a tenant's allowed
    clusters; bad input refused with Pulsar's codes and nothing stored."""
    rest_made, cli_made = unique("east"), unique("west")
    data = {"serviceUrl": "http://east.example:8080", "brokerServiceUrl": "pulsar://east.example:6650",
            "brokerServiceUrlTls": "pulsar+ssl://east.example:6651", "authenticationPlugin": "ignored"}
    assert (await http.put(f"/admin/v2/clusters/{rest_made}", json=data)).status_code == 204
    r = await http.put(f"/admin/v2/clusters/{rest_made}", json=data)
    assert r.status_code == 409 and "already exists" in r.json()["reason"]
    r = await http.put("/admin/v2/clusters/standalone", json=data)
    assert r.status_code == 409
    r = await http.post(f"/admin/v2/clusters/{cli_made}", json=data)  # update: it must exist
    assert r.status_code == 404
    for bad, status in (({"serviceUrl": "ftp://x:1"}, 400), ({"brokerServiceUrl": "pulsar://nohost"}, 400),
                        ({"serviceUrl": "http://x:99999"}, 400)):
        r = await http.put(f"/admin/v2/clusters/{cli_made}", json=bad)
        assert r.status_code == status and "Illegal" in r.json()["reason"], r.text
    r = await http.put("/admin/v2/clusters/b%20ad", json=data)
    assert r.status_code == 412 and "Cluster name is not valid" in r.json()["reason"]

    with WarmMagnetar("admin") as shell:
        url = ("--url", gateway_cluster.broker.address)
        cli_ok(shell.run("admin", *url, "clusters", "create", cli_made, "--url", "http://west.example:8080",
                         "--broker-url", "pulsar://west.example:6650"))
        fails = cli_fails(shell.run("admin", *url, "clusters", "create", cli_made, "--url", "http://w:1"))
        assert "already exists" in fails
        assert "Illegal" in cli_fails(shell.run("admin", *url, "clusters", "update", cli_made, "--url", "ftp://w:1"))
        listed = cli_ok(shell.run("admin", "--admin-url", gateway_cluster.url, "clusters", "list")).split()
        assert {"standalone", rest_made, cli_made} <= set(listed) and listed == sorted(listed)
        # What the CLI stored, the REST door answers, and the reverse.
        assert (await http.get(f"/admin/v2/clusters/{cli_made}")).json() == {
            "serviceUrl": "http://west.example:8080", "serviceUrlTls": "",
            "brokerServiceUrl": "pulsar://west.example:6650", "brokerServiceUrlTls": ""}
        got = json.loads(cli_ok(shell.run("admin", *url, "clusters", "get", rest_made)))
        assert got == {k: v for k, v in data.items() if k != "authenticationPlugin"}
        cli_ok(shell.run("admin", "--admin-url", gateway_cluster.url, "clusters", "update", rest_made,
                         "--url", "http://east2.example:8080"))
        assert (await http.get(f"/admin/v2/clusters/{rest_made}")).json()["serviceUrl"] == "http://east2.example:8080"
        assert (await http.get(f"/admin/v2/clusters/{rest_made}")).json()["brokerServiceUrl"] == ""

        # A registered cluster may be a tenant's allowed cluster.
        tenant = unique("multi")
        info = {"adminRoles": [], "allowedClusters": ["standalone", cli_made]}
        assert (await http.put(f"/admin/v2/tenants/{tenant}", json=info)).status_code == 204
        assert (await http.get(f"/admin/v2/tenants/{tenant}")).json()["allowedClusters"] == sorted(info["allowedClusters"])
        assert (await http.delete(f"/admin/v2/tenants/{tenant}")).status_code == 204

        r = await http.delete("/admin/v2/clusters/standalone")
        assert r.status_code == 412 and "Cluster not empty" in r.json()["reason"]
        cli_ok(shell.run("admin", *url, "clusters", "delete", cli_made))
        assert "does not exist" in cli_fails(shell.run("admin", *url, "clusters", "get", cli_made))
    assert (await http.delete(f"/admin/v2/clusters/{rest_made}")).status_code == 204
    for gone in (rest_made, cli_made):
        assert (await http.get(f"/admin/v2/clusters/{gone}")).status_code == 404
        assert (await http.delete(f"/admin/v2/clusters/{gone}")).status_code == 404
    assert (await http.get("/admin/v2/clusters")).json() == ["standalone"]


async def test_tenant_lifecycle_with_pulsar_codes(http: httpx.AsyncClient, gateway_cluster: GatewayCluster):
    name = unique("acme")
    r = await http.put(f"/admin/v2/tenants/{name}", json=INFO)
    assert r.status_code == 204 and r.content == b""
    assert name in (await http.get("/admin/v2/tenants")).json()
    assert (await http.get(f"/admin/v2/tenants/{name}")).json() == INFO

    r = await http.put(f"/admin/v2/tenants/{name}", json=INFO)
    assert r.status_code == 409 and "already exists" in r.json()["reason"]

    updated = {"adminRoles": ["ops", "dev"], "allowedClusters": ["standalone"]}
    assert (await http.post(f"/admin/v2/tenants/{name}", json=updated)).status_code == 204
    assert (await http.get(f"/admin/v2/tenants/{name}")).json() == {"adminRoles": ["dev", "ops"], "allowedClusters": ["standalone"]}

    # A tenant with a namespace cannot be deleted (Pulsar: 409 "still has active namespaces").
    async with AdminClient(gateway_cluster.service_url) as admin:
        await admin.create_namespace(f"{name}/ns")
        r = await http.delete(f"/admin/v2/tenants/{name}")
        assert r.status_code == 409 and r.json()["reason"] == (
            f"The tenant still has active namespaces: tenant {name} has 1 namespace ({name}/ns); delete them first"
        )
        await admin.delete_namespace(f"{name}/ns")
    assert (await http.delete(f"/admin/v2/tenants/{name}")).status_code == 204
    r = await http.get(f"/admin/v2/tenants/{name}")
    assert r.status_code == 404 and "does not exist" in r.json()["reason"]
    r = await http.delete(f"/admin/v2/tenants/{name}")
    assert r.status_code == 404


async def test_bad_tenants_are_refused_and_change_nothing(http: httpx.AsyncClient):
    name = unique("bad")
    cases = [
        ({"allowedClusters": []}, 412, "Clusters can not be empty"),
        ({"allowedClusters": ["mars"]}, 412, "Clusters do not exist"),
        ({"allowedClusters": [" "]}, 412, "Clusters can not be empty"),
    ]
    for body, status, reason in cases:
        r = await http.put(f"/admin/v2/tenants/{name}", json=body)
        assert (r.status_code, reason in r.json()["reason"]) == (status, True), r.text
    r = await http.put(f"/admin/v2/tenants/{name}", content=b"not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["reason"].startswith("Invalid request")
    r = await http.put("/admin/v2/tenants/b%20ad", json=INFO)
    assert r.status_code == 412 and r.json() == {"reason": "Tenant name is not valid"}
    assert name not in (await http.get("/admin/v2/tenants")).json()
    r = await http.post(f"/admin/v2/tenants/{name}", json=INFO)
    assert r.status_code == 404


async def test_lookup_names_the_owning_broker(http: httpx.AsyncClient, gateway_cluster: GatewayCluster):
    r = await http.get(f"/lookup/v2/topic/persistent/public/default/{unique('t')}")
    assert r.status_code == 200
    body = r.json()
    # Pulsar's field: the owner's pulsar:// URL; Magnetar's own address in nativeUrl.
    assert body["brokerUrl"] == gateway_cluster.broker.pulsar_url != ""
    assert body["nativeUrl"] == gateway_cluster.service_url
    assert body["brokerUrlTls"] == ""  # the broker serves no TLS
    assert set(body) == {"brokerUrl", "brokerUrlTls", "httpUrl", "httpUrlTls", "nativeUrl", "brokerUrlSsl"}
    np = (await http.get(f"/lookup/v2/topic/non-persistent/public/default/{unique('np')}")).json()
    assert np["brokerUrl"] == gateway_cluster.broker.pulsar_url  # non-persistent topics are looked up the same way
    assert (await http.get("/lookup/v2/topic/kafka/public/default/t")).status_code == 405
    assert (await http.get("/lookup/v2/topic/persistent/public/nosuchns/t")).status_code == 404


async def test_pulsar_client_with_the_gateways_http_url(http: httpx.AsyncClient, gateway_cluster: GatewayCluster):
    """pulsar-client given ``http://gateway`` as its service URL reads partition counts
    there (``/admin/v2/.../partitions``)."""
    partitioned, plain = unique("four"), unique("plain")
    assert (await http.put(f"/admin/v2/persistent/public/default/{partitioned}/partitions", json=4)).status_code == 204

    def partitions() -> tuple[list[str], list[str]]:
        client = pulsar_client(gateway_cluster.url, operation_timeout_seconds=10)
        try:
            return client.get_topic_partitions(partitioned), client.get_topic_partitions(plain)
        finally:
            client.close()

    four, one = await asyncio.to_thread(partitions)
    assert four == [f"persistent://public/default/{partitioned}-partition-{i}" for i in range(4)]
    assert one == [f"persistent://public/default/{plain}"]


async def test_health_readiness_metrics_and_openapi(http: httpx.AsyncClient):
    assert (await http.get("/healthz")).json()["status"] == "ok"
    ready = (await http.get("/readyz")).json()
    assert ready["status"] == "ready" and ready["zookeeper"] and ready["brokers"] == 1
    await http.get("/admin/v2/tenants/public")
    metrics = (await http.get("/metrics")).text
    assert 'magnetar_gateway_requests_total{method="GET",route="/admin/v2/tenants/{tenant}",status="200"}' in metrics
    spec = (await http.get("/openapi.json")).json()
    op = spec["paths"]["/admin/v2/tenants/{tenant}"]["put"]
    assert op["operationId"] == "TenantsBase_createTenant" and op["summary"]
    assert {"409", "412", "503"} <= set(op["responses"])
    assert (await http.get("/docs")).status_code == 200


async def test_broker_health_check_produces_and_reads_back_a_message(http: httpx.AsyncClient):
    # Pulsar's GET /admin/v2/brokers/health: "ok" once a message went through the brokers.
    topic = "/admin/v2/persistent/pulsar/standalone/healthcheck"
    ids = []
    for params in ({}, {"topicVersion": "V2"}, {"topicVersion": "V1"}):
        r = await http.get("/admin/v2/brokers/health", params=params)
        assert (r.status_code, r.text) == (200, "ok"), r.text
        last = (await http.get(f"{topic}/lastMessageId")).json()
        ids.append((last["ledgerId"], last["entryId"]))
    assert ids == sorted(set(ids))  # each check stored a message of its own
    assert (await http.get("/admin/v2/namespaces/pulsar")).json() == ["pulsar/standalone"]
    assert (await http.get(f"{topic}/stats")).json()["subscriptions"] == {}  # the reader left nothing behind
    for params, reason in (({"topicVersion": "V3"}, "Invalid request: query.topicVersion"),
                           ({"brokerId": "127.0.0.1:1"}, "brokerId is not supported")):
        r = await http.get("/admin/v2/brokers/health", params=params)
        assert r.status_code == 400 and r.json()["reason"].startswith(reason), r.text
    assert (await http.get(f"{topic}/lastMessageId")).json()["entryId"] == ids[-1][1]  # refused: nothing written
