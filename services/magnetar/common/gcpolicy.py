"""Keeping Python's cyclic garbage collector from stalling a latency-sensitive loop.

A full collection walks every tracked object. A broker with many messages in flight
(delayed messages waiting, acknowledged ranges, cached entries) holds millions of them,
and a full pass then stops the event loop for tens to hundreds of milliseconds, every few
seconds while the heap grows: measured as delayed-delivery lateness (docs/subscriptions.md).

The policy: every ``freeze_interval_s`` the objects alive then are moved out of the
collector's generations (``gc.freeze()``), so the collector only walks what was created
since; every ``full_collect_interval_s`` they are put back (``gc.unfreeze()``) and one
full collection runs, so garbage cycles that died while frozen are freed after all. Memory
without cycles is freed by reference counting whatever the collector does; what frozen
cycles hold waits for the next full collection. The cost moves from a pause every few
seconds to one longer pause per full interval.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

log = logging.getLogger(__name__)


class GcPolicy:
    def __init__(self, freeze_interval_s: float, full_collect_interval_s: float) -> None:
        """Args: freeze_interval_s: 0 turns the policy off (the default collector runs)."""
        self.freeze_interval_s = freeze_interval_s
        self.full_collect_interval_s = full_collect_interval_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.freeze_interval_s > 0 and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="gc-policy")

    async def _run(self) -> None:
        last_full = time.monotonic()
        while True:
            await asyncio.sleep(self.freeze_interval_s)
            if self.full_collect_interval_s > 0 and time.monotonic() - last_full >= self.full_collect_interval_s:
                started = time.perf_counter()
                gc.unfreeze()
                freed = gc.collect()
                last_full = time.monotonic()
                log.info("full garbage collection: %d objects freed in %.0f ms", freed, (time.perf_counter() - started) * 1000)
            gc.freeze()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
