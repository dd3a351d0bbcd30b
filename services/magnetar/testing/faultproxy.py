"""A TCP proxy for fault-injection tests: put it between a service and the server it talks
to (a broker and ZooKeeper, say) and the test can cut, stall or refuse that one link while
both processes keep running.

The service is configured with :attr:`FaultProxy.address` instead of the server's address.
The proxy runs its own asyncio event loop in its own thread, so it works the same from
synchronous code and from async tests (it never touches the caller's loop), and every
control (:meth:`~FaultProxy.blackhole`, :meth:`~FaultProxy.cut`,
:meth:`~FaultProxy.refuse`, :meth:`~FaultProxy.heal`) is a blocking call that returns once
the change has taken effect in the proxy thread::

    with FaultProxy(zk_host, zk_port) as proxy:
        broker = brokers.create(...)  # given proxy.address as its ZooKeeper
        proxy.blackhole()             # a silent partition: the session times out
        ...
        proxy.heal()                  # the client reconnects through the proxy
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

log = logging.getLogger(__name__)

_CHUNK = 64 * 1024
_CLOSE_TIMEOUT_S = 1.0
"""How long a closed socket may take to flush before it is reset instead."""

T = TypeVar("T")


class ProxyMode(enum.Enum):
    """What the proxy does with bytes and with new connections."""

    FORWARD = "forward"
    """Normal operation: every connection is forwarded to the target."""
    BLACKHOLE = "blackhole"
    """Connections stay open, every byte is dropped; new connections are accepted, not forwarded."""
    REFUSE = "refuse"
    """New connections are closed as soon as they are accepted."""


class _End:
    """One socket of a proxied connection (the client's or the target's)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.open = True

    def close(self) -> None:
        """Close the socket (a FIN once pending bytes are flushed); idempotent."""
        if self.open:
            self.open = False
            self.writer.close()


class _Link:
    """One proxied connection: the client's socket and, once connected, the target's."""

    def __init__(self, client: _End, blackholed: bool) -> None:
        self.client = client
        self.upstream: _End | None = None
        self.blackholed = blackholed
        self.closed = False
        self.eofs = 0

    def ends(self) -> list[_End]:
        """The sockets of this connection."""
        return [self.client] if self.upstream is None else [self.client, self.upstream]


