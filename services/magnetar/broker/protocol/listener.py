"""The Pulsar protocol listener: accepts sockets on ``protocol_port`` and serves each
with a :class:`~magnetar.broker.protocol.connection.Connection`."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import magnetar
from magnetar.broker.protocol.connection import Connection, ConnectionSettings
from magnetar.common.errors import MagnetarError

if TYPE_CHECKING:
    from magnetar.broker.config import BrokerConfig
    from magnetar.broker.service import BrokerService
    from magnetar.common.tokens import TokenAuthenticator

log = logging.getLogger(__name__)

SERVER_VERSION = f"Magnetar-{magnetar.__version__}"


def pulsar_service_url(config: BrokerConfig) -> str:
    """The ``pulsar://host:port`` this broker advertises ('' when the listener is off):
    the host other processes reach it at (``advertised_address``'s, else ``host``)."""
    if not config.protocol_port:
        return ""
    host = config.advertised_address.rsplit(":", 1)[0] if config.advertised_address else config.host
    return f"pulsar://{host}:{config.protocol_port}"


class ProtocolListener:
    """Pulsar's binary protocol on ``config.host:config.protocol_port`` over ``service``."""

    def __init__(self, service: BrokerService, config: BrokerConfig, authenticator: TokenAuthenticator | None = None) -> None:
        self.service = service
        self.host = config.host
        self.port = config.protocol_port
        self.settings = ConnectionSettings(
            server_version=SERVER_VERSION,
            max_message_size=config.max_message_bytes,
            keepalive_s=config.protocol_keepalive_s,
            authenticator=authenticator,
            authorizer=service.authorizer if config.authorization_enabled else None,
        )
        self._server: asyncio.Server | None = None
        self._connections: dict[Connection, asyncio.Task[None] | None] = {}

    async def start(self) -> None:
        """Listen.

        Raises:
            MagnetarError: the port cannot be bound.
        """
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port)
        except OSError as exc:
            raise MagnetarError(f"cannot listen for Pulsar's protocol on {self.host}:{self.port}: {exc}") from exc
        log.info("serving Pulsar's protocol on %s:%d", self.host, self.port)

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
