"""The garbage-collector policy: objects get frozen out of the collector on a timer, and a
periodic full collection unfreezes and frees cycles that died while frozen."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref

from magnetar.common.gcpolicy import GcPolicy


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


async def test_live_objects_are_frozen_and_a_full_collection_frees_frozen_cycles():
    gc.unfreeze()
    node = Node()
    ref = weakref.ref(node)
    policy = GcPolicy(freeze_interval_s=0.05, full_collect_interval_s=0)
    policy.start()
    try:
        await asyncio.sleep(0.2)
        assert gc.get_freeze_count() > 0
        del node
        gc.collect()
        assert ref() is not None  # frozen: the collector does not see the dead cycle
    finally:
        await policy.close()
    collector = GcPolicy(freeze_interval_s=0.05, full_collect_interval_s=0.01)
    collector.start()
    try:
        await asyncio.sleep(0.2)
        assert ref() is None  # the full collection unfroze and freed it
    finally:
        await collector.close()
        gc.unfreeze()


async def test_an_interval_of_zero_turns_the_policy_off():
    gc.unfreeze()
    policy = GcPolicy(freeze_interval_s=0, full_collect_interval_s=600)
    policy.start()
    await asyncio.sleep(0.05)
    assert gc.get_freeze_count() == 0
    await policy.close()


LIVE_OBJECTS = 1_000_000
"""Enough that one full collection takes ~0.2-0.4 s on the reference machine (2 cores)."""


async def test_a_full_collection_that_would_outlast_the_bound_is_skipped_with_many_objects_alive():
    gc.unfreeze()
    gc.collect()
    bound_s = 0.05
    policy = GcPolicy(freeze_interval_s=0.05, full_collect_interval_s=0.1, max_full_pause_s=bound_s)
    policy.start()  # measures the time per object on today's (small) heap
    heap = [[i] for i in range(LIVE_OBJECTS)]  # alive throughout, as a broker's topics are
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while gc.get_freeze_count() < LIVE_OBJECTS:  # the policy froze them
            assert loop.time() < deadline
            await asyncio.sleep(0.01)
        assert policy.expected_full_pause_s() > bound_s  # the test has objects enough
        full_before = policy.full_collections
        # Every generation-2 collection over several full intervals, timed in this thread's
        # CPU time (a loaded machine's scheduling delays do not count): a full collection
        # of the frozen heap cost 0.08 s of CPU here, one of the young objects 0.02 ms.
        started: list[float] = []
        full_cpu_s: list[float] = []

        def timed(phase: str, info: dict[str, int]) -> None:
            if info["generation"] == 2:
                if phase == "start":
                    started.append(time.thread_time())
                elif started:
                    full_cpu_s.append(time.thread_time() - started.pop())

        gc.callbacks.append(timed)
        try:
            await asyncio.sleep(1.0)
        finally:
            gc.callbacks.remove(timed)
        assert policy.skipped_full >= 3
        assert policy.full_collections == full_before
        assert full_cpu_s, "no collection ran at all: the policy's own young collections are missing"
        assert max(full_cpu_s) < 0.01, sorted(full_cpu_s)[-5:]
    finally:
        await policy.close()
        gc.unfreeze()
        del heap
        gc.collect()
