"""The network adapter that asks another broker which non-persistent topics of a
namespace it serves (a :class:`~magnetar.broker.nonpersistent.listing.PeerTopicLister`):
the gRPC ``ListTopics`` with ``non_persistent``, each attempt bounded so one stopped
broker does not hold a namespace's list. ``broker/process.py`` builds it; the broker core
never imports it.
"""

from __future__ import annotations

from magnetar.client.connection import ConnectionPool
from magnetar.common.tls import ClientTls
from magnetar.proto.v1 import broker_pb2 as pb


class RemoteTopicLister:
    """Lists the non-persistent topics other brokers serve, over gRPC."""

    def __init__(
        self, service_url: str, timeout_s: float = 5.0, *, tls: ClientTls | None = None, token: str | None = None,
    ) -> None:
        """``tls``: how brokers are called; ``token``: the broker's own (superuser) token,
        when brokers require one."""
        self._pool = ConnectionPool(service_url, timeout_s, tls=tls, token=(lambda: token) if token else None)
        self._timeout_s = timeout_s

    async def non_persistent_topics(self, broker_id: str, namespace: str) -> list[str]:
        """Raises: MagnetarError: the broker did not answer (NotConnected, Timeout ...)."""
        request = pb.ListTopicsRequest(namespace=namespace, non_persistent=True)
        answer = await self._pool.unary(broker_id, lambda stub: stub.ListTopics(request, timeout=self._timeout_s))
        return list(answer.names)

    async def close(self) -> None:
        await self._pool.close()
