"""The Pulsar protocol listener: accepts sockets on ``protocol_port`` (``pulsar://``) or,
with TLS, on ``protocol_tls_port`` (``pulsar+ssl://``) and serves each with a
:class:`~magnetar.broker.protocol.connection.Connection`."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import magnetar
from magnetar.broker.protocol.connection import Connection, ConnectionSettings
from magnetar.broker.service import PulsarServiceUrls
from magnetar.common.errors import MagnetarError

if TYPE_CHECKING:
    import ssl

    from magnetar.broker.config import BrokerConfig
    from magnetar.broker.service import BrokerService
    from magnetar.common.authentication import AuthenticationService
    from magnetar.common.tokens import TokenAuthenticator

log = logging.getLogger(__name__)

SERVER_VERSION = f"Magnetar-{magnetar.__version__}"


def pulsar_service_urls(config: BrokerConfig) -> PulsarServiceUrls:
    """The ``pulsar://host:port`` and ``pulsar+ssl://host:port`` this broker advertises
    ("" for a listener that is off; the TLS one is on with ``tls_enabled`` only), the
    host being the one other processes reach it at (``advertised_address``'s, else
    ``host``)."""
    host = config.advertised_address.rsplit(":", 1)[0] if config.advertised_address else config.host
    tls_port = config.protocol_tls_port if config.tls_enabled else 0
    return PulsarServiceUrls(
        f"pulsar://{host}:{config.protocol_port}" if config.protocol_port else "",
        f"pulsar+ssl://{host}:{tls_port}" if tls_port else "",
    )


class ProtocolListener:
    """Pulsar's binary protocol over ``service`` on ``config.host:config.protocol_port``,
    or with TLS (``tls``: a server context, common/tls.py's ``server_ssl_context``) on
    ``config.host:config.protocol_tls_port``."""

    def __init__(
        self, service: BrokerService, config: BrokerConfig, authenticator: AuthenticationService | TokenAuthenticator | None = None,
        *, tls: ssl.SSLContext | None = None,
    ) -> None:  # fmt: skip
        self.service = service
        self.host = config.host
        self.port = config.protocol_tls_port if tls else config.protocol_port
        self._ssl = tls
        self.settings = ConnectionSettings(
            server_version=SERVER_VERSION,
            max_message_size=config.max_message_bytes,
            keepalive_s=config.protocol_keepalive_s,
            authenticator=authenticator,
            authorizer=service.authorizer if config.authorization_enabled else None,
            tls=tls is not None,
            max_unsent_bytes=config.protocol_max_unsent_bytes,
            write_timeout_s=config.protocol_write_timeout_s,
        )
        self._server: asyncio.Server | None = None
        self._connections: dict[Connection, asyncio.Task[None] | None] = {}

    async def start(self) -> None:
        """Listen.

        Raises:
            MagnetarError: the port cannot be bound.
        """
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port, ssl=self._ssl)
        except OSError as exc:
            raise MagnetarError(f"cannot listen for Pulsar's protocol on {self.host}:{self.port}: {exc}") from exc
        log.info("serving Pulsar's protocol on %s:%d%s", self.host, self.port, " (TLS)" if self._ssl else "")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = Connection(self.service, reader, writer, self.settings)
        self._connections[connection] = asyncio.current_task()
        try:
            await connection.run()
        except Exception:
            log.exception("pulsar connection %s failed", connection.peer)
        finally:
            self._connections.pop(connection, None)

    @property
    def connections(self) -> int:
        return len(self._connections)

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Stop accepting, close every connection and wait (at most ``timeout_s``) for
        their requests to end."""
        if self._server is not None:
            self._server.close()
        tasks = [task for task in self._connections.values() if task is not None]
        for connection in list(self._connections):
            connection.close()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
