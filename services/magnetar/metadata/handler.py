"""Kazoo's threading handler, waiting on its sockets with ``poll`` instead of a new
``epoll`` selector per wait.

Kazoo's connection thread waits on its socket before each request it writes and each
reply it reads, and its stock handler builds a ``selectors.DefaultSelector`` for every
such wait (``epoll_create``, ``epoll_ctl``, ``epoll_wait``, ``close``: four system calls
and a few Python objects). Under a burst of admin creates that was about a quarter of
the broker's CPU (py-spy, bench/metadata.py). A ``poll`` object holds no kernel state:
one system call per wait, and no limit on descriptor numbers (unlike ``select``, which
is why kazoo left it).
"""

from __future__ import annotations

import select
from collections.abc import Sequence
from typing import Any

from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.handlers.utils import fileobj_to_fd

_READABLE = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR | select.POLLNVAL
"""What makes a descriptor ready to read: data, or a hang-up or error the read will report
(selectors' epoll mapping reports those as readable too)."""


def poll_select(
    rlist: Sequence[Any], wlist: Sequence[Any], xlist: Sequence[Any], timeout: float | None = None
) -> tuple[list[Any], list[Any], list[Any]]:
    """``select.select``'s contract (as kazoo's ``selector_select`` keeps it) over ``poll``:
    the objects of ``rlist`` ready to read and of ``wlist`` ready to write, within
    ``timeout`` seconds (None: no limit); ``xlist`` is never reported, as in kazoo.

    Raises:
        TypeError, ValueError: a timeout that is not a non-negative number; an object
            without a valid descriptor.
    """
    if timeout is not None:
        if not isinstance(timeout, (int, float)):
            raise TypeError("timeout must be a number")
        if timeout < 0:
            raise ValueError("timeout must be non-negative")
    wanted: dict[int, int] = {}
    objects: dict[int, list[Any]] = {}
    for mask, items in ((select.POLLIN, rlist), (select.POLLOUT, wlist)):
        for item in items:
            fd = fileobj_to_fd(item)
            wanted[fd] = wanted.get(fd, 0) | mask
            objects.setdefault(fd, []).append(item)
    poller = select.poll()
    for fd, mask in wanted.items():
        poller.register(fd, mask)
    readable: list[Any] = []
    writable: list[Any] = []
    for fd, events in poller.poll(None if timeout is None else timeout * 1000):
        if events & _READABLE:  # kazoo's order: readable first, then writable
            readable.extend(objects[fd])
        elif events & select.POLLOUT:
            writable.extend(objects[fd])
    return readable, writable, []


class PollingThreadingHandler(SequentialThreadingHandler):
    """Kazoo's ``SequentialThreadingHandler``, waiting with :func:`poll_select`."""

    name = "magnetar_polling_threading_handler"

    def select(self, *args: Any, **kwargs: Any) -> tuple[list[Any], list[Any], list[Any]]:
        return poll_select(*args, **kwargs)
