"""The gateway tests' cluster: 2 bookies, a broker and the gateway on a metadata root of
their own, started once for the run and shared by every gateway test module (tests
create uniquely named tenants, namespaces and topics, so they can share it; a module's
failing tests show its logs). A module that kills or restarts a process of the cluster,
or leaves something cluster-wide behind (an auditor's leadership, fuzzed input), asks
for a cluster of its own: it defines ``gateway_cluster`` as ``own_gateway_cluster``
(whose broker takes the module's ``OWN_BROKER_SETTINGS``, if it has any, e.g. a short
ZooKeeper session for a broker it kills). ``http`` is an httpx client on the gateway."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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
from magnetar.testing.pytest_plugin import track_process


@contextmanager
def started_gateway_cluster(zk_server: ZooKeeperServer, base: Path, **broker_settings: Any) -> Iterator[GatewayCluster]:
    if not zk_server.alive:
        zk_server.start()
    root = f"/gw-{uuid.uuid4().hex[:8]}"
    connect = zk_server.connect_string
    bookies = ServiceFactory(BookieProcess, connect, root, base / "bookies")
    brokers = ServiceFactory(BrokerProcess, connect, root, base / "brokers")
    gateways = ServiceFactory(GatewayProcess, connect, root, base / "gateways")
    try:
        started = [bookies.create(), bookies.create()]
        # Rates are sampled, namespace policies (message TTL, backlog eviction) enforced, inactive
        # topics looked for (a namespace's inactiveTopicPolicies; off by default) and consumed
        # ledgers trimmed by retention every 0.5 s.
        broker = brokers.create(ensemble_size=2, write_quorum=2, ack_quorum=2, stats_interval_s=0.5,
                                policy_check_interval_s=0.5, delete_inactive_topics_frequency_s=0.5,
                                retention_check_interval_s=0.5, **broker_settings)
        gateway = gateways.create(broker_refresh_interval_s=0.5)
        # All at once: the broker sees bookies as they come, the gateway is ready once a broker registered.
        start_all([*started, broker, gateway])
        yield GatewayCluster(connect, root, broker, gateway, started)
    finally:
        for factory in (gateways, brokers, bookies):
            factory.kill_all()


def _tracked(cluster: GatewayCluster, request: pytest.FixtureRequest) -> GatewayCluster:
    for process in [*cluster.bookies, cluster.broker, cluster.gateway]:
        track_process(request.node, process)
    return cluster


@pytest.fixture(scope="session")
def _gateway_cluster_session(zk_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayCluster]:
    with started_gateway_cluster(zk_server, Path(tmp_path_factory.mktemp("gateway-cluster"))) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def gateway_cluster(_gateway_cluster_session: GatewayCluster, request: pytest.FixtureRequest) -> GatewayCluster:
    """The run's shared gateway cluster."""
    return _tracked(_gateway_cluster_session, request)


@pytest.fixture(scope="module")
def own_gateway_cluster(
    zk_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[GatewayCluster]:
    """A gateway cluster for this module only, killed after its last test."""
    settings = getattr(request.module, "OWN_BROKER_SETTINGS", {})
    with started_gateway_cluster(zk_server, Path(tmp_path_factory.mktemp("gateway-cluster")), **settings) as cluster:
        yield _tracked(cluster, request)


@pytest_asyncio.fixture
async def http(gateway_cluster: GatewayCluster) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway_cluster.url, timeout=30) as client:
        yield client
