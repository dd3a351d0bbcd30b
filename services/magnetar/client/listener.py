"""Message and reader listeners (pulsar-client's ``message_listener`` and
``reader_listener``): ``fn(handle, message)`` called for each message, in order.

The blocking client calls it on a thread of the handle's own (``magnetar-listener``),
as pulsar-client calls it on its listener thread; the asyncio client calls it on the
event loop (a coroutine function is awaited), one message at a time. An exception
raised by ``fn`` is logged and the next message is delivered; the listener stops when
the handle is closed (or fails: that error is logged).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from magnetar.common.errors import InvalidConfiguration, MagnetarError, ServiceClosed

from .message import Message

log = logging.getLogger(__name__)

Listener = Callable[[Any, Message], Any]


def check_listener(fn: object, name: str) -> None:
    """Refuse a listener that is not callable.

    Raises:
        InvalidConfiguration: ``fn`` is neither None nor callable.
    """
    if fn is not None and not callable(fn):
        raise InvalidConfiguration(f"{name} must be a function (handle, message), not {type(fn).__name__}")


def _ended(exc: MagnetarError, what: str) -> None:
    if not isinstance(exc, ServiceClosed):  # closed: the normal end
        log.error("%s: listener stopped: %s", what, exc)


async def run_listener(next_message: Callable[[], Awaitable[Message]], fn: Listener, handle: object, what: str) -> None:
    """The asyncio client's listener task: deliver each message to ``fn`` until the handle
    closes or fails."""
    while True:
        try:
            msg = await next_message()
        except MagnetarError as exc:
            _ended(exc, what)
            return
        try:
            result = fn(handle, msg)
            if inspect.isawaitable(result):
                await result
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: the listener raised; going on with the next message", what)


class ListenerThread:
    """The blocking client's listener: a thread that takes each message with
    ``next_message()`` (blocking) and calls ``fn(handle, message)``."""

    def __init__(self, next_message: Callable[[], Message], fn: Listener, handle: object, what: str) -> None:
        self._next = next_message
        self._fn = fn
        self._handle = handle
        self._what = what
        self._thread = threading.Thread(target=self._main, name="magnetar-listener", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        while True:
            try:
                msg = self._next()
            except MagnetarError as exc:
                _ended(exc, self._what)
                return
            except concurrent.futures.CancelledError:  # the client's loop stopped under it
                return
            try:
                self._fn(self._handle, msg)
            except Exception:
                log.exception("%s: the listener raised; going on with the next message", self._what)

    def join(self, timeout_s: float) -> None:
        """Wait for the thread to end (the handle is closed); not from the listener itself,
        which may close its own handle."""
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)
