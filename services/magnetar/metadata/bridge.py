"""The one bridge from kazoo's threads into asyncio (Convention 4).

Kazoo completes ``*_async`` calls, fires watches and reports state changes on its own
threads; everything here hands those over to the event loop with
``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


def call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    """Run ``fn(*args)`` on ``loop`` from any thread; dropped if the loop is closed."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        pass


async def wait_result(pending: Any) -> Any:
    """Await a kazoo ``IAsyncResult``: its value, or its exception raised here.

    A failure raised here carries a traceback that holds this frame, so the frame lets go
    of everything that holds the failure (the kazoo result, the future) on the way out:
    otherwise each failed call (a read of a znode that does not exist) leaves a
    reference cycle of ~26 objects that only a full collection frees.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] | None = loop.create_future()

    def settle(result: Any) -> None:
        if future is None or future.done():  # cancelled: the caller gave up waiting
            return
        if result.successful():
            future.set_result(result.value)
        else:
            future.set_exception(result.exception)

    pending.rawlink(lambda result: call_soon(loop, settle, result))
    del pending
    assert future is not None
    try:
        return await future
    finally:
        future = None
