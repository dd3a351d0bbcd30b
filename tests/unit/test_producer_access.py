"""Producer access modes and the topic epoch of a topic (a real managed ledger over the
fake bookies and metadata store of the managed ledger's unit tests)."""

from __future__ import annotations

import asyncio

import pulsar
import pytest
from test_dedup_snapshot import Owner, send
from test_managed_ledger_core import FakeLedgerClient, MemoryStore

from magnetar.broker.access import EPOCH_PROPERTY, ProducerAccessMode
from magnetar.broker.topic import PersistentTopic
from magnetar.common.errors import InvalidArgument, MagnetarError, ProducerBusy, ProducerFenced

Mode = ProducerAccessMode


class Closed:
    """An on_close callback that keeps the error it was called with."""

    def __init__(self) -> None:
        self.error: MagnetarError | None = None

    def __call__(self, error: MagnetarError) -> None:
        self.error = error


def stored_epoch(store: MemoryStore) -> int:
    (doc, _), = store.lists.values()  # fmt: skip
    return int(doc["properties"][EPOCH_PROPERTY])


async def fresh() -> tuple[PersistentTopic, FakeLedgerClient, MemoryStore]:
    client, store = FakeLedgerClient(), MemoryStore()
    return await Owner(client, store).take_over(), client, store


def test_the_modes_are_pulsar_clients():
    assert {m.name: m.value for m in Mode} == {m.name: int(m.value) for m in pulsar.ProducerAccessMode.__members__.values()}
    assert Mode.of("WaitForExclusive") is Mode.WaitForExclusive and Mode.of(3) is Mode.ExclusiveWithFencing
    with pytest.raises(InvalidArgument, match="unknown producer access mode"):
        Mode.of("Exclusif")


async def test_exclusive_refuses_others_and_shared_is_refused_while_it_holds():
    topic, _, store = await fresh()
    shared = await topic.open_producer("s")
    assert shared.topic_epoch is None
    with pytest.raises(ProducerFenced, match="existing shared producers"):
        await topic.open_producer("x", access_mode=Mode.Exclusive)
    topic.remove_producer("s")
    held = await topic.open_producer("x", access_mode=Mode.Exclusive)
    assert held.topic_epoch == 0 and stored_epoch(store) == 0
    with pytest.raises(ProducerBusy, match="existing exclusive producer: x"):
        await topic.open_producer("s2")
    with pytest.raises(ProducerBusy, match="existing exclusive producer: x"):
        topic.add_producer("s3")
    with pytest.raises(ProducerFenced, match="existing exclusive producer: x"):
        await topic.open_producer("y", access_mode=Mode.Exclusive)
    assert set(topic.producers) == {"x"}
    topic.remove_producer("x")
    again = await topic.open_producer("y", access_mode=Mode.Exclusive)
    assert again.topic_epoch == 1 and stored_epoch(store) == 1
    await topic.close()


async def test_wait_for_exclusive_waits_in_line_and_gets_the_topic_when_the_holder_leaves():
    topic, _, _ = await fresh()
    await topic.open_producer("a", access_mode=Mode.Exclusive)
    queued: list[str] = []
    second = asyncio.ensure_future(topic.open_producer("b", access_mode=Mode.WaitForExclusive, on_queued=lambda: queued.append("b")))
    third = asyncio.ensure_future(topic.open_producer("c", access_mode=Mode.WaitForExclusive, on_queued=lambda: queued.append("c")))
    await asyncio.sleep(0)
    assert queued == ["b", "c"] and not second.done()
    with pytest.raises(ProducerBusy):  # a Shared producer is refused while others wait
        await topic.open_producer("s")
    topic.remove_producer("a")
    b = await asyncio.wait_for(second, 5)
    assert b.topic_epoch == 1 and set(topic.producers) == {"b"} and not third.done()
    topic.remove_producer("b")
    c = await asyncio.wait_for(third, 5)
    assert c.topic_epoch == 2 and set(topic.producers) == {"c"}
    await topic.close()


async def test_a_producer_that_leaves_the_line_is_skipped():
    topic, _, _ = await fresh()
    await topic.open_producer("a", access_mode=Mode.Exclusive)
    gone = asyncio.ensure_future(topic.open_producer("b", access_mode=Mode.WaitForExclusive))
    waits = asyncio.ensure_future(topic.open_producer("c", access_mode=Mode.WaitForExclusive))
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    assert topic.access.waiting == 1
    topic.remove_producer("a")
    assert (await asyncio.wait_for(waits, 5)).publisher.name == "c"
    await topic.close()


