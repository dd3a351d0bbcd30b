"""What the gateway's routes work with: the admin client, the metadata stores, the
config. One per process, built by the server and handed to the app (routes take it
with ``Depends(context)``), so tests can build an app over any context."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from magnetar.client.admin import AdminClient
from magnetar.client.aio import Client
from magnetar.client.connection import ConnectionPool
from magnetar.common.authentication import BEARER, AuthenticationService
from magnetar.common.errors import MagnetarError
from magnetar.common.tls import ClientTls, client_tls
from magnetar.gateway.auth import caller_authorization, caller_principal
from magnetar.gateway.config import GatewayConfig
from magnetar.gateway.rate_history import ClusterRateHistory
from magnetar.gateway.topic_creates import TopicCreateBatcher
from magnetar.ledger.client import LedgerClient
from magnetar.ledger.context import LedgerClientConfig
from magnetar.metadata.clusters import ZkClusterStore
from magnetar.metadata.nodes import SessionState
from magnetar.metadata.ownership import ZkOwnershipStore
from magnetar.metadata.session import ZkSession
from magnetar.metadata.tenants import ZkTenantStore

log = logging.getLogger(__name__)


def _service_url(config: GatewayConfig) -> str:
    """The brokers to start from (replaced by the registered ones without a configured URL)."""
    return config.broker_service_url or "127.0.0.1:6660"


def _forwarded(service_token: str | None) -> Callable[[], str]:
    """The ``authorization`` header of the request being served; for a caller known by
    its client certificate, the gateway's own token (its role is sent as the original
    principal); "" without either (the brokers' anonymous role, or a refusal)."""

    def header() -> str:
        if caller_principal.get() is not None and service_token:
            return BEARER + service_token
        return caller_authorization.get() or ""

    return header


@dataclass
class GatewayContext:
    config: GatewayConfig
    session: ZkSession
    admin: AdminClient
    ownership: ZkOwnershipStore
    tenants: ZkTenantStore
    clusters: ZkClusterStore
    """The registered clusters (read only: changes go through the brokers)."""
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

    authenticator: AuthenticationService | None = None
    """Gives callers their role (None: authentication is off)."""
    _session_pools: set[ConnectionPool] = field(default_factory=set, init=False, repr=False)
    """The pools of the sessions open with a caller's token (kept on the live brokers)."""
    topic_creates: TopicCreateBatcher = field(init=False, repr=False)
    """Gathers concurrent creates of non-partitioned topics into one broker call each."""

    rates: ClusterRateHistory = field(init=False, repr=False)
    """The cluster's rates over the last 15 minutes (the console's overview)."""

    def __post_init__(self) -> None:
        self.topic_creates = TopicCreateBatcher(self.admin.create_topics)
        self.rates = ClusterRateHistory(self.live_load_reports, self.config.console_rates_interval_s)

    async def live_load_reports(self) -> dict[str, dict[str, Any] | None]:
        """Each live broker's load measured now, asked with the gateway's own token (a
        background call, no caller's); None for a broker that did not answer."""
        reset = caller_authorization.set(BEARER + self.service_token) if self.service_token else None
        try:
            brokers = list(self.brokers)
            answers = await asyncio.gather(*(self.admin.live_load_report(b) for b in brokers), return_exceptions=True)
        finally:
            if reset is not None:
                caller_authorization.reset(reset)
        out: dict[str, dict[str, Any] | None] = {}
        for broker, answer in zip(brokers, answers, strict=True):
            if isinstance(answer, MagnetarError):
                log.warning("broker %s gave no load report: %s", broker, answer.message)
                out[broker] = None
            elif isinstance(answer, BaseException):
                raise answer
            else:
                out[broker] = answer
        return out

    @classmethod
    def build(cls, config: GatewayConfig, session: ZkSession) -> GatewayContext:
        """Raises: InvalidArgument: a bad token, key or TLS setting."""
        token = config.service_token()
        authenticator = config.authenticator()
        tls = client_tls(config)
        # With authentication on, a request's broker calls carry the caller's credentials
        # and nothing else: a call made outside a request is refused (or is the brokers'
        # anonymous role) rather than run with the gateway's own (superuser) token.
        source: Callable[[], str] | None = (lambda: BEARER + token) if token else None
        if authenticator is not None:
            source = _forwarded(token)
        admin = AdminClient(_service_url(config), config.operation_timeout_s, tls=tls, authorization=source,
                            original_principal=caller_principal.get)
        if not config.broker_service_url:
            admin.pool.service_hosts = []
        client = Client.sharing(admin.pool)  # one pool: one channel per broker, hosts kept fresh below
        ledgers = LedgerClient(session, LedgerClientConfig(auth_token=token), tls=tls)
        return cls(
            config, session, admin, ZkOwnershipStore(session), ZkTenantStore(session), ZkClusterStore(session), ledgers, client, tls,
            service_token=token, authenticator=authenticator,
        )

    @asynccontextmanager
    async def caller_client(self) -> AsyncIterator[Client]:
        """An SDK client for a long-lived session of the request being served (a WebSocket
        producer, consumer or reader, a DLQ replay), whose calls and reconnects carry the
        caller's credentials (for a caller known by its client certificate: the gateway's
        token and the caller's role as original principal). Without authentication, or
        for an anonymous caller (whose broker calls carry nothing): the shared client (not
        closed here). Otherwise a client of its own (the gateway's TLS settings, the live
        brokers), closed with everything it opened when the block ends."""
        header, principal = _forwarded(self.service_token)(), caller_principal.get()
        if self.authenticator is None or not header:
            yield self.client
            return
        pool = ConnectionPool(_service_url(self.config), self.config.operation_timeout_s, tls=self.tls,
                              authorization=lambda: header, original_principal=lambda: principal)
        if not self.config.broker_service_url:
            pool.service_hosts = list(self.brokers)
        self._session_pools.add(pool)
        client = Client.sharing(pool)
        try:
            yield client
        finally:
            self._session_pools.discard(pool)
            await client.close()

    def zookeeper_up(self) -> bool:
        return self.session.state is SessionState.CONNECTED

    async def refresh_brokers(self) -> list[str]:
        """Read the live brokers again; without a configured service URL they become the
        hosts admin calls go to."""
        self.brokers = await self.ownership.list_brokers()
        if not self.config.broker_service_url:
            for pool in (self.admin.pool, *self._session_pools):
                pool.service_hosts = list(self.brokers)
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
        await self.rates.close()
        await self.topic_creates.close()
        await asyncio.gather(*(pool.close() for pool in self._session_pools), return_exceptions=True)
        await self.client.close()  # every WebSocket's producer, consumer and reader
        await self.admin.close()
        await self.ledgers.close()
