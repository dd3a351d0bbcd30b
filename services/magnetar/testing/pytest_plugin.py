"""pytest fixtures for tests against real ZooKeeper and real Magnetar processes.

Enable with ``pytest_plugins = ["magnetar.testing.pytest_plugin"]`` in the top
conftest. Fixtures:

- ``zk_server``: one ZooKeeper for the whole run (session scope).
- ``zk_connect``: its connect string; ``zk_root``: a fresh root per test.
- ``zk_session``: a started :class:`ZkSession` on ``zk_root`` (async fixture).
- ``bookie_factory``: ``bookie_factory(**settings)`` starts a bookie process.
- ``broker_factory``: ``broker_factory(**settings)`` starts a broker process.
- ``bookie_factory.start_many(3, **settings)`` starts several at once (their start-ups
  overlap); :func:`magnetar.testing.processes.start_all` starts processes made with
  ``factory.create(...)`` of several kinds at once.
- ``keys``: a secret key and service token (:class:`magnetar.testing.auth.Keys`) for
  services with authentication on (``keys.settings()``, ``keys.token(role)``).
- ``module_zk_root``, ``module_bookie_factory``, ``module_broker_factory``: the same for
  a whole test module, so that its tests share one cluster (each test then uses topics,
  subscriptions or namespaces of its own); processes are killed after the module.
- ``shared_cluster``: two bookies and a broker for the whole run, for the modules that
  need just that (:class:`SharedCluster`); it starts once instead of once per module.

When a test fails, the log tails of the processes it used are added to its report.
A fixture that starts another kind of process calls :func:`track_process` with it
(a module-scoped fixture with its module's node: shown for each failing test there).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest
import pytest_asyncio

from magnetar.common.zkserver import ZooKeeperServer
from magnetar.metadata.session import ZkSession
from magnetar.testing.auth import Keys
from magnetar.testing.processes import (
    AuditorProcess,
    BookieProcess,
    BrokerProcess,
    GatewayProcess,
    ServiceFactory,
    _new_port,
    start_all,
)


class LoggedProcess(Protocol):
    """Anything with a name and a log tail."""

    name: str

    def log_tail(self, lines: int = 80) -> str: ...


_TRACKED = pytest.StashKey[list[LoggedProcess]]()


def track_process(item: pytest.Item | pytest.Module, process: LoggedProcess) -> None:
    """Print ``process``'s log tail if the test ``item`` (or any test of the module) fails."""
    tracked = item.stash.setdefault(_TRACKED, [])
    if all(p is not process for p in tracked):
        tracked.append(process)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for process in (p for node in item.listchain() for p in node.stash.get(_TRACKED, [])):
            try:
                tail = process.log_tail(80)
            except Exception as exc:
                tail = f"(log unavailable: {exc})"
            report.sections.append((f"{process.name} log (last 80 lines)", tail or "(empty)"))
    return report


class _ZooKeeperLogs:
    """The shared ZooKeeper as a tracked process (its name says which one)."""

    def __init__(self, server: ZooKeeperServer) -> None:
        self.name = f"zookeeper {server.connect_string}"
        self._server = server

    def log_tail(self, lines: int = 80) -> str:
        return self._server.log_tail(lines)


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper (no fsync) shared by every test of the run."""
    # A 500 ms tick allows 1 s sessions: a SIGKILLed bookie's registration expires fast.
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), force_sync=False, tick_time_ms=500)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_connect(zk_server: ZooKeeperServer, request: pytest.FixtureRequest) -> str:
    """Connect string of the shared ZooKeeper (restarted if a test killed it)."""
    if not zk_server.alive:
        zk_server.start()
    track_process(request.node, _ZooKeeperLogs(zk_server))
    return zk_server.connect_string


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    """A fresh secret key and service token for services with authentication on."""
    return Keys.make(tmp_path)


@pytest.fixture
def zk_root() -> str:
    """A metadata root of this test's own, so tests never see each other's znodes."""
    return f"/test-{uuid.uuid4().hex[:8]}"


@pytest_asyncio.fixture
async def zk_session(zk_connect: str, zk_root: str) -> AsyncIterator[ZkSession]:
    """A started ZkSession on ``zk_root``; closed after the test."""
    session = ZkSession(zk_connect, zk_root)
    await session.start()
    try:
        yield session
    finally:
        await session.close()


@pytest.fixture
def bookie_factory(
    zk_connect: str,
    zk_root: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[ServiceFactory[BookieProcess]]:
    """``bookie_factory(**settings)`` starts a bookie on ``zk_root``; all killed after the test.

    Settings are BookieConfig fields (``flush_interval_s=0.1``); ``extra_args=[...]``
    adds command-line arguments; ``bookie_factory.create(...)`` makes one unstarted;
    ``bookie_factory.start_many(n, **settings)`` starts ``n`` at once.
    """
    factory = ServiceFactory(
        BookieProcess,
        zk_connect,
        zk_root,
        tmp_path / "bookies",
        on_create=lambda bookie: track_process(request.node, bookie),
    )
    try:
        yield factory
    finally:
        factory.kill_all()


@pytest.fixture
def broker_factory(
    zk_connect: str,
    zk_root: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[ServiceFactory[BrokerProcess]]:
    """``broker_factory(**settings)`` starts a broker on ``zk_root``; all killed after the test.

    Settings are BrokerConfig fields (``ensemble_size=3``).
    """
    factory = ServiceFactory(
        BrokerProcess, zk_connect, zk_root, tmp_path / "brokers",
        on_create=lambda broker: track_process(request.node, broker),
    )
    try:
        yield factory
    finally:
        factory.kill_all()


@pytest.fixture(scope="module")
def module_zk_root(zk_server: ZooKeeperServer) -> str:
    """A metadata root of this test module's own (for a cluster its tests share)."""
    if not zk_server.alive:
        zk_server.start()
    return f"/module-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def module_bookie_factory(
    zk_server: ZooKeeperServer,
    module_zk_root: str,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[ServiceFactory[BookieProcess]]:
    """``bookie_factory`` for a whole test module: bookies on ``module_zk_root``, killed
    after the module's last test."""
    factory = ServiceFactory(
        BookieProcess, zk_server.connect_string, module_zk_root, tmp_path_factory.mktemp("module-bookies"),
        on_create=lambda bookie: track_process(request.node, bookie),
    )
    try:
        yield factory
    finally:
        factory.kill_all()


