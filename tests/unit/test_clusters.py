"""The cluster core (magnetar.broker.clusters): names, URL checks, the brokers' own
cluster, and deletion refused while a namespace replicates to the cluster."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from magnetar.broker.clusters import REPLICATION_CLUSTERS_KEY, ClusterAdmin, ClusterData
from magnetar.broker.tenant_info import TenantInfo
from magnetar.common.errors import (
    AlreadyExists,
    ClusterNotFound,
    InvalidArgument,
    PreconditionFailed,
)


class MemoryClusters:
    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {}

    async def create_cluster(self, name: str, data: Mapping[str, Any]) -> None:
        if name in self.docs:
            raise AlreadyExists(name)
        self.docs[name] = dict(data)

    async def get_cluster(self, name: str) -> dict[str, Any]:
        if name not in self.docs:
            raise ClusterNotFound("Cluster does not exist")
        return dict(self.docs[name])

    async def update_cluster(self, name: str, fn: Callable[[dict[str, Any]], Mapping[str, Any]]) -> dict[str, Any]:
        self.docs[name] = dict(fn(await self.get_cluster(name)))
        return self.docs[name]

    async def delete_cluster(self, name: str) -> None:
        await self.get_cluster(name)
        del self.docs[name]

    async def list_clusters(self) -> list[str]:
        return sorted(self.docs)


class MemoryNamespaces:
    def __init__(self, policies: dict[str, dict[str, Any]]) -> None:
        self.policies = policies

    async def list_tenants(self) -> list[str]:
        return sorted({ns.split("/")[0] for ns in self.policies})

    async def list_namespaces(self, tenant: str) -> list[str]:
        return sorted(ns for ns in self.policies if ns.startswith(tenant + "/"))

    async def get_policies(self, tenant: str, namespace: str) -> dict[str, Any]:
        return self.policies[f"{tenant}/{namespace}"]


def admin(policies: dict[str, dict[str, Any]] | None = None) -> tuple[ClusterAdmin, MemoryClusters]:
    store = MemoryClusters()
    return ClusterAdmin(store, MemoryNamespaces(policies or {}), "standalone"), store


EAST = ClusterData(service_url="http://east:8080", broker_service_url="pulsar://e1:6650,e2:6650",
                   broker_service_url_tls="pulsar+ssl://e1:6651")


async def test_create_get_update_list_delete():
    clusters, store = admin()
    assert await clusters.names() == ["standalone"]
    await clusters.create("east", EAST)
    assert await clusters.get("east") == EAST
    assert await clusters.names() == ["east", "standalone"]
    await clusters.update("east", ClusterData(service_url_tls="https://east:8443"))
    assert await clusters.get("east") == ClusterData(service_url_tls="https://east:8443")
    await clusters.delete("east")
    assert store.docs == {} and await clusters.names() == ["standalone"]
    with pytest.raises(ClusterNotFound):
        await clusters.get("east")
    with pytest.raises(ClusterNotFound):
        await clusters.update("east", EAST)


async def test_the_brokers_own_cluster():
    clusters, store = admin()
    assert await clusters.get("standalone") == ClusterData()  # nothing stored: the doors answer live URLs
    with pytest.raises(AlreadyExists):
        await clusters.create("standalone", EAST)
    await clusters.update("standalone", EAST)  # stored on first update
    assert await clusters.get("standalone") == EAST
    with pytest.raises(PreconditionFailed, match="Cluster not empty"):
        await clusters.delete("standalone")
    assert "standalone" in store.docs


@pytest.mark.parametrize("data", [
    ClusterData(service_url="https://x:1"), ClusterData(service_url="http://x"), ClusterData(service_url="x:80"),
    ClusterData(broker_service_url="pulsar://x:1/path"), ClusterData(broker_service_url="pulsar://x:1,:2"),
    ClusterData(broker_service_url_tls="pulsar://x:1"), ClusterData(service_url_tls="https://x:70000"),
    ClusterData(service_url="http://x:port"),
])
async def test_bad_urls_are_refused_and_nothing_is_stored(data: ClusterData):
    clusters, store = admin()
    with pytest.raises(InvalidArgument, match="Illegal"):
        await clusters.create("east", data)
    assert store.docs == {}


@pytest.mark.parametrize("name", ["", "b ad", "a/b", "ü"])
async def test_bad_names_are_refused(name: str):
    clusters, store = admin()
    with pytest.raises(PreconditionFailed, match="Cluster name is not valid"):
        await clusters.create(name, EAST)
    assert store.docs == {}


async def test_a_cluster_a_namespace_replicates_to_is_not_deleted():
    clusters, store = admin({"acme/orders": {REPLICATION_CLUSTERS_KEY: ["standalone", "east"]}, "acme/other": {}})
    await clusters.create("east", EAST)
    with pytest.raises(PreconditionFailed, match="acme/orders"):
        await clusters.delete("east")
    assert "east" in store.docs
    assert await clusters.missing(["east", "mars", "standalone"]) == ["mars"]


def test_a_tenant_may_be_allowed_on_registered_clusters():
    info = TenantInfo.of([], ["east", "standalone"])
    assert info.checked(["east", "standalone"]) == info
    with pytest.raises(PreconditionFailed, match="Clusters do not exist: east"):
        info.checked("standalone")
