"""The garbage-collector policy: objects get frozen out of the collector on a timer, and a
periodic full collection unfreezes and frees cycles that died while frozen."""

from __future__ import annotations

import asyncio
import gc
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
