"""Broker registration and bundle ownership in ZooKeeper.

A broker registers ``<root>/brokers/<host:port>`` (ephemeral). It owns a namespace bundle
while it holds the ephemeral ``<root>/ownership/<tenant>/<ns>/<bundle>`` znode, whose
data names it; when its session ends the znode vanishes and another broker can take the
bundle (and recover the topics' ledgers, which fences the old owner).
"""

from __future__ import annotations

import asyncio
import logging

from magnetar.common.errors import NotFound
from magnetar.metadata.codec import decode, encode
from magnetar.metadata.errors import NodeExists
from magnetar.metadata.session import ZkSession

log = logging.getLogger(__name__)


class ZkOwnershipStore:
    def __init__(self, session: ZkSession) -> None:
        self._session = session
        self._paths = session.paths
        self._hooked = False

    async def register_broker(self, broker_id: str, info: dict[str, object], stale_wait_s: float = 30.0) -> None:
        """Register the broker (an ephemeral znode), waiting out the registration of a
        previous run with the same id until its ZooKeeper session expires.

        Raises:
            NodeExists: another session still holds it after ``stale_wait_s`` (is another
                broker running with this address?).
        """
        session = self._session
        path = self._paths.broker(broker_id)
        if not self._hooked:
            # After an expiry the registration is gone with the old session: make it again.
            session.add_renewal_hook(lambda: self.register_broker(broker_id, info, stale_wait_s))
            self._hooked = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + stale_wait_s
        while True:
            try:
                await session.create(path, encode(info), ephemeral=True, makepath=True)
                return
            except NodeExists:
                pass
            stat = await session.exists(path)
            if stat is None:
                continue
            if stat.ephemeral_owner == session.session_id:
                return
            log.warning("broker %s is still registered by an earlier ZooKeeper session; waiting for it to expire", broker_id)
            remaining = deadline - loop.time()
            if remaining <= 0 or not await session.wait_gone(path, remaining):
                raise NodeExists(
                    f"broker {broker_id} is already registered at {path} by another ZooKeeper session that did "
                    f"not expire within {stale_wait_s:g} s: is another broker running with this address?"
                )

    async def list_brokers(self) -> list[str]:
        """The registered (live) brokers' ids (``host:port``), sorted."""
        try:
            return sorted(await self._session.children(self._paths.brokers()))
        except NotFound:
            return []

    async def broker_record(self, broker_id: str) -> dict[str, object] | None:
        """What a registered broker advertises (its registration's data: ``address``, and
        ``pulsar_service_url`` from brokers serving Pulsar's protocol); None when it is not
        registered. Records written before a key existed simply lack it."""
        path = self._paths.broker(broker_id)
        try:
            data, _ = await self._session.get(path)
        except NotFound:
            return None
        return decode(data, path) if data else {}

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

    async def release(self, tenant: str, namespace: str, bundle: str) -> None:
        """Give the bundle up (delete its ownership znode if this session holds it)."""
        await self._session.delete_if_owned(self._paths.bundle_owner(tenant, namespace, bundle))

    async def ping(self) -> None:
        """One round trip to ZooKeeper, not retried (a connection error raises at once).

        Raises:
            MetadataError, NotConnected, Timeout.
        """
        await self._session.ping()
