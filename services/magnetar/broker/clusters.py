"""Pulsar's clusters: the cluster the brokers run in (``cluster_name``) and the clusters
an operator registers (``PUT /admin/v2/clusters/{cluster}``) with their ClusterData.

A registered cluster is a name and its service URLs, stored in ZooKeeper; Magnetar does
not replicate to it (no geo-replication): it may be named by tenants' allowed clusters
and namespaces' replication clusters, as in Pulsar. The brokers' own cluster always
exists; its data is what was stored for it, else nothing (the doors answer its live URLs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from magnetar.common.errors import (
    AlreadyExists,
    ClusterNotFound,
    InvalidArgument,
    NotFound,
    PreconditionFailed,
)

_NAME = re.compile(r"[-=:.\w]+", re.ASCII)
"""Pulsar's NamedEntity.checkName."""
_SCHEMES = {
    "service_url": ("http",),
    "service_url_tls": ("https",),
    "broker_service_url": ("pulsar", "magnetar"),
    "broker_service_url_tls": ("pulsar+ssl", "magnetar+ssl"),
}
REPLICATION_CLUSTERS_KEY = "replication_clusters"
"""The key of a namespace's replication clusters in its policies document."""


@dataclass(frozen=True)
class ClusterData:
    """Pulsar's ClusterData: how clients and other clusters reach a cluster ("" unset)."""

    service_url: str = ""
    service_url_tls: str = ""
    broker_service_url: str = ""
    broker_service_url_tls: str = ""

    def checked(self) -> ClusterData:
        """This data, if each URL set is ``scheme://host:port[,host:port…]`` of its kind.

        Raises:
            InvalidArgument: naming the field and its value.
        """
        for field, schemes in _SCHEMES.items():
            url = getattr(self, field)
            if url and not _valid_url(url, schemes):
                raise InvalidArgument(
                    f"Illegal {field}: {url!r} (expected {' or '.join(s + '://host:port' for s in schemes)})"
                )
        return self

    def to_doc(self) -> dict[str, str]:
        return {k: v for k, v in asdict(self).items() if v}

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> ClusterData:
        return cls(**{k: str(doc.get(k) or "") for k in _SCHEMES})


def _valid_url(url: str, schemes: tuple[str, ...]) -> bool:
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in schemes or not rest:
        return False
    for host in rest.rstrip("/").split(","):
        try:
            parts = urlsplit(f"{scheme}://{host}")
            if not parts.hostname or parts.port is None or parts.path not in ("", "/"):
                return False
        except ValueError:  # a port that is no number or out of range
            return False
    return True


def check_cluster_name(name: str) -> str:
    """Raises: PreconditionFailed: not a Pulsar entity name (Pulsar's 412)."""
    if not _NAME.fullmatch(name or ""):
        raise PreconditionFailed(f"Cluster name is not valid: {name!r}")
    return name


class ClusterDocuments(Protocol):
    """What :class:`ClusterAdmin` needs from the metadata stores."""

    async def create_cluster(self, name: str, data: Mapping[str, Any]) -> None: ...
    async def get_cluster(self, name: str) -> dict[str, Any]: ...
    async def update_cluster(self, name: str, fn: Any) -> dict[str, Any]: ...
    async def delete_cluster(self, name: str) -> None: ...
    async def list_clusters(self) -> list[str]: ...


class NamespaceDocuments(Protocol):
    async def list_tenants(self) -> list[str]: ...
    async def list_namespaces(self, tenant: str) -> list[str]: ...
    async def get_policies(self, tenant: str, namespace: str) -> dict[str, Any]: ...


class ClusterAdmin:
    """Create, update, get, delete and list clusters (this one included)."""

    def __init__(self, clusters: ClusterDocuments, namespaces: NamespaceDocuments, own: str) -> None:
        self._clusters = clusters
        self._namespaces = namespaces
        self.own = own

    async def names(self) -> list[str]:
        """Every cluster: this one and the registered ones, sorted."""
        return sorted({self.own, *await self._clusters.list_clusters()})

    async def create(self, name: str, data: ClusterData) -> None:
        """Raises: PreconditionFailed (bad name), InvalidArgument (bad URL), AlreadyExists."""
        check_cluster_name(name)
        data.checked()
        if name == self.own:
            raise AlreadyExists(f"Cluster already exists: {name} (the brokers' own cluster)")
        await self._clusters.create_cluster(name, data.to_doc())

    async def update(self, name: str, data: ClusterData) -> None:
        """Replace a cluster's data (this cluster's too). Raises: InvalidArgument, ClusterNotFound."""
        check_cluster_name(name)
        data.checked()
        if name == self.own:
            try:
                await self._clusters.create_cluster(name, data.to_doc())
                return
            except AlreadyExists:
                pass
        await self._clusters.update_cluster(name, lambda _doc: data.to_doc())

    async def get(self, name: str) -> ClusterData:
        """Raises: ClusterNotFound."""
        try:
            return ClusterData.from_doc(await self._clusters.get_cluster(name))
        except ClusterNotFound:
            if name == self.own:
                return ClusterData()
            raise

    async def exists(self, name: str) -> bool:
        return name in await self.names()

    async def missing(self, names: list[str] | tuple[str, ...]) -> list[str]:
        """The names that are no cluster."""
        known = await self.names()
        return [n for n in names if n not in known]

    async def delete(self, name: str) -> None:
        """Raises: ClusterNotFound; PreconditionFailed: the brokers' own cluster, or a
        namespace replicates to it (Pulsar's 412 ``Cluster not empty``)."""
        if name == self.own:
            raise PreconditionFailed(f"Cluster not empty: {name} is the cluster the brokers run in")
        await self._clusters.get_cluster(name)
        users = await self.namespaces_using(name)
        if users:
            raise PreconditionFailed(f"Cluster not empty: namespaces replicate to {name}: {', '.join(users)}")
        await self._clusters.delete_cluster(name)

    async def namespaces_using(self, name: str) -> list[str]:
        """The namespaces whose replication clusters name ``name``."""
        out: list[str] = []
        for tenant in await self._namespaces.list_tenants():
            try:
                namespaces = await self._namespaces.list_namespaces(tenant)
            except NotFound:
                continue
            for ns in namespaces:
                try:
                    doc = await self._namespaces.get_policies(*ns.split("/", 1))
                except NotFound:
                    continue
                if name in (doc.get(REPLICATION_CLUSTERS_KEY) or ()):
                    out.append(ns)
        return out

