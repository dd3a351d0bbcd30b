"""BookieProcess and the bookie_factory fixture against the real bookie."""

from __future__ import annotations

import pytest

from magnetar.common.errors import InvalidArgument
from magnetar.common.healthcheck import grpc_health_serving
from magnetar.metadata.bookies import ZkBookieRegistry
from magnetar.metadata.session import ZkSession
from magnetar.testing.processes import BookieFactory, config_env

pytestmark = pytest.mark.integration


def test_config_env() -> None:
    assert config_env({"flush_interval_s": 0.5, "journal_dir": "/j"}) == {
        "MAGNETAR_BOOKIE_FLUSH_INTERVAL_S": "0.5",
        "MAGNETAR_BOOKIE_JOURNAL_DIR": "/j",
    }
    with pytest.raises(InvalidArgument, match="not a setting of BookieConfig"):
        config_env({"no_such_key": 1})


async def test_bookie_serves_registers_and_keeps_its_id_across_restarts(
    bookie_factory: BookieFactory, zk_session: ZkSession
) -> None:
    registry = ZkBookieRegistry(zk_session)
    bookie = bookie_factory(flush_interval_s=0.2)
    address = bookie.address
    assert grpc_health_serving(address)
    assert await registry.list_writable() == [address]
    assert "MAGNETAR_BOOKIE_FLUSH_INTERVAL_S" in (bookie.process.env or {})

    assert bookie.stop() == 0  # graceful: unregisters
    assert not grpc_health_serving(address, timeout_s=0.5)
    assert await registry.list_writable() == []

    bookie.start()
    assert bookie.address == address
    path = zk_session.paths.bookie_available(address)
    before = await zk_session.exists(path)
    assert before is not None

    # kill -9: the old session's registration lingers until ZooKeeper expires it; the
    # restarted bookie must wait it out and only then report SERVING.
    bookie.restart(hard=True, timeout=60)
    assert bookie.address == address and grpc_health_serving(address)
    after = await zk_session.exists(path)
    assert after is not None and after.ephemeral_owner != before.ephemeral_owner
    assert await registry.list_writable() == [address]
    bookie.kill()
    assert not bookie.alive


def test_several_bookies(bookie_factory: BookieFactory) -> None:
    bookies = [bookie_factory() for _ in range(2)]
    assert len({b.address for b in bookies}) == 2
    assert all(b.data_dir.is_dir() and b.log_path.exists() for b in bookies)
