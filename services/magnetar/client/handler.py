"""The stream a producer or consumer keeps to the broker serving its topic.

A handler opens the stream (lookup, then the first request and its answer), reads it
in an owned task, and when it breaks looks the topic up again and reopens it with
backoff (0.1 s doubling to 5 s) until it works, the error is fatal, or it is closed.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from magnetar.common.errors import AlreadyClosed, MagnetarError, NotConnected

from .connection import RECONNECT_RETRY, BrokerStream, ConnectionPool, is_retriable
from .session import SessionStream

log = logging.getLogger(__name__)


class ConnectionHandler:
    """Base of the per-topic producer and consumer: owns one stream and its reconnects."""

    kind = "handler"

    def __init__(self, pool: ConnectionPool, topic: str) -> None:
        self.pool = pool
        self.topic = topic
        self.broker_address = ""
        self.failed: MagnetarError | None = None
        self._call: BrokerStream | SessionStream | None = None
        self._closed = False
        self._released = False  # close() ran: tasks stopped, waiters failed
        self._task: asyncio.Task[None] | None = None
        self.reconnects = 0

    # -- what subclasses provide ---------------------------------------------
    async def _open(self, address: str, target: str) -> BrokerStream | SessionStream:
        """Open the stream to the broker at ``address`` and complete its handshake;
        raise a MagnetarError on failure."""
        raise NotImplementedError

    async def _read(self, call: BrokerStream | SessionStream) -> MagnetarError:
        """Read the stream until it breaks; return why."""
        raise NotImplementedError

    def _connected(self) -> None:
        """The stream is (again) open: resend, re-grant, flush."""

    def _disconnected(self) -> None:
        """The stream broke; a reconnect follows unless the error is fatal."""

    def _fail(self, exc: MagnetarError) -> None:
        """A fatal error: fail every waiter; the handler stays unusable."""
        raise NotImplementedError

    def _retry_on_reconnect(self, exc: MagnetarError) -> bool:
        return exc.retriable

    # -- lifecycle ------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._call is not None and not self._closed

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_usable(self) -> None:
        if self.failed is not None:
            raise self.failed
        if self._closed:
            raise AlreadyClosed(f"the {self.kind} on {self.topic} is closed")

    async def _open_once(self) -> BrokerStream | SessionStream:
        address = await self.pool.lookup(self.topic)
        self.broker_address = address
        target = f"broker {address} ({self.kind} on {self.topic})"
        in_session = self.pool.uses_session(address)
        try:
            return await self._open(address, target)
        except NotConnected:
            if in_session and not self.pool.uses_session(address):  # an older broker: a stream of its own, now
                return await self._open(address, target)
            raise

    async def start(self) -> None:
        """Open the first stream, retrying retriable errors for the operation timeout."""
        retry = replace(RECONNECT_RETRY, deadline_s=self.pool.operation_timeout_s)
        self._call = await retry.run(
            self._open_once,
            retry_on=is_retriable,
            on_retry=lambda exc, _: log.debug("%s on %s: open failed (%s); retrying", self.kind, self.topic, exc),
        )
        self._connected()
        self._task = asyncio.create_task(self._run(), name=f"{self.kind}:{self.topic}")

    async def _run(self) -> None:
        try:
            await self._run_inner()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("%s on %s: connection task crashed", self.kind, self.topic)
            self._fail(MagnetarError(f"{self.kind} on {self.topic} crashed: {exc!r}"))

    async def _run_inner(self) -> None:
        backoff = RECONNECT_RETRY.backoff()
        while not self._closed:
            call = self._call
            assert call is not None
            why = await self._read(call)
            call.cancel()
            self._call = None
            self._disconnected()
            if self._closed:
                return
            if not self._retry_on_reconnect(why):
                self._fail(why)
                return
            log.info("%s on %s: stream broke (%s); reconnecting", self.kind, self.topic, why)
            while True:
                await asyncio.sleep(backoff.next())
                if self._closed:
                    return
                try:
                    call = await self._open_once()
                except MagnetarError as exc:
                    if self._retry_on_reconnect(exc):
                        log.debug("%s on %s: reconnect failed (%s)", self.kind, self.topic, exc)
                        continue
                    self._fail(exc)
                    return
                break
            backoff.reset()
            self.reconnects += 1
            self._call = call
            log.info("%s on %s: reconnected to %s", self.kind, self.topic, self.broker_address)
            self._connected()

    async def _stop(self) -> None:
        """Stop the stream and the connection task (subclasses fail their waiters)."""
        self._closed = True
        self._released = True
        if self._call is not None:
            self._call.cancel()
            self._call = None
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
