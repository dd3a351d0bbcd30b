"""Small socket helpers: free loopback ports and reachability probes."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that nothing listens on right now.

    The port is only free at the time of the call; a caller that binds it later can
    still lose a race with another process, so callers retry on "address in use".
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(host: str, port: int) -> bool:
    """True when a listening TCP socket could be bound to ``host:port`` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def split_host_port(address: str) -> tuple[str, int]:
    """Split ``"host:port"`` into its parts.

    Raises:
        ValueError: the address has no port or the port is not a number in 1..65535.
    """
    host, sep, port_text = address.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"expected host:port, got {address!r}")
    return host, int(port_text)


def can_connect(address: str, timeout_s: float = 1.0) -> bool:
    """True when a TCP connection to ``host:port`` succeeds within ``timeout_s``."""
    host, port = split_host_port(address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False