async def test_a_producer_leaving_as_it_is_given_the_topic_passes_it_on():
    topic, _, _ = await fresh()
    await topic.open_producer("a", access_mode=Mode.Exclusive)
    store = topic.access._store_epoch

    async def slow_store(epoch: int) -> None:
        await asyncio.sleep(0.05)  # ZooKeeper takes its time
        await store(epoch)

    topic.access._store_epoch = slow_store
    leaving = asyncio.ensure_future(topic.open_producer("b", access_mode=Mode.WaitForExclusive))
    waits = asyncio.ensure_future(topic.open_producer("c", access_mode=Mode.WaitForExclusive))
    await asyncio.sleep(0)
    topic.remove_producer("a")  # b is being given the topic (its epoch is being stored)
    await asyncio.sleep(0.01)
    leaving.cancel()
    await asyncio.gather(leaving, return_exceptions=True)
    c = await asyncio.wait_for(waits, 5)
    assert c.publisher.name == "c" and set(topic.producers) == {"c"} and topic.access.exclusive == "c"
    await topic.close()


async def test_exclusive_with_fencing_closes_every_other_producer_and_the_line():
    topic, _, _ = await fresh()
    s1, s2 = Closed(), Closed()
    await topic.open_producer("s1", on_close=s1)
    await topic.open_producer("s2", on_close=s2)
    waiting = asyncio.ensure_future(topic.open_producer("w", access_mode=Mode.WaitForExclusive))
    await asyncio.sleep(0)
    fencer = await topic.open_producer("f", access_mode=Mode.ExclusiveWithFencing)
    assert fencer.topic_epoch == 0 and set(topic.producers) == {"f"}
    assert isinstance(s1.error, ProducerFenced) and isinstance(s2.error, ProducerFenced)
    with pytest.raises(ProducerFenced, match="Fenced out"):
        await waiting
    # The fenced producers' doors remove them later: that does not touch the holder.
    topic.remove_producer("s1")
    assert topic.access.exclusive == "f"
    # A second fencer takes the topic from the first; the first reconnecting is fenced.
    f = Closed()
    topic.remove_producer("f")
    first = await topic.open_producer("f", on_close=f, access_mode=Mode.ExclusiveWithFencing)
    assert first.topic_epoch == 1
    await topic.open_producer("g", access_mode=Mode.ExclusiveWithFencing)
    assert isinstance(f.error, ProducerFenced)
    with pytest.raises(ProducerFenced, match="Current epoch: 2, Producer epoch: 1"):
        await topic.open_producer("f", access_mode=Mode.ExclusiveWithFencing, topic_epoch=first.topic_epoch)
    await topic.close()


async def test_a_removed_name_taken_again_is_not_removed_by_the_old_door():
    topic, _, _ = await fresh()
    old = await topic.open_producer("p", access_mode=Mode.Exclusive)
    await topic.open_producer("p2", access_mode=Mode.ExclusiveWithFencing)  # fences p out
    topic.remove_producer("p2")
    new = await topic.open_producer("p", access_mode=Mode.Exclusive)
    topic.remove_producer("p", old.publisher)  # the fenced stream's door cleans up late
    assert topic.producers.get("p") is new.publisher and topic.access.exclusive == "p"
    await topic.close()


async def test_the_epoch_survives_a_crash_hand_over_and_keeps_the_fenced_producer_fenced():
    client, store = FakeLedgerClient(), MemoryStore()
    first = await Owner(client, store).take_over()
    old = await first.open_producer("old", access_mode=Mode.Exclusive)
    assert await send(first, "old", 0)
    new = await first.open_producer("new", access_mode=Mode.ExclusiveWithFencing)
    assert (old.topic_epoch, new.topic_epoch) == (0, 1)
    assert await send(first, "new", 0)
    # The owner dies without closing: the next one recovers the ledger and reads the epoch.
    second = await Owner(client, store).take_over()
    assert second.access.epoch == 1
    with pytest.raises(ProducerFenced, match="Current epoch: 1, Producer epoch: 0"):
        await second.open_producer("old", access_mode=Mode.Exclusive, topic_epoch=old.topic_epoch)
    back = await second.open_producer("new", access_mode=Mode.ExclusiveWithFencing, topic_epoch=new.topic_epoch)
    assert back.topic_epoch == 1 and back.last_sequence_id == 0
    with pytest.raises(ProducerBusy):
        await second.open_producer("shared")
    assert await send(second, "new", 1)
    await second.close()


async def test_the_sdk_refuses_an_unknown_access_mode_before_it_connects():
    import magnetar.asyncio as mg

    async with mg.Client("127.0.0.1:1", operation_timeout_seconds=1) as client:  # nothing listens there
        with pytest.raises(InvalidArgument, match="unknown producer access mode 'Exclusif'"):
            await client.create_producer("persistent://public/default/t", access_mode="Exclusif")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match="unknown producer access mode 7"):
            await client.create_producer("persistent://public/default/t", access_mode=7)  # type: ignore[arg-type]
