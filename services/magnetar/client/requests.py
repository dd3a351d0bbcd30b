"""Requests on a consume stream answered by ``RequestDone`` (seek, unsubscribe).

Each request gets a stream-unique id; the reader task resolves the waiting future when
the answer with that id arrives, and everything still waiting fails when the stream
breaks or the consumer closes (the broker may or may not have done it then).
"""

from __future__ import annotations

import asyncio
import itertools

from magnetar.common.errors import MagnetarError, Timeout


class PendingRequests:
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[None]] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def new(self) -> int:
        """A new request id, with a future to wait on (see :meth:`wait`)."""
        request_id = next(self._ids)
        self._waiting[request_id] = asyncio.get_running_loop().create_future()
        return request_id

    async def wait(self, request_id: int, timeout_s: float, what: str) -> None:
        """Wait for the answer to ``request_id``.

        Raises:
            MagnetarError: the typed error the broker answered with, or the one the
                stream failed with.
            Timeout: no answer within ``timeout_s``.
        """
        fut = self._waiting.get(request_id)
        if fut is None:
            raise MagnetarError(f"no request {request_id} is waiting ({what})")
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError:
            raise Timeout(f"{what}: no answer within {timeout_s:g} s") from None
        finally:
            self._waiting.pop(request_id, None)
            _drop(fut)

    def done(self, request_id: int, error: MagnetarError | None = None) -> bool:
        """The broker answered ``request_id`` (with ``error``: it refused); False when no
        one waits for it (timed out already)."""
        fut = self._waiting.get(request_id)
        if fut is None or fut.done():
            return False
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(None)
        return True

    def forget(self, request_id: int) -> None:
        """Drop a request that could not be sent."""
        fut = self._waiting.pop(request_id, None)
        if fut is not None:
            _drop(fut)

    def fail_all(self, exc: MagnetarError) -> None:
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(exc)


def _drop(fut: asyncio.Future[None]) -> None:
    """Cancel a future no one will wait on, or take its outcome: the stream's breaking
    may have failed it already (a request whose write failed), and asyncio would log
    "Future exception was never retrieved"."""
    if not fut.done():
        fut.cancel()
    elif not fut.cancelled():
        fut.exception()
