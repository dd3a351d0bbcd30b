"""The gateway process: a ZooKeeper session, the admin client, uvicorn serving the app."""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

import uvicorn

from magnetar.common.errors import MagnetarError
from magnetar.common.tls import read_pem
from magnetar.gateway.app import create_app
from magnetar.gateway.auth import RedactTokens
from magnetar.gateway.config import DEFAULT_PORT, GatewayConfig
from magnetar.gateway.context import GatewayContext
from magnetar.gateway.tlsprotocols import GatewayHttpProtocol, GatewayTlsWebSocketProtocol
from magnetar.gateway.websocket.socket import ClientFrameErrors
from magnetar.metadata.session import ZkSession

log = logging.getLogger(__name__)


def https_options(config: GatewayConfig) -> dict[str, Any]:
    """uvicorn's TLS settings for ``config`` (HTTPS and WSS on the one port), none
    when TLS is off; with ``tls_require_client_cert`` clients must show a certificate
    signed by ``tls_trust_certs_file``."""
    if not config.tls_enabled:
        return {}
    for path, what in ((config.tls_cert_file, "certificate file"), (config.tls_key_file, "key file")):
        read_pem(path, what)  # a clear error now rather than uvicorn's traceback
    options: dict[str, Any] = {"ssl_certfile": config.tls_cert_file, "ssl_keyfile": config.tls_key_file}
    if config.tls_trust_certs_file:
        options["ssl_ca_certs"] = config.tls_trust_certs_file
        options["ssl_cert_reqs"] = ssl.CERT_REQUIRED if config.tls_require_client_cert else ssl.CERT_OPTIONAL
    return options


class GatewayServer:
    def __init__(self, config: GatewayConfig) -> None:
        uvicorn_log = logging.getLogger("uvicorn.error")
        uvicorn_log.addFilter(RedactTokens())  # its upgrade lines show ?token=
        uvicorn_log.addFilter(ClientFrameErrors())
        self.config = config
        self.port = config.port or DEFAULT_PORT
        self.session = ZkSession(config.zookeeper, config.zk_root, config.zk_session_timeout_s)
        self.context = GatewayContext.build(config, self.session)
        self._server: uvicorn.Server | None = None
        self._serving: asyncio.Task[None] | None = None
        self._refresh: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.session.start()
        try:
            await self.context.refresh_brokers()
            server = uvicorn.Server(uvicorn.Config(
                create_app(self.context), host=self.config.host, port=self.port, log_config=None,
                access_log=False, lifespan="off", http=GatewayHttpProtocol, ws=GatewayTlsWebSocketProtocol,
                **https_options(self.config),
            ))
            self._serving = asyncio.get_running_loop().create_task(server.serve(), name="gateway-http")
            while not server.started:
                if self._serving.done():
                    await self._serving  # raises what stopped it
                    raise MagnetarError(f"cannot serve HTTP on {self.config.host}:{self.port}: choose another port")
                await asyncio.sleep(0.02)
            self._server = server
        except BaseException:
            await self._close()
            raise
        self._refresh = asyncio.get_running_loop().create_task(self.context.keep_brokers_fresh(), name="gateway-brokers")
        self.context.rates.start()
        scheme = "https" if self.config.tls_enabled else "http"
        log.info("gateway on %s://%s:%d (cluster %s)", scheme, self.config.host, self.port, self.config.cluster_name)

    async def stop(self) -> None:
        if self._refresh is not None:
            self._refresh.cancel()
            await asyncio.gather(self._refresh, return_exceptions=True)
        if self._server is not None:
            self._server.should_exit = True
        if self._serving is not None:
            await asyncio.gather(self._serving, return_exceptions=True)
        await self._close()

    async def _close(self) -> None:
        await self.context.close()
        await self.session.close()
