"""BookieProcess and the bookie_factory fixture against the real bookie."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from magnetar.common.childproc import ChildNotReady
from magnetar.common.errors import InvalidArgument
from magnetar.common.healthcheck import grpc_health_serving
from magnetar.metadata.bookies import ZkBookieRegistry
from magnetar.metadata.cookies import ZkCookieStore
from magnetar.metadata.session import ZkSession
from magnetar.testing.processes import BookieFactory, BookieProcess, config_env
from magnetar.testing.shell import warm_magnetar as magnetar

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
    # A 1 s session (the test ZooKeeper's shortest): the kill -9 below waits it out.
    bookie = bookie_factory(flush_interval_s=0.2, zk_session_timeout_s=1.0)
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
    bookies = bookie_factory.start_many(2)
    assert len({b.address for b in bookies}) == 2
    assert all(b.data_dir.is_dir() and b.log_path.exists() for b in bookies)


def test_bookieformat_once_then_the_bookie_checks_its_cookies(
    bookie_factory: BookieFactory, zk_connect: str, zk_root: str, tmp_path: Path
) -> None:
    """The init step of a bookie pod: ``magnetar shell bookieformat`` writes the cookies
    once; the bookie serves on them, and refuses directories of another bookie or a
    volume that lost its cookie; ``magnetar health`` says whether it serves."""
    bookie = bookie_factory.create()
    data = bookie.data_dir
    first = magnetar("shell", "bookieformat", "--data-dir", str(data), "--port", str(bookie.port))
    assert first.returncode == 0 and "formatted (" in first.stdout, first
    cookie = (data / "cookie.json").read_bytes()
    again = magnetar("shell", "bookieformat", "--data-dir", str(data), "--port", str(bookie.port))
    assert again.returncode == 0 and "already formatted, nothing changed" in again.stdout, again
    assert (data / "cookie.json").read_bytes() == cookie == (data / "journal" / "cookie.json").read_bytes()
    assert json.loads(cookie)["bookie_id"] == bookie.address

    bookie.start()
    assert magnetar("health", bookie.address).returncode == 0
    assert (data / "cookie.json").read_bytes() == cookie  # the bookie kept the formatted cookie
    bookie.stop()
    down = magnetar("health", bookie.address, "--timeout", "0.5")
    assert down.returncode == 1 and down.stderr.strip() == f"magnetar health: not serving: {bookie.address}"

    # Another bookie on these directories: refused with one line, nothing served.
    impostor = BookieProcess(zk_connect, zk_root, data, extra_args=[], name="impostor")
    with pytest.raises(ChildNotReady):
        impostor.start(timeout=15)
    assert f"belongs to bookie {bookie.address}" in impostor.log_path.read_text()
    # The journal volume came back empty: refused too.
    (data / "journal" / "cookie.json").unlink()
    refused = magnetar("shell", "bookieformat", "--data-dir", str(data), "--port", str(bookie.port))
    assert refused.returncode == 1 and "has none: one of the bookie's volumes" in refused.stderr, refused
    with pytest.raises(ChildNotReady):
        bookie.start(timeout=15)


async def test_bookie_with_both_volumes_emptied_is_refused_until_its_cookie_is_retired(
    bookie_factory: BookieFactory, zk_session: ZkSession, zk_connect: str, zk_root: str
) -> None:
    """ZooKeeper keeps each bookie's cookie: a bookie whose journal and data volumes both
    came back empty (nothing on disk says it ever held data) is refused until an operator
    retires its cookie with ``magnetar shell cookie-delete``."""
    store = ZkCookieStore(zk_session)
    bookie = bookie_factory(flush_interval_s=0.2)
    address = bookie.address
    shell = ("shell", "--zookeeper", zk_connect, "--zk-root", zk_root)
    found = await store.read(address)
    assert found is not None
    registered = found[0]
    assert registered == json.loads((bookie.data_dir / "cookie.json").read_text())

    running = magnetar(*shell, "cookie-delete", "--bookie", address)
    assert running.returncode == 1 and "is registered" in running.stderr, running
    assert bookie.stop() == 0

    # An upgrade: directories with cookies but none in ZooKeeper. The bookie registers its own.
    await zk_session.delete(zk_session.paths.cookie(address))
    bookie.start()
    found = await store.read(address)
    assert found is not None and found[0] == registered
    assert bookie.stop() == 0

    shutil.rmtree(bookie.data_dir)  # the journal lives in data_dir/journal: both volumes gone
    with pytest.raises(ChildNotReady):
        bookie.start(timeout=15)
    refusal = [line for line in bookie.log_tail(20).splitlines() if "cookie-delete" in line]
    assert refusal and "are empty" in refusal[-1] and f"--bookie {address}" in refusal[-1], bookie.log_tail()
    found = await store.read(address)
    assert found is not None and found[0] == registered  # the refusal changed nothing

    retired = magnetar(*shell, "cookie-delete", "--bookie", address)
    assert retired.returncode == 0 and f"bookie {address}: cookie deleted" in retired.stdout, retired
    bookie.start()
    found = await store.read(address)
    assert found is not None
    assert found[0]["instance_id"] != registered["instance_id"]
    assert found[0] == json.loads((bookie.data_dir / "cookie.json").read_text())
    gone = magnetar(*shell, "cookie-delete", "--bookie", "127.0.0.1:1")
    assert gone.returncode == 1 and "has no cookie registered" in gone.stderr, gone
