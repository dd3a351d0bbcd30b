"""One cluster per gateway test module: 2 bookies, a broker and the gateway on a metadata
root of the module's own (tests create uniquely named tenants and topics, so they can
share it). ``http`` is an httpx client on the gateway."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from gateway_support import GatewayCluster

from magnetar.common.zkserver import ZooKeeperServer
from magnetar.testing.processes import (
    BookieProcess,
    BrokerProcess,
    GatewayProcess,
    ServiceFactory,
    start_all,
)


@pytest.fixture(scope="module")
def gateway_cluster(zk_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayCluster]:
    if not zk_server.alive:
        zk_server.start()
    base = Path(tmp_path_factory.mktemp("gateway-cluster"))
    root = f"/gw-{uuid.uuid4().hex[:8]}"
    connect = zk_server.connect_string
    bookies = ServiceFactory(BookieProcess, connect, root, base / "bookies")
    brokers = ServiceFactory(BrokerProcess, connect, root, base / "brokers")
    gateways = ServiceFactory(GatewayProcess, connect, root, base / "gateways")
    try:
        started = [bookies.create(), bookies.create()]
        # Rates are sampled, namespace policies (message TTL, backlog eviction) enforced and inactive
        # topics looked for (a namespace's inactiveTopicPolicies; off by default) every 0.5 s.
        broker = brokers.create(ensemble_size=2, write_quorum=2, ack_quorum=2, stats_interval_s=0.5,
                                policy_check_interval_s=0.5, delete_inactive_topics_frequency_s=0.5)
        gateway = gateways.create(broker_refresh_interval_s=0.5)
        # All at once: the broker sees bookies as they come, the gateway is ready once a broker registered.
        start_all([*started, broker, gateway])
        yield GatewayCluster(connect, root, broker, gateway, started)
    finally:
        for factory in (gateways, brokers, bookies):
            factory.kill_all()


@pytest_asyncio.fixture
async def http(gateway_cluster: GatewayCluster) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway_cluster.url, timeout=30) as client:
        yield client