@pytest.fixture(scope="module")
def module_broker_factory(
    zk_server: ZooKeeperServer,
    module_zk_root: str,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[ServiceFactory[BrokerProcess]]:
    """``broker_factory`` for a whole test module: brokers on ``module_zk_root``, killed
    after the module's last test (a broker a test starts for itself it may stop or kill)."""
    factory = ServiceFactory(
        BrokerProcess, zk_server.connect_string, module_zk_root, tmp_path_factory.mktemp("module-brokers"),
        on_create=lambda broker: track_process(request.node, broker),
    )
    try:
        yield factory
    finally:
        factory.kill_all()


@pytest.fixture
def gateway_factory(
    zk_connect: str,
    zk_root: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[ServiceFactory[GatewayProcess]]:
    """``gateway_factory(**settings)`` starts a gateway on ``zk_root`` (ready once a broker
    is registered); all killed after the test. Settings are GatewayConfig fields."""
    factory = ServiceFactory(
        GatewayProcess, zk_connect, zk_root, tmp_path / "gateways",
        on_create=lambda gateway: track_process(request.node, gateway),
    )
    try:
        yield factory
    finally:
        factory.kill_all()


@pytest.fixture
def auditor_factory(
    zk_connect: str,
    zk_root: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[ServiceFactory[AuditorProcess]]:
    """``auditor_factory(**settings)`` starts an auditor replica on ``zk_root``; all
    killed after the test. Settings are AuditorConfig fields (``grace_period_s=2``)."""
    factory = ServiceFactory(
        AuditorProcess, zk_connect, zk_root, tmp_path / "auditors",
        on_create=lambda auditor: track_process(request.node, auditor),
    )
    try:
        yield factory
    finally:
        factory.kill_all()


@dataclass
class SharedCluster:
    """Two bookies and one broker (E=Qw=Qa=2, Pulsar's protocol on) on a metadata root of
    their own, shared by every test module that asks for ``shared_cluster``.

    Each test uses namespaces or topics of its own. A test may restart the broker (its
    ports stay) but leaves it serving; it stops or kills nothing else.
    """

    zk_root: str
    bookies: list[BookieProcess]
    broker: BrokerProcess


@pytest.fixture(scope="session")
def _shared_cluster_session(zk_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedCluster]:
    """The run's :class:`SharedCluster`, started (bookies and broker at once) by the first
    test that needs it and killed at the end of the run."""
    if not zk_server.alive:
        zk_server.start()
    zk_root = f"/shared-{uuid.uuid4().hex[:8]}"
    base = tmp_path_factory.mktemp("shared-cluster")
    bookies = ServiceFactory(BookieProcess, zk_server.connect_string, zk_root, base / "bookies")
    brokers = ServiceFactory(BrokerProcess, zk_server.connect_string, zk_root, base / "brokers")
    try:
        # With their /metrics served (tests/integration/test_prometheus_metrics.py scrapes them).
        cluster = SharedCluster(
            zk_root, [bookies.create(metrics_port=_new_port()), bookies.create(metrics_port=_new_port())],
            brokers.create(ensemble_size=2, write_quorum=2, ack_quorum=2, metrics_port=_new_port()),
        )
        start_all([*cluster.bookies, cluster.broker])  # their start-ups overlap
        yield cluster
    finally:
        brokers.kill_all()
        bookies.kill_all()


@pytest.fixture(scope="module")
def shared_cluster(_shared_cluster_session: SharedCluster, request: pytest.FixtureRequest) -> SharedCluster:
    """The run's :class:`SharedCluster`; its logs are shown for this module's failing tests
    (not for every test of the run)."""
    for process in [*_shared_cluster_session.bookies, _shared_cluster_session.broker]:
        track_process(request.node, process)
    return _shared_cluster_session
