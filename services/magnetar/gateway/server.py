"""The gateway process: a ZooKeeper session, the admin client, uvicorn serving the app."""

from __future__ import annotations

import asyncio
import logging

import uvicorn

from magnetar.common.errors import MagnetarError
from magnetar.gateway.app import create_app
from magnetar.gateway.config import DEFAULT_PORT, GatewayConfig
from magnetar.gateway.context import GatewayContext
from magnetar.metadata.session import ZkSession

log = logging.getLogger(__name__)


class GatewayServer:
    def __init__(self, config: GatewayConfig) -> None:
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
                access_log=False, lifespan="off", ws="websockets-sansio",
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
        log.info("gateway on http://%s:%d (cluster %s)", self.config.host, self.port, self.config.cluster_name)

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
