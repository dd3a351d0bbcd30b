"""What the gateway tests share besides fixtures (conftest.py): the cluster's description,
unique names, polling. (A module of its own: ``from conftest import`` would find
whichever conftest module was imported first in a whole-suite run.)"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from magnetar.testing.processes import BookieProcess, BrokerProcess, GatewayProcess


@dataclass
class GatewayCluster:
    zk_connect: str
    zk_root: str
    broker: BrokerProcess
    gateway: GatewayProcess
    bookies: list[BookieProcess]

    @property
    def url(self) -> str:
        return self.gateway.url

    @property
    def service_url(self) -> str:
        return f"magnetar://{self.broker.address}"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 10.0) -> Any:
    """Poll ``check`` until it returns something truthy, or its last answer after
    ``timeout`` (what the SDK acknowledges arrives grouped, rates after an interval)."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result or time.monotonic() > deadline:
            return result
        await asyncio.sleep(0.05)
