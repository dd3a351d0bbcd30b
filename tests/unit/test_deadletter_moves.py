"""A subscription's moves to the retry topic and the DLQ (broker/deadletter/moves.py) on
the topic twin, with a mover that records the copies and can hold them in flight."""

from __future__ import annotations

import asyncio

import pytest
from test_dispatch import Sink, publish, settle

from magnetar.broker.deadletter import DeadLetterDefaults, DeadLetterPolicy
from magnetar.broker.deadletter.copies import Move
from magnetar.broker.deadletter.policy import resolve
from magnetar.broker.subscription_type import InitialPosition, SubscriptionType
from magnetar.common.errors import ServiceClosed
from magnetar.common.message_id import MessageId
from magnetar.managedledger.position import Position

pytestmark = pytest.mark.asyncio


class HeldMover:
    """Stores copies in a list; copies to ``hold`` wait until ``release`` is set, and
    ``fail`` copies fail once (the target could not take them)."""

    def __init__(self, hold: str = "", fail: str = "") -> None:
        self.stored: list[Move] = []
        self.hold, self.fail = hold, fail
        self.release = asyncio.Event()
        self.waiting = asyncio.Event()

    async def publish(self, move: Move, keep_for: str) -> None:
        if move.target == self.fail:
            self.fail = ""
            raise ServiceClosed(f"topic {move.target} is closing")
        if move.target == self.hold:
            self.waiting.set()
            await self.release.wait()
        self.stored.append(move)

    async def close(self) -> None:
        pass


def policy(topic) -> DeadLetterPolicy:
    return resolve(topic.name, "s", DeadLetterDefaults(max_redeliver_count=1), None)


async def shared(topic, mover: HeldMover) -> tuple[object, DeadLetterPolicy]:
    topic.mover = mover
    sub = await topic.subscribe("s", SubscriptionType.Shared, InitialPosition.Earliest)
    sub.dead_letter = policy(topic)
    return sub, sub.dead_letter


def held_id(position: Position) -> MessageId:
    return MessageId(ledger_id=position[0], entry_id=position[1])


async def test_a_nack_while_its_reconsume_later_is_storing_the_copy_leaves_one_copy(topic):
    # The SDK negatively acknowledges a message whose reconsume_later timed out (the
    # broker still storing the copy): the redelivery must not move it to the DLQ too.
    mover = HeldMover(hold=policy(topic).retry_letter_topic)
    sub, p = await shared(topic, mover)
    a = Sink(sub, "a")
    a.consumer.dead_letter = p
    await publish(topic, 1)
    ((position, _, _, _),) = a.messages()
    moving = asyncio.ensure_future(sub.moves.reconsume_later(a.consumer, held_id(position), 1000))
    await mover.waiting.wait()
    sub.send_back(a.consumer, [position])  # the nack: count 1 = max_redeliver_count
    await settle()
    mover.release.set()
    await moving
    await settle()
    await sub.moves.close()
    assert [(m.target, m.dead) for m in mover.stored] == [(p.retry_letter_topic, False)]
    assert sub.cursor.is_acked(position) and a.consumer.pending == {}
    assert len(a.deliveries) == 1  # not delivered again either


async def test_a_move_to_the_dlq_that_failed_is_tried_again_and_stored_once(topic, monkeypatch):
    monkeypatch.setattr("magnetar.broker.deadletter.moves.RETRY_AFTER_FAILURE_S", 0.01)
    mover = HeldMover(fail=policy(topic).dead_letter_topic)
    sub, p = await shared(topic, mover)
    a = Sink(sub, "a")
    await publish(topic, 3)
    positions = [m[0] for m in a.messages()]
    sub.send_back(a.consumer, positions)  # nacked: the redeliveries go to the DLQ
    for _ in range(100):
        if all(sub.cursor.is_acked(q) for q in positions):
            break
        await asyncio.sleep(0.01)
    await sub.moves.close()
    assert sorted(m.message.properties["ORIGIN_MESSAGE_ID"] for m in mover.stored) == sorted(
        f"{q[0]}:{q[1]}:-1:-1" for q in positions
    )
    assert all(m.target == p.dead_letter_topic for m in mover.stored)
    assert all(sub.cursor.is_acked(q) for q in positions) and len(a.deliveries) == 3
