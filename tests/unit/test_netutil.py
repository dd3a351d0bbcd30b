"""Socket helpers."""

from __future__ import annotations

import socket

import pytest

from magnetar.common.netutil import can_connect, free_port, port_is_free, split_host_port


def test_free_port_is_bindable_and_detected_busy() -> None:
    port = free_port()
    assert 0 < port < 65536
    assert port_is_free("127.0.0.1", port)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        assert not port_is_free("127.0.0.1", port)
        assert can_connect(f"127.0.0.1:{port}")
    assert not can_connect(f"127.0.0.1:{port}", timeout_s=0.5)


@pytest.mark.parametrize("bad", ["localhost", "host:", ":80", "h:0", "h:70000", "h:x"])
def test_split_host_port_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        split_host_port(bad)


def test_split_host_port() -> None:
    assert split_host_port("127.0.0.1:3181") == ("127.0.0.1", 3181)
