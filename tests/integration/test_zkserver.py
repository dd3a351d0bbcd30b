"""ZooKeeperServer: a real server as a child process."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from magnetar.common.childproc import ChildNotReady
from magnetar.common.netutil import free_port
from magnetar.common.zkserver import ZooKeeperServer, four_letter_word

pytestmark = pytest.mark.integration


def test_start_stop_restart_keeps_port_and_data(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk", force_sync=False)
    port = server.port
    try:
        server.start()
        assert server.connect_string == f"127.0.0.1:{port}"
        assert "Mode: standalone" in four_letter_word("127.0.0.1", port, "srvr")
        assert "forceSync=no" in (tmp_path / "zk" / "zoo.cfg").read_text()
        server.stop()
        assert not server.alive and not server.is_ready()
        server.start()
        assert server.port == port and server.is_ready()
        server.kill()
        assert server.returncode == -9
    finally:
        server.kill()
    assert (tmp_path / "zk" / "version-2").is_dir()
    assert "binding to port" in server.log_path.read_text()


def test_busy_port_fails_with_the_log_tail(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", port))
        blocker.listen()
        server = ZooKeeperServer(tmp_path / "zk", port=port, log_path=tmp_path / "zk.log")
        with pytest.raises(ChildNotReady) as info:
            server.start(timeout=20)
    assert "Address already in use" in str(info.value)
    assert str(tmp_path / "zk.log") in str(info.value)
    assert not server.alive
