"""FaultProxy against a small threaded echo server: forwarding, blackhole, cut, refuse, heal."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from magnetar.common.netutil import free_port
from magnetar.testing.faultproxy import FaultProxy, ProxyMode

WAIT_S = 5.0
"""Generous timeout for things that must happen."""
SILENT_S = 0.3
"""Short timeout for "nothing arrives"."""


class EchoServer:
    """A threaded TCP echo server on a free loopback port; counts the connections it saw."""

    def __init__(self) -> None:
        self.accepted = 0
        lock = threading.Lock()
        owner = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                with lock:
                    owner.accepted += 1
                with contextlib.suppress(OSError):
                    while data := self.request.recv(65536):
                        self.request.sendall(data)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(WAIT_S)


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def proxy(echo: EchoServer) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", echo.port) as started:
        yield started


@pytest.fixture
def connect(proxy: FaultProxy) -> Iterator[Callable[[], socket.socket]]:
    """Open client sockets to the proxy; all closed at the end of the test."""
    with contextlib.ExitStack() as stack:

        def open_client() -> socket.socket:
            sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=WAIT_S)
            return stack.enter_context(sock)

        yield open_client


def wait_until(condition: Callable[[], bool], timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    sock.settimeout(WAIT_S)
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, f"EOF after {len(data)} of {size} bytes"
        data += chunk
    return data


def echoes(sock: socket.socket, payload: bytes = b"ping") -> bool:
    sock.sendall(payload)
    return recv_exactly(sock, len(payload)) == payload


def assert_silent(sock: socket.socket) -> None:
    """Nothing arrives, and the socket is not closed (no EOF, no reset)."""
    sock.settimeout(SILENT_S)
    with pytest.raises(TimeoutError):
        sock.recv(1)


def assert_closed(sock: socket.socket) -> None:
    """The peer closed the connection (EOF, or a reset if it had unread bytes)."""
    sock.settimeout(WAIT_S)
    try:
        data = sock.recv(1)
    except ConnectionResetError:
        return
    assert data == b""


def test_forwards_both_ways(proxy: FaultProxy, connect: Callable[[], socket.socket]) -> None:
    assert proxy.address == f"127.0.0.1:{proxy.port}"
    assert proxy.mode is ProxyMode.FORWARD
    first, second = connect(), connect()
    assert echoes(first, b"hello")
    assert echoes(second, b"world")
    wait_until(lambda: proxy.connections == 2)
    first.close()
    wait_until(lambda: proxy.connections == 1)


def test_forwards_a_large_payload(connect: Callable[[], socket.socket]) -> None:
    sock = connect()
    payload = bytes(range(256)) * 4096  # 1 MiB: more than the socket buffers hold
    sender = threading.Thread(target=sock.sendall, args=(payload,))
    sender.start()
    try:
        assert recv_exactly(sock, len(payload)) == payload
    finally:
        sender.join(WAIT_S)


def test_half_close_is_passed_on(connect: Callable[[], socket.socket]) -> None:
    sock = connect()
    sock.sendall(b"last words")
    sock.shutdown(socket.SHUT_WR)
    assert recv_exactly(sock, 10) == b"last words"
    assert_closed(sock)


def test_blackhole_holds_connections_open_and_drops_bytes(
    echo: EchoServer, proxy: FaultProxy, connect: Callable[[], socket.socket]
) -> None:
    old = connect()
    assert echoes(old)
    proxy.blackhole()
    assert proxy.mode is ProxyMode.BLACKHOLE
    old.sendall(b"lost")
    assert_silent(old)
    old.sendall(b"still writable")

    new = connect()  # accepted, never forwarded
    wait_until(lambda: proxy.connections == 2)
    new.sendall(b"hello?")
    assert_silent(new)
    assert echo.accepted == 1

    proxy.heal()  # black-holed connections are closed, new ones forwarded
    assert proxy.mode is ProxyMode.FORWARD
    assert_closed(old)
    assert_closed(new)
    assert proxy.connections == 0
    assert echoes(connect(), b"back")


def test_cut_closes_connections_and_new_ones_work(
    proxy: FaultProxy, connect: Callable[[], socket.socket]
) -> None:
    first, second = connect(), connect()
    assert echoes(first) and echoes(second)
    proxy.cut()
    assert proxy.connections == 0
    assert_closed(first)
    assert_closed(second)
    assert echoes(connect(), b"again")
    wait_until(lambda: proxy.connections == 1)


def test_cut_ends_a_blackhole(proxy: FaultProxy, connect: Callable[[], socket.socket]) -> None:
    proxy.blackhole()
    held = connect()
    wait_until(lambda: proxy.connections == 1)
    proxy.cut()
    assert_closed(held)
    assert proxy.mode is ProxyMode.FORWARD
    assert echoes(connect())


def test_refuse_closes_old_and_new_connections_until_heal(
    echo: EchoServer, proxy: FaultProxy, connect: Callable[[], socket.socket]
) -> None:
    old = connect()
    assert echoes(old)
    proxy.refuse()
    assert proxy.mode is ProxyMode.REFUSE
    assert_closed(old)
    assert_closed(connect())
    assert proxy.connections == 0
    assert echo.accepted == 1

    proxy.heal()
    assert echoes(connect(), b"open again")


def test_unreachable_target_closes_the_client(echo: EchoServer) -> None:
    with FaultProxy("127.0.0.1", free_port()) as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=WAIT_S) as sock:
            assert_closed(sock)
        assert proxy.connections == 0


def test_stop_is_idempotent_and_closes_everything(echo: EchoServer) -> None:
    FaultProxy("127.0.0.1", echo.port).stop()  # never started: a no-op
    proxy = FaultProxy("127.0.0.1", echo.port).start()
    assert proxy.running
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=WAIT_S) as sock:
        assert echoes(sock)
        proxy.stop()
        proxy.stop()
        assert not proxy.running
        assert_closed(sock)
    assert proxy.connections == 0
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=WAIT_S).close()
    with pytest.raises(RuntimeError):
        proxy.cut()
    with pytest.raises(RuntimeError):
        proxy.start()


async def test_usable_from_an_async_test(echo: EchoServer) -> None:
    with FaultProxy("127.0.0.1", echo.port) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        try:
            writer.write(b"ping")
            assert await asyncio.wait_for(reader.readexactly(4), WAIT_S) == b"ping"
            proxy.blackhole()
            writer.write(b"void")
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(reader.read(1), SILENT_S)
            proxy.heal()
            with contextlib.suppress(ConnectionResetError):
                assert await asyncio.wait_for(reader.read(), WAIT_S) == b""
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
