"""Which event loop Magnetar's own loops run on: uvloop's when it is installed.

The services (``service_main``) and the blocking client's loop thread use it. With
uvloop the broker and the bookies spend about a fifth less CPU per unbatched message
(docs/performance.md): most of that cost is asyncio's own machinery around each gRPC
message. ``MAGNETAR_EVENT_LOOP=asyncio`` keeps asyncio's default loop.

``MAGNETAR_STALL_DUMP_S=<seconds>`` makes a service write every thread's stack to its
log (stderr) whenever its event loop stops turning that long: what blocked it (a
blocking call, a long synchronous loop) is then on the top of the main thread's stack.
"""

from __future__ import annotations

import asyncio
import faulthandler
import os
import sys
from collections.abc import Callable
from typing import TextIO

ENV = "MAGNETAR_EVENT_LOOP"
STALL_ENV = "MAGNETAR_STALL_DUMP_S"


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """A new-loop function: uvloop's, unless it is missing or ``MAGNETAR_EVENT_LOOP=asyncio``."""
    if os.environ.get(ENV, "uvloop") != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop  # type: ignore[no-any-return]
    return asyncio.new_event_loop


def stall_threshold_s() -> float | None:
    """``MAGNETAR_STALL_DUMP_S`` as seconds; None when unset, not a number or not > 0."""
    try:
        value = float(os.environ.get(STALL_ENV, ""))
    except ValueError:
        return None
    return value if value > 0 else None


async def dump_stacks_on_stalls(threshold_s: float, file: TextIO = sys.stderr) -> None:
    """Until cancelled: when the running loop has not turned for ``threshold_s``, every
    thread's stack goes to ``file`` (by faulthandler's own thread, which needs no loop).
    The alarm is re-armed four times per threshold, so it fires only on a real stall."""
    try:
        while True:
            faulthandler.dump_traceback_later(threshold_s, file=file)
            await asyncio.sleep(threshold_s / 4)
    finally:
        faulthandler.cancel_dump_traceback_later()
