"""Bookies lost and back: a topic whose ensemble change found no writable bookie opens
a new ledger by itself once bookies return (no unload), and nothing acknowledged is
lost or stored twice."""

from __future__ import annotations

import asyncio
import time

import pytest

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
from magnetar.testing.processes import start_all

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUORUM = dict(ensemble_size=2, write_quorum=2, ack_quorum=2)
# A SIGKILLed bookie's registration goes once its 1.5 s session expires, so the broker
# soon finds fewer writable bookies than the ensemble needs.
BOOKIE = dict(zk_session_timeout_s=1.5)
RECOVERY_BOUND_S = 15.0
"""docs/broker.md: 2 x T + 5 s with the default T of 5 s."""


async def test_a_topic_failed_for_want_of_bookies_reopens_on_the_next_send(bookie_factory, broker_factory):
    bookies = [bookie_factory.create(**BOOKIE) for _ in range(3)]
    # Without deduplication a message stored twice would show in the topic.
    broker = broker_factory.create(**QUORUM, deduplication_enabled=False)
    start_all([*bookies, broker])  # start-ups overlap
    topic = "persistent://public/default/bookie-outage"
    acked: dict[int, float] = {}
    total = 600
    async with mg.Client(broker.address) as client, AdminClient(broker.address, 10) as admin:
        producer = await client.create_producer(
            topic, producer_name="outage-producer", block_if_queue_full=True, send_timeout_millis=120_000,
        )  # fmt: skip
        first_ledger = (await admin.internal_stats(topic)).ledgers[0].ledger_id

        def on_ack(i: int):
            def callback(result, msg_id):
                if msg_id is not None:
                    acked[i] = time.monotonic()
            return callback

        async def produce() -> None:
            for i in range(total):
                await producer.enqueue(b"%06d" % i, on_ack(i))
                await asyncio.sleep(0.005)
            await producer.flush()

        producing = asyncio.create_task(produce())
        while len(acked) < 100:
            await asyncio.sleep(0.01)
        for b in bookies[1:]:  # one writable bookie left, the ensemble needs two
            await asyncio.to_thread(b.kill)
        stalled_at = len(acked)
        await asyncio.sleep(3.0)  # registrations expire; sends go on failing meanwhile
        during = len(acked) - stalled_at
        for b in bookies[1:]:
            await asyncio.to_thread(b.start)
        back_at = time.monotonic()
        await asyncio.wait_for(producing, RECOVERY_BOUND_S + 30)
        resumed = min(t for t in acked.values() if t > back_at)
        stats = await admin.internal_stats(topic)

    assert during < 50, f"{during} sends were acknowledged with one writable bookie of the two needed"
    assert resumed - back_at <= RECOVERY_BOUND_S, f"sends resumed {resumed - back_at:.1f} s after the bookies came back"
    assert sorted(acked) == list(range(total))
    assert [i.ledger_id for i in stats.ledgers][0] == first_ledger and len(stats.ledgers) >= 2  # a new ledger, same topic

    async with mg.Client(broker.address) as client:  # every acknowledged message, once, in order
        check = await client.subscribe(topic, "check", initial_position=mg.InitialPosition.Earliest)
        stored = [int((await check.receive(timeout_millis=30_000)).data()) for _ in range(total)]
        assert stored == list(range(total))
        with pytest.raises(mg.Timeout):
            await check.receive(timeout_millis=1000)
