"""An ``asyncio.Event`` that costs little while nobody waits on it.

``asyncio.Event`` allocates a ``collections.deque`` for its waiters when it is created
(760 bytes on CPython 3.11, most of it the deque's first block) and carries a
``__dict__``. A broker holds several events per loaded topic (the dispatcher's wake-up,
the cursor's, the managed ledger's new entries), nearly all of them never awaited while
the topic is idle: 10,000 topics paid about 30 MiB for empty deques. :class:`LightEvent`
has slots and creates its waiter list on the first :meth:`wait`.
"""

from __future__ import annotations

import asyncio


class LightEvent:
    """``asyncio.Event``'s ``set``/``clear``/``is_set``/``wait``; bound to the running loop
    of its first waiter."""

    __slots__ = ("_value", "_waiters")

    def __init__(self) -> None:
        self._value = False
        self._waiters: list[asyncio.Future[bool]] | None = None

    def is_set(self) -> bool:
        return self._value

    def set(self) -> None:
        """Set the flag and wake every waiter."""
        if not self._value:
            self._value = True
            if self._waiters:
                for fut in self._waiters:
                    if not fut.done():
                        fut.set_result(True)

    def clear(self) -> None:
        self._value = False

    async def wait(self) -> bool:
        """Return at once if the flag is set, else when :meth:`set` is called."""
        if self._value:
            return True
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(fut)
        try:
            await fut
            return True
        finally:
            self._waiters.remove(fut)
            if not self._waiters:
                self._waiters = None
