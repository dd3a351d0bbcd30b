"""Namespace subscription operations (clear-backlog, unsubscribe) on one bundle's topics,
over a broker twin: which topics and subscriptions they reach, and an unsubscribe that
finds consumers connected deletes nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from magnetar.broker.namespace_ops import SUBSCRIPTION_BUSY, NamespaceOps
from magnetar.common.bundles import NamespaceBundles, bundle_of, bundle_ranges
from magnetar.common.errors import InvalidArgument, PreconditionFailed, TopicNotFound
from magnetar.common.names import TopicName

BUNDLES = 4


@dataclass
class Sub:
    backlog: int
    consumers: list[object] = field(default_factory=list)

    def clear_backlog(self) -> int:
        cleared, self.backlog = self.backlog, 0
        return cleared


@dataclass
class Topic:
    name: str
    subscriptions: dict[str, Sub]

    async def delete_subscription(self, name: str, force: bool) -> None:
        assert not force and not self.subscriptions[name].consumers
        del self.subscriptions[name]


class Broker:
    """What NamespaceOps asks of the broker; ``unused`` partitions were never opened."""

    def __init__(self, topics: dict[str, Topic], unused: list[str]) -> None:
        self.config = SimpleNamespace(bundles_per_namespace=BUNDLES)
        self.topics, self.unused = topics, unused

    async def bundle_owners(self, namespace: str, bundle: str) -> list[tuple[str, str]]:
        if bundle not in bundle_ranges(BUNDLES):
            raise InvalidArgument(f"no bundle {bundle}")
        return [(bundle, "me")]

    async def bundles_data(self, namespace: str) -> NamespaceBundles:
        return NamespaceBundles.equal(BUNDLES)

    async def list_topic_partitions(self, namespace: str) -> list[str]:
        return sorted([*self.topics, *self.unused])

    async def get_topic(self, name: str, create: bool = True) -> Topic:
        assert create is False
        if name in self.unused:
            raise TopicNotFound(name)
        return self.topics[name]


def _bundle(name: str) -> str:
    return bundle_of(TopicName.parse(name), BUNDLES)


@pytest.fixture
def broker() -> Broker:
    names = [f"persistent://t/ns/topic-{i}" for i in range(12)]
    topics = {n: Topic(n, {"a": Sub(3), "b": Sub(5)}) for n in names[:-1]}
    return Broker(topics, names[-1:])


async def test_clear_backlog_reaches_the_bundles_topics_and_the_subscription_named(broker: Broker) -> None:
    bundle = _bundle(next(iter(broker.topics)))
    inside = [t for n, t in broker.topics.items() if _bundle(n) == bundle]
    result = await NamespaceOps(broker).clear_backlog("t/ns", bundle, "a")  # type: ignore[arg-type]
    assert (result.subscriptions, result.entries) == (len(inside), 3 * len(inside))
    for name, topic in broker.topics.items():
        assert topic.subscriptions["a"].backlog == (0 if _bundle(name) == bundle else 3)
        assert topic.subscriptions["b"].backlog == 5
    every = await NamespaceOps(broker).clear_backlog("t/ns", bundle)  # type: ignore[arg-type]
    assert (every.subscriptions, every.entries) == (2 * len(inside), 5 * len(inside))


async def test_unsubscribe_with_consumers_connected_deletes_nothing(broker: Broker) -> None:
    ops: Any = NamespaceOps(broker)  # type: ignore[arg-type]
    first = next(iter(broker.topics))
    bundle = _bundle(first)
    broker.topics[first].subscriptions["a"].consumers.append(object())
    with pytest.raises(PreconditionFailed) as err:
        await ops.unsubscribe("t/ns", bundle, "a")
    assert SUBSCRIPTION_BUSY in err.value.message and first in err.value.message
    assert all("a" in t.subscriptions for t in broker.topics.values())
    broker.topics[first].subscriptions["a"].consumers.clear()
    assert (await ops.unsubscribe("t/ns", bundle, "a", check_only=True)).subscriptions == 0
    assert all("a" in t.subscriptions for t in broker.topics.values())
    deleted = await ops.unsubscribe("t/ns", bundle, "a")
    assert deleted.subscriptions == sum(_bundle(n) == bundle for n in broker.topics)
    assert {n for n, t in broker.topics.items() if "a" not in t.subscriptions} == {
        n for n in broker.topics if _bundle(n) == bundle}


@pytest.mark.parametrize("subscription", ["", "a/b"])
async def test_a_bad_subscription_name_is_refused(broker: Broker, subscription: str) -> None:
    with pytest.raises(InvalidArgument):
        await NamespaceOps(broker).unsubscribe("t/ns", bundle_ranges(BUNDLES)[0], subscription)  # type: ignore[arg-type]
    assert all(set(t.subscriptions) == {"a", "b"} for t in broker.topics.values())


async def test_an_unknown_bundle_is_refused(broker: Broker) -> None:
    with pytest.raises(InvalidArgument):
        await NamespaceOps(broker).clear_backlog("t/ns", "0x0_0x1")  # type: ignore[arg-type]
