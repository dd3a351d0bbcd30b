"""Which event loop Magnetar's own loops run on: uvloop's when it is installed.

The services (``service_main``) and the blocking client's loop thread use it. With
uvloop the broker and the bookies spend about a fifth less CPU per unbatched message
(docs/performance.md): most of that cost is asyncio's own machinery around each gRPC
message. ``MAGNETAR_EVENT_LOOP=asyncio`` keeps asyncio's default loop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

ENV = "MAGNETAR_EVENT_LOOP"


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
