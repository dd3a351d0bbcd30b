"""The network adapter the load manager calls other brokers through (a
:class:`~magnetar.broker.loadbalance.manager.LoadPeers`): an authoritative ``Lookup`` asks
the broker placement chose to take a bundle, ``UnloadNamespaceBundle`` asks an overloaded
broker to give one up, ``SplitNamespaceBundle`` the owner of a hot bundle to split it. Each call is bounded, so a stopped broker does not hold a lookup.
``broker/process.py`` builds it; the broker core never imports it.
"""

from __future__ import annotations

from magnetar.client.connection import ConnectionPool
from magnetar.common.tls import ClientTls
from magnetar.proto.v1 import broker_pb2 as pb


class RemoteLoadPeers:
    def __init__(
        self, service_url: str, timeout_s: float = 5.0, *, tls: ClientTls | None = None, token: str | None = None,
    ) -> None:
        """``tls``: how brokers are called; ``token``: the broker's own (superuser) token,
        when brokers require one."""
        self._pool = ConnectionPool(service_url, timeout_s, tls=tls, token=(lambda: token) if token else None)
        self._timeout_s = timeout_s

    async def take_bundle(self, broker_id: str, topic: str) -> str:
        """Raises: MagnetarError: the broker did not answer or refused."""
        request = pb.LookupRequest(topic=topic, authoritative=True)
        answer = await self._pool.unary(broker_id, lambda stub: stub.Lookup(request, timeout=self._timeout_s))
        return str(answer.broker_address)

    async def unload_bundle(self, broker_id: str, namespace: str, bundle: str) -> None:
        """Raises: MagnetarError: the broker did not answer or refused (NotOwner ...)."""
        request = pb.UnloadNamespaceBundleRequest(namespace=namespace, bundle=bundle)
        await self._pool.unary(
            broker_id, lambda stub: stub.UnloadNamespaceBundle(request, timeout=self._timeout_s * 6)
        )

    async def split_bundle(self, broker_id: str, namespace: str, bundle: str, algorithm: str) -> None:
        """Raises: MagnetarError: the broker did not answer or refused (NotOwner ...)."""
        request = pb.SplitNamespaceBundleRequest(namespace=namespace, bundle=bundle, algorithm=algorithm)
        await self._pool.unary(
            broker_id, lambda stub: stub.SplitNamespaceBundle(request, timeout=self._timeout_s * 6)
        )

    async def close(self) -> None:
        await self._pool.close()
