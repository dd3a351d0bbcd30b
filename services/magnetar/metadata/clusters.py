"""Clusters in ZooKeeper: one znode per cluster holding its data (service URLs, JSON),
under ``<root>/admin/clusters`` (layout in :mod:`magnetar.metadata.paths`).

What a cluster's data may hold, and which clusters may be deleted, is the broker's
business (:mod:`magnetar.broker.clusters`); this store only keeps the documents.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from magnetar.common.errors import AlreadyExists, ClusterNotFound, InvalidArgument, NotFound
from magnetar.metadata.codec import decode, encode
from magnetar.metadata.errors import NodeExists
from magnetar.metadata.session import ZkSession
from magnetar.metadata.versioned import read_modify_write

Document = dict[str, Any]


class ZkClusterStore:
    """Typed cluster metadata: create, get, update, delete, list."""

    def __init__(self, session: ZkSession) -> None:
        self._session = session

    async def create_cluster(self, name: str, data: Mapping[str, Any]) -> None:
        """Store cluster ``name`` with ``data``.

        Raises:
            InvalidArgument: a name that is no znode name.
            AlreadyExists: the cluster exists.
        """
        try:
            await self._session.create(self._session.paths.cluster(name), encode(data), makepath=True)
        except NodeExists as exc:
            raise AlreadyExists(f"Cluster already exists: {name}") from exc

    async def get_cluster(self, name: str) -> Document:
        """The cluster's data. Raises: ClusterNotFound."""
        path = self._session.paths.cluster(name)
        try:
            data, _ = await self._session.get(path)
        except NotFound as exc:
            raise ClusterNotFound("Cluster does not exist") from exc
        return decode(data, path)

    async def update_cluster(self, name: str, fn: Callable[[Document], Mapping[str, Any]]) -> Document:
        """Replace the cluster's data by ``fn(data)`` (compare-and-set; ``fn`` may run again).

        Raises:
            ClusterNotFound: no such cluster.
        """

        def apply(doc: Document | None) -> Document:
            if doc is None:
                raise ClusterNotFound("Cluster does not exist")
            updated = fn(doc)
            if not isinstance(updated, Mapping):
                raise InvalidArgument(f"the update must return a mapping, not {type(updated).__name__}")
            return dict(updated)

        doc, _ = await read_modify_write(self._session, self._session.paths.cluster(name), apply)
        return doc

    async def delete_cluster(self, name: str) -> None:
        """Raises: ClusterNotFound."""
        try:
            await self._session.delete(self._session.paths.cluster(name))
        except NotFound as exc:
            raise ClusterNotFound("Cluster does not exist") from exc

    async def list_clusters(self) -> list[str]:
        """The stored clusters' names, sorted."""
        try:
            return sorted(await self._session.children(self._session.paths.clusters()))
        except NotFound:
            return []
