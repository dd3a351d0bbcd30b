"""Key_Shared STICKY mode (Pulsar's HashRangeExclusiveStickyKeyConsumerSelector): each
consumer declares hash ranges of 0 .. 65,535; a message goes to the consumer whose range
holds its key's Murmur3 hash; overlapping ranges and mixed modes are refused. Over the
subscription and dispatcher of test_dispatch (a real ManagedLedger on in-memory twins)."""

from __future__ import annotations

import pytest
from test_dispatch import Sink, publish, settle

from magnetar.broker.dispatch.key_shared import slot_of
from magnetar.broker.subscription_type import (
    InitialPosition,
    KeySharedMode,
    KeySharedPolicy,
    SubscriptionType,
)
from magnetar.common.errors import ConsumerAssignError, ConsumerBusy, InvalidArgument

KS = SubscriptionType.Key_Shared


def _sticky(sub, name: str, *ranges: tuple[int, int]) -> Sink:
    return Sink(sub, name, sub_type=KS, key_shared=KeySharedPolicy(KeySharedMode.STICKY, tuple(ranges)))


async def test_sticky_ranges_route_each_key_to_the_consumer_whose_range_holds_its_hash(topic) -> None:
    sub = await topic.subscribe("s", KS, InitialPosition.Earliest)
    low = _sticky(sub, "low", (0, 32767))
    high = _sticky(sub, "high", (32768, 65535))
    await publish(topic, 200, keys=lambda n: f"k{n % 40}", per_entry=4)
    got = {"low": low.messages(), "high": high.messages()}
    assert sum(len(v) for v in got.values()) == 800
    for name, messages in got.items():
        for _, _, key, _ in messages:
            assert (slot_of(key) <= 32767) == (name == "low"), key
    assert got["low"] and got["high"]


async def test_a_hash_no_range_holds_waits_for_a_consumer_that_covers_it(topic) -> None:
    sub = await topic.subscribe("s", KS, InitialPosition.Earliest)
    keys = [f"k{i}" for i in range(40)]
    lows = {k for k in keys if slot_of(k) < 32768}
    low = _sticky(sub, "low", (0, 32767))
    await publish(topic, 40, keys=lambda n: keys[n])
    assert {k for _, _, k, _ in low.messages()} == lows  # the others wait
    high = _sticky(sub, "high", (32768, 65535))
    await settle()
    assert {k for _, _, k, _ in high.messages()} == set(keys) - lows


async def test_overlapping_ranges_and_mixed_modes_are_refused(topic) -> None:
    sub = await topic.subscribe("s", KS, InitialPosition.Earliest)
    _sticky(sub, "a", (0, 999), (5000, 5999))
    with pytest.raises(ConsumerAssignError, match=r"\[5500, 6000\] overlaps \[5000, 5999\]"):
        _sticky(sub, "b", (1000, 1999), (5500, 6000))
    with pytest.raises(ConsumerBusy, match="STICKY mode"):
        Sink(sub, "auto", sub_type=KS)  # AUTO_SPLIT
    assert [c.name for c in sub.consumers] == ["a"]  # nothing attached by the refusals
    _sticky(sub, "b", (1000, 1999))


@pytest.mark.parametrize("ranges", [(), ((0, 65536),), ((-1, 5),), ((10, 5),), ((0, 10), (10, 20))])
def test_bad_sticky_ranges_are_invalid(ranges) -> None:
    with pytest.raises(InvalidArgument):
        KeySharedPolicy(KeySharedMode.STICKY, ranges)
    with pytest.raises(InvalidArgument):
        KeySharedPolicy(KeySharedMode.AUTO_SPLIT, ((0, 10),))
