"""Topic properties over a managed ledger's properties: merge, remove, the broker's own
ledger properties kept apart, bad input and a failed store changing nothing."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from magnetar.broker.topic_properties import (
    TOPIC_PROPERTIES,
    remove_topic_property,
    topic_properties,
    update_topic_properties,
)
from magnetar.common.errors import InvalidArgument, MetadataError, MetadataVersionConflict, NotOwner


@dataclass
class FakeLedger:
    stored: dict[str, str] = field(default_factory=lambda: {"pulsar.topic.epoch": "3"})
    pending: dict[str, str] = field(default_factory=dict)
    fail: Exception | None = None

    def __post_init__(self) -> None:
        self.pending = dict(self.stored)

    @property
    def properties(self) -> dict[str, str]:
        return dict(self.pending)

    def put_property(self, key: str, value: str | None) -> None:
        if value is None:
            self.pending.pop(key, None)
        else:
            self.pending[key] = value

    async def store_properties(self) -> None:
        if self.fail is not None:
            raise self.fail
        self.stored = dict(self.pending)


@dataclass
class FakeTopic:
    ml: FakeLedger = field(default_factory=FakeLedger)
    name: str = "persistent://public/default/t"


async def test_update_merges_remove_takes_one_key_and_the_brokers_own_stay_apart():
    t = FakeTopic()
    assert topic_properties(t) == {}
    await update_topic_properties(t, {"a": "1", "b": "2"})
    await update_topic_properties(t, {"b": "3", "c": ""})
    assert topic_properties(t) == {"a": "1", "b": "3", "c": ""}
    await remove_topic_property(t, "a")
    await remove_topic_property(t, "absent")  # nothing to do
    assert topic_properties(t) == {"b": "3", "c": ""}
    # Stored (not only in memory), beside the broker's own property, which no key shadows.
    assert set(t.ml.stored) == {"pulsar.topic.epoch", TOPIC_PROPERTIES}
    await update_topic_properties(t, {"pulsar.topic.epoch": "99"})
    assert t.ml.stored["pulsar.topic.epoch"] == "3"
    for key in ("b", "c", "pulsar.topic.epoch"):
        await remove_topic_property(t, key)
    assert t.ml.stored == {"pulsar.topic.epoch": "3"}  # the last key gone: no empty object left


@pytest.mark.parametrize("bad", [{"": "v"}, {"k": 1}, {1: "v"}, ["k", "v"], {"k": None}])
async def test_bad_properties_change_nothing(bad):
    t = FakeTopic()
    await update_topic_properties(t, {"keep": "me"})
    with pytest.raises(InvalidArgument):
        await update_topic_properties(t, bad)
    with pytest.raises(InvalidArgument):
        await remove_topic_property(t, "")
    assert topic_properties(t) == {"keep": "me"}


@pytest.mark.parametrize(("error", "raised"), [
    (MetadataVersionConflict("moved"), NotOwner), (MetadataError("zk down"), MetadataError),
])
async def test_a_failed_store_leaves_the_old_properties(error, raised):
    t = FakeTopic()
    await update_topic_properties(t, {"keep": "me"})
    t.ml.fail = error
    with pytest.raises(raised):
        await update_topic_properties(t, {"new": "x"})
    with pytest.raises(raised):
        await remove_topic_property(t, "keep")
    assert topic_properties(t) == {"keep": "me"}
