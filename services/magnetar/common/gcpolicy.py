"""Keeping Python's cyclic garbage collector from stalling a latency-sensitive loop.

A full collection walks every tracked object. A broker with many messages in flight
(delayed messages waiting, acknowledged ranges, cached entries) or tens of thousands of
topics holds millions of them, and a full pass then stops the event loop for as long as
it walks them: hundreds of milliseconds every few seconds while the heap grows
(delayed-delivery lateness, docs/subscriptions.md), or 6-9 s at 60,000 topics, longer
than the ZooKeeper session, which then expires (docs/performance.md).

The policy: every ``freeze_interval_s`` the objects created since the last time are
collected (only they: everything older is frozen) and the survivors are moved out of the
collector's generations (``gc.freeze()``); the collector's own passes then only walk
what was created since. Every ``full_collect_interval_s`` everything is put back
(``gc.unfreeze()``) and one full collection frees cycles that died while frozen, but
only if it is expected to stop the loop at most ``max_full_pause_s``: the expected pause
is the number of frozen objects times the time per object of the last full collection
(the first one, at :meth:`GcPolicy.start`, runs on the young heap). A full collection
that would take longer is skipped and counted (``skipped_full``): what frozen cycles hold
then stays allocated, which is why the code avoids making cycles on hot failure paths
(a failed ZooKeeper read makes none, ``metadata/bridge.py``). Memory without cycles is
freed by reference counting whatever the collector does.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

log = logging.getLogger(__name__)


class GcPolicy:
    def __init__(self, freeze_interval_s: float, full_collect_interval_s: float, max_full_pause_s: float = 1.0) -> None:
        """Args:
        freeze_interval_s: 0 turns the policy off (the default collector runs).
        full_collect_interval_s: 0: never a full collection.
        max_full_pause_s: the longest a full collection may be expected to stop the loop.
        """
        self.freeze_interval_s = freeze_interval_s
        self.full_collect_interval_s = full_collect_interval_s
        self.max_full_pause_s = max_full_pause_s
        self.seconds_per_object = 0.0
        """Of the last full collection: the time it took divided by the objects it walked."""
        self.full_collections = 0
        """Full collections run (the first at :meth:`start`)."""
        self.longest_full_s = 0.0
        """The longest full collection this policy ran."""
        self.skipped_full = 0
        """Full collections skipped because they would have stopped the loop too long."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.freeze_interval_s > 0 and self._task is None:
            self._full_collection()  # measures the time per object while the heap is small
            gc.freeze()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="gc-policy")

    def expected_full_pause_s(self) -> float:
        """How long a full collection is expected to stop the loop now."""
        return gc.get_freeze_count() * self.seconds_per_object

    def _full_collection(self) -> None:
        gc.unfreeze()
        objects = len(gc.get_objects())
        started = time.perf_counter()
        freed = gc.collect()
        took = time.perf_counter() - started
        self.seconds_per_object = took / max(objects, 1)
        self.full_collections += 1
        self.longest_full_s = max(self.longest_full_s, took)
        log.info("full garbage collection: %d of %d objects freed in %.0f ms", freed, objects, took * 1000)

    async def _run(self) -> None:
        last_full = time.monotonic()
        while True:
            await asyncio.sleep(self.freeze_interval_s)
            if self.full_collect_interval_s > 0 and time.monotonic() - last_full >= self.full_collect_interval_s:
                last_full = time.monotonic()
                expected = self.expected_full_pause_s()
                if expected <= self.max_full_pause_s:
                    self._full_collection()
                else:
                    self.skipped_full += 1
                    log.warning(
                        "full garbage collection skipped: %d frozen objects, expected to stop the loop %.2f s "
                        "(gc_max_full_pause_s %.2f s); cycles that died while frozen stay allocated",
                        gc.get_freeze_count(), expected, self.max_full_pause_s,
                    )
            gc.collect()  # what is not frozen: created since the last freeze (garbage is not frozen)
            gc.freeze()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
