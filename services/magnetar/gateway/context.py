"""What the gateway's routes work with: the admin client, the metadata stores, the
config. One per process, built by the server and handed to the app (routes take it
with ``Depends(context)``), so tests can build an app over any context."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from magnetar.client.admin import AdminClient
from magnetar.client.aio import Client
from magnetar.common.errors import MagnetarError
from magnetar.common.tls import ClientTls, client_tls
from magnetar.gateway.config import GatewayConfig
from magnetar.ledger.client import LedgerClient
from magnetar.ledger.context import LedgerClientConfig
from magnetar.metadata.nodes import SessionState
from magnetar.metadata.ownership import ZkOwnershipStore
from magnetar.metadata.session import ZkSession
from magnetar.metadata.tenants import ZkTenantStore

log = logging.getLogger(__name__)


@dataclass
class GatewayContext:
    config: GatewayConfig
    session: ZkSession
    admin: AdminClient
    ownership: ZkOwnershipStore
    tenants: ZkTenantStore
    ledgers: LedgerClient
    """Ledger metadata and the bookies (read only: the gateway creates no ledgers)."""
    client: Client
    """The SDK client WebSocket producers, consumers and readers are made with; it shares
    the admin client's connection pool (channels and service hosts)."""
    tls: ClientTls | None = None
    """How brokers, bookies and auditors are called (None: plain text)."""
    brokers: list[str] = field(default_factory=list)
    """The live brokers last read from ZooKeeper."""
    service_token: str | None = None
    """The token the gateway presents to brokers and bookies (None: none)."""

    @classmethod
    def build(cls, config: GatewayConfig, session: ZkSession) -> GatewayContext:
        url = config.broker_service_url or "127.0.0.1:6650"  # replaced by the registered brokers
        token = config.service_token()
        tls = client_tls(config)
        admin = AdminClient(url, config.operation_timeout_s, tls=tls, token=(lambda: token) if token else None)
        if not config.broker_service_url:
            admin.pool.service_hosts = []
        client = Client.sharing(admin.pool)  # one pool: one channel per broker, hosts kept fresh below
        ledgers = LedgerClient(session, LedgerClientConfig(auth_token=token), tls=tls)
        return cls(
            config, session, admin, ZkOwnershipStore(session), ZkTenantStore(session), ledgers, client, tls,
            service_token=token,
        )

    def zookeeper_up(self) -> bool:
        return self.session.state is SessionState.CONNECTED

    async def refresh_brokers(self) -> list[str]:
        """Read the live brokers again; without a configured service URL they become the
        hosts admin calls go to."""
        self.brokers = await self.ownership.list_brokers()
        if not self.config.broker_service_url:
            self.admin.pool.service_hosts = list(self.brokers)
        return self.brokers

    async def keep_brokers_fresh(self) -> None:
        """Refresh the brokers every ``broker_refresh_interval_s`` until cancelled."""
        while True:
            await asyncio.sleep(self.config.broker_refresh_interval_s)
            try:
                await self.refresh_brokers()
            except MagnetarError as exc:
                log.warning("could not read the registered brokers: %s", exc.message)

    async def close(self) -> None:
        await self.client.close()  # every WebSocket's producer, consumer and reader
        await self.admin.close()
        await self.ledgers.close()
