"""Broker registration and bundle ownership in ZooKeeper.

A broker registers ``<root>/brokers/<host:port>`` (ephemeral). It owns a namespace bundle
while it holds the ephemeral ``<root>/ownership/<tenant>/<ns>/<bundle>`` znode, whose
data names it; when its session ends the znode vanishes and another broker can take the
bundle (and recover the topics' ledgers, which fences the old owner).
"""

from __future__ import annotations

from magnetar.common.errors import NotFound
from magnetar.metadata.codec import decode, encode
from magnetar.metadata.errors import NodeExists
from magnetar.metadata.session import ZkSession


class ZkOwnershipStore:
    def __init__(self, session: ZkSession) -> None:
        self._session = session
        self._paths = session.paths

    async def register_broker(self, broker_id: str, info: dict[str, object]) -> None:
        await self._session.create(self._paths.broker(broker_id), encode(info), ephemeral=True, makepath=True)

    async def owner(self, tenant: str, namespace: str, bundle: str) -> str | None:
        """The broker id owning the bundle, or None."""
        try:
            data, _ = await self._session.get(self._paths.bundle_owner(tenant, namespace, bundle))
        except NotFound:
            return None
        return str(decode(data).get("broker", "")) or None

    async def try_acquire(self, tenant: str, namespace: str, bundle: str, broker_id: str) -> str:
        """Take the bundle if nobody owns it; returns the owner (``broker_id`` if we won)."""
        path = self._paths.bundle_owner(tenant, namespace, bundle)
        try:
            await self._session.create(path, encode({"broker": broker_id}), ephemeral=True, makepath=True)
            return broker_id
        except NodeExists:
            owner = await self.owner(tenant, namespace, bundle)
            return owner if owner is not None else await self.try_acquire(tenant, namespace, bundle, broker_id)

    async def still_owns(self, tenant: str, namespace: str, bundle: str, broker_id: str) -> bool:
        """True when the ownership znode exists, names us and belongs to our session."""
        path = self._paths.bundle_owner(tenant, namespace, bundle)
        stat = await self._session.exists(path)
        return stat is not None and self._session.owns(stat.ephemeral_owner) and (
            await self.owner(tenant, namespace, bundle)
        ) == broker_id