class FaultProxy:
    """A TCP proxy to ``target_host:target_port`` with switchable faults.

    Faults:
        * :meth:`blackhole`: a silent network partition. Every connection stays open (no
          FIN, no RST either way) and the bytes read from either side are **dropped**
          (read and discarded, so nothing piles up and nothing is delivered late). New
          connections are accepted but never connected to the target.
        * :meth:`cut`: a connection blip. Every current connection is closed on both sides;
          new connections are forwarded as usual.
        * :meth:`refuse`: the server is gone. Current connections are closed and new ones are
          closed as soon as they are accepted (the listening port stays open, so a client
          sees its connection accepted and then closed, not "connection refused").
        * :meth:`heal`: back to forwarding. Connections black-holed earlier are closed (both
          sides) so the client reconnects cleanly rather than resuming a stream with a gap.

    While black-holed, a side that hangs up (EOF or reset) has its own socket closed and
    nothing is told to the other side. When forwarding, a half-close (EOF) is passed on
    and the connection is closed once both directions have ended; a reset from either side
    closes both.
    """

    def __init__(
        self,
        target_host: str,
        target_port: int,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
        *,
        connect_timeout_s: float = 5.0,
        control_timeout_s: float = 10.0,
    ) -> None:
        """Describe the proxy; nothing listens until :meth:`start`.

        Args:
            target_host: host of the server to forward to.
            target_port: its port.
            listen_host: address to listen on.
            listen_port: port to listen on (default 0: a free one, picked by :meth:`start`).
            connect_timeout_s: how long a connection to the target may take; a client whose
                target connection fails is closed.
            control_timeout_s: how long a control call waits for the proxy thread.
        """
        self.target_host = target_host
        self.target_port = target_port
        self.listen_host = listen_host
        self._port = listen_port
        self._connect_timeout_s = connect_timeout_s
        self._control_timeout_s = control_timeout_s
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False
        # Touched only in the proxy thread:
        self._server: asyncio.Server | None = None
        self._mode = ProxyMode.FORWARD
        self._links: set[_Link] = set()
        self._handlers: set[asyncio.Task[Any]] = set()

    # -- public API ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The listening port (before :meth:`start`: the one asked for, maybe 0)."""
        return self._port

    @property
    def address(self) -> str:
        """``HOST:PORT`` to give the client instead of the target's address."""
        return f"{self.listen_host}:{self._port}"

    @property
    def target(self) -> str:
        """``HOST:PORT`` of the server the proxy forwards to."""
        return f"{self.target_host}:{self.target_port}"

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._thread is not None and not self._stopped

    @property
    def mode(self) -> ProxyMode:
        """The current fault mode (:attr:`ProxyMode.FORWARD` when healthy)."""
        return self._mode

    @property
    def connections(self) -> int:
        """Number of client connections open now (0 when not running)."""
        if not self.running:
            return 0
        return self._call(self._count_connections())

    def start(self, timeout: float = 10.0) -> Self:
        """Start the proxy thread and return once the proxy listens.

        Raises:
            RuntimeError: already started (a stopped proxy cannot be started again).
            OSError: the listening address could not be bound.
        """
        with self._lock:
            if self._thread is not None:
                raise RuntimeError(f"{self!r} was already started")
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=self._run_loop, args=(loop,), name=f"faultproxy->{self.target}", daemon=True
            )
            self._loop, self._thread = loop, thread
            thread.start()
            try:
                self._port = asyncio.run_coroutine_threadsafe(self._listen(), loop).result(timeout)
            except BaseException:
                self._stop_locked(timeout)
                raise
        log.info("fault proxy %s -> %s listening", self.address, self.target)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Close the listening socket and every connection, then end the thread; idempotent
        (and a no-op on a proxy never started)."""
        with self._lock:
            self._stop_locked(timeout)

    def blackhole(self) -> None:
        """Start a silent partition: keep every connection open, drop every byte, and accept
        new connections without forwarding them. Ended by :meth:`heal` (or :meth:`cut`).

        Bytes the proxy had already handed to a socket before this call may still arrive.
        """
        count = self._call(self._blackhole())
        log.info(
            "fault proxy %s -> %s: blackhole (%d connections held)",
            self.address,
            self.target,
            count,
        )

    def cut(self) -> None:
        """Close every current connection on both sides; new connections are forwarded
        (this also ends a blackhole or refuse)."""
        count = self._call(self._close_and_set(ProxyMode.FORWARD))
        log.info("fault proxy %s -> %s: cut %d connections", self.address, self.target, count)

    def refuse(self) -> None:
        """Close every current connection and close new ones at once, until :meth:`heal`."""
        count = self._call(self._close_and_set(ProxyMode.REFUSE))
        log.info(
            "fault proxy %s -> %s: refuse (closed %d connections)", self.address, self.target, count
        )

    def heal(self) -> None:
        """Forward new connections again; close the connections black-holed earlier (both
        sides) so their clients reconnect cleanly. Connections that were forwarding stay."""
        count = self._call(self._heal())
        log.info(
            "fault proxy %s -> %s: healed (closed %d black-holed connections)",
            self.address,
            self.target,
            count,
        )

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"FaultProxy({self.address} -> {self.target}, {self._mode.value})"

    # -- thread plumbing -------------------------------------------------------------------

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` in the proxy thread and return its result."""
        loop = self._loop
        if loop is None or not self.running:
            coro.close()
            raise RuntimeError(f"{self!r} is not running")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(
                "FaultProxy controls are blocking calls; not from the proxy's own thread"
            )
        return asyncio.run_coroutine_threadsafe(coro, loop).result(self._control_timeout_s)

    def _stop_locked(self, timeout: float) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or self._stopped:
            return
        self._stopped = True
        try:
            if thread.is_alive():
                asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout)
        except Exception:
            log.warning("fault proxy %s: unclean shutdown", self.address, exc_info=True)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout)
        log.info("fault proxy %s -> %s stopped", self.address, self.target)

    @staticmethod
    def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(asyncio.sleep(0))  # let closed transports finish closing
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    # -- in the proxy thread ---------------------------------------------------------------

    async def _listen(self) -> int:
        self._server = await asyncio.start_server(self._on_client, self.listen_host, self._port)
        return int(self._server.sockets[0].getsockname()[1])

    async def _count_connections(self) -> int:
        return sum(1 for link in self._links if link.client.open)

    async def _blackhole(self) -> int:
        self._mode = ProxyMode.BLACKHOLE
        for link in self._links:
            link.blackholed = True
        return len(self._links)

    async def _close_and_set(self, mode: ProxyMode) -> int:
        self._mode = mode
        return await self._close_links(list(self._links))

    async def _heal(self) -> int:
        self._mode = ProxyMode.FORWARD
        return await self._close_links([link for link in self._links if link.blackholed])

    async def _shutdown(self) -> None:
        self._mode = ProxyMode.REFUSE
        if self._server is not None:
            self._server.close()
        await self._close_links(list(self._links))
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await self._close_links(list(self._links))  # any made while the handlers ended

    async def _close_links(self, links: list[_Link]) -> int:
        """Close ``links`` (both sides) and wait until their sockets are closed."""
        ends = [end for link in links for end in link.ends() if end.open]
        for link in links:
            self._close_link(link)
        await self._settle(ends)
        return len(links)

    def _close_link(self, link: _Link) -> None:
        link.closed = True
        for end in link.ends():
            end.close()
        self._links.discard(link)

    def _close_end(self, link: _Link, end: _End) -> None:
        """Close one side only (a black-holed connection: the other side is not told)."""
        end.close()
        if not any(e.open for e in link.ends()):
            self._close_link(link)

    @staticmethod
    async def _settle(ends: list[_End]) -> None:
        """Wait until the sockets of ``ends`` (already closing) are closed; reset any whose
        pending bytes do not flush in time."""

        async def closed(end: _End) -> None:
            with contextlib.suppress(Exception):
                await end.writer.wait_closed()

        if not ends:
            return
        try:
            await asyncio.wait_for(asyncio.gather(*(closed(end) for end in ends)), _CLOSE_TIMEOUT_S)
        except TimeoutError:
            for end in ends:
                end.writer.transport.abort()

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client = _End(reader, writer)
        if self._mode is ProxyMode.REFUSE:
            client.close()
            return
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        link = _Link(client, blackholed=self._mode is ProxyMode.BLACKHOLE)
        self._links.add(link)
        try:
            if not link.blackholed:
                try:
                    target = asyncio.open_connection(self.target_host, self.target_port)
                    up_reader, up_writer = await asyncio.wait_for(target, self._connect_timeout_s)
                except (OSError, TimeoutError) as exc:
                    log.debug("fault proxy %s: cannot reach %s: %r", self.address, self.target, exc)
                    return
                upstream = _End(up_reader, up_writer)
                if link.closed:  # cut or refused while connecting
                    upstream.close()
                    return
                link.upstream = upstream
            pumps = [self._pump(link, link.client, link.upstream)]
            if link.upstream is not None:
                pumps.append(self._pump(link, link.upstream, link.client))
            await asyncio.gather(*pumps)
        finally:
            self._close_link(link)
            if task is not None:
                self._handlers.discard(task)

    async def _pump(self, link: _Link, src: _End, dst: _End | None) -> None:
        """Copy ``src`` to ``dst`` until ``src`` ends; drop the bytes while black-holed."""
        failed = False
        try:
            while True:
                data = await src.reader.read(_CHUNK)
                if not data:
                    break
                if link.blackholed or dst is None or not dst.open:
                    continue
                dst.writer.write(data)
                await dst.writer.drain()
        except OSError:
            failed = True
        if link.closed or not src.open:
            return
        if link.blackholed:
            self._close_end(link, src)
            return
        link.eofs += 1
        if (
            failed
            or dst is None
            or not dst.open
            or link.eofs >= 2
            or not dst.writer.can_write_eof()
        ):
            self._close_link(link)
            return
        try:
            dst.writer.write_eof()
        except OSError:
            self._close_link(link)
