"""The Spark tests' DLQ filler (magnetar_spark.testing.dead_letter) against a broker that
keeps dropping the topics (unloaded again and again, as a broker whose lease lapses under
load drops them): every message reaches the DLQ exactly once, nothing is lost and nothing
is moved twice."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import pytest
from magnetar_spark.testing import Cluster, backlog, dead_letter, read_all

from magnetar.client.rest_admin import RestAdmin
from magnetar.common.errors import MagnetarError

pytestmark = pytest.mark.integration

COUNT = 3000


async def _unload_in_turn(c: Cluster, topics: list[str], stop: asyncio.Event) -> int:
    """Unload the topics one after the other every 0.2 s, from the start until ``stop``; returns how many
    unloads the broker did."""
    done = 0
    async with RestAdmin(c.admin_url) as admin:
        turn = 0
        while not stop.is_set():
            try:
                await admin.unload_topic(topics[turn % len(topics)])
                done += 1
            except MagnetarError:
                pass  # not loaded right now (its clients are reconnecting)
            turn += 1
            await asyncio.sleep(0.2)
    return done


def test_every_message_reaches_the_dlq_once_while_the_topics_are_unloaded(mcluster: Cluster) -> None:
    topic = f"persistent://public/default/unloaded-{uuid.uuid4().hex[:8]}"
    dlq = f"{topic}-s-DLQ"

    async def fill() -> tuple[list[str], int]:
        stop = asyncio.Event()
        unloading = asyncio.ensure_future(_unload_in_turn(mcluster, [topic, f"{topic}-s-RETRY", dlq], stop))
        try:
            ids = await dead_letter(mcluster.service_url, topic, "s", COUNT)
        finally:
            stop.set()
        return ids, await unloading

    ids, unloads = asyncio.run(fill())
    assert len(ids) == COUNT and unloads >= 3  # each topic at least once
    copies = asyncio.run(read_all(mcluster.service_url, dlq))
    assert Counter(int(m.properties()["n"]) for m in copies) == Counter(range(COUNT))  # each exactly once
    assert asyncio.run(backlog(mcluster.admin_url, dlq, "s-DLQ-sub")) == COUNT
