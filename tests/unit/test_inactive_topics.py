"""Inactive-topic deletion (magnetar.broker.inactive_topics) over fake topics and a fake
clock: which idle topics go, after how long, by which policy; never one with clients."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from magnetar.broker.inactive_topics import (
    InactiveTopicDeleteMode,
    InactiveTopicPolicies,
    InactiveTopicTask,
)
from magnetar.broker.namespace_policies import (
    NamespacePolicies,
    PolicyKind,
    from_document,
    to_document,
    with_policy,
)
from magnetar.common.errors import InvalidArgument, PreconditionFailed, TopicNotFound

NO_SUBS = InactiveTopicDeleteMode.DELETE_WHEN_NO_SUBSCRIPTIONS
CAUGHT_UP = InactiveTopicDeleteMode.DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP


@dataclass
class FakeCursor:
    backlog_entries: int = 0

    def backlog(self) -> int:
        return self.backlog_entries


@dataclass
class FakeSubscription:
    backlog: int = 0
    consumers: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.cursor = FakeCursor(self.backlog)


@dataclass
class FakeTopic:
    producers: dict[str, Any] = field(default_factory=dict)
    subscriptions: dict[str, FakeSubscription] = field(default_factory=dict)
    policies: NamespacePolicies = field(default_factory=NamespacePolicies)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def task(topics: dict[str, FakeTopic], default: InactiveTopicPolicies) -> tuple[InactiveTopicTask, Clock, list[str]]:
    clock, deleted = Clock(), []

    async def delete(name: str) -> None:
        deleted.append(name)
        topics.pop(name)

    return InactiveTopicTask(topics, default, 1.0, delete, clock), clock, deleted  # type: ignore[arg-type]


def ns(name: str) -> str:
    return f"persistent://acme/orders/{name}"


async def test_idle_topics_go_after_their_duration_by_the_brokers_mode():
    topics = {ns("idle"): FakeTopic(), ns("subscribed"): FakeTopic(subscriptions={"s": FakeSubscription()}),
              ns("producing"): FakeTopic(producers={"p": object()}),
              ns("consuming"): FakeTopic(subscriptions={"s": FakeSubscription(consumers=["c"])})}
    inactive, clock, deleted = task(topics, InactiveTopicPolicies(NO_SUBS, 60, True))
    assert await inactive.run_once() == []  # first seen idle: its clock starts
    clock.now += 59
    assert await inactive.run_once() == []
    clock.now += 1
    assert await inactive.run_once() == [ns("idle")]
    clock.now += 1000
    assert await inactive.run_once() == [] and deleted == [ns("idle")]
    assert set(topics) == {ns("subscribed"), ns("producing"), ns("consuming")}


async def test_caught_up_mode_keeps_a_backlog_and_activity_restarts_the_clock():
    topics = {ns("caught-up"): FakeTopic(subscriptions={"s": FakeSubscription(backlog=0)}),
              ns("behind"): FakeTopic(subscriptions={"s": FakeSubscription(backlog=3)}),
              ns("woken"): FakeTopic()}
    inactive, clock, _ = task(topics, InactiveTopicPolicies(CAUGHT_UP, 10, True))
    await inactive.run_once()
    clock.now += 5
    topics[ns("woken")].producers["p"] = object()
    await inactive.run_once()
    topics[ns("woken")].producers.clear()
    clock.now += 6
    assert await inactive.run_once() == [ns("caught-up")]  # woken: idle 0 s since it was active
    clock.now += 10
    assert await inactive.run_once() == [ns("woken")]
    assert set(topics) == {ns("behind")}


async def test_the_namespace_policy_replaces_the_brokers_settings():
    on = NamespacePolicies(inactive_topic_policies=InactiveTopicPolicies(NO_SUBS, 5, True))
    off = NamespacePolicies(inactive_topic_policies=InactiveTopicPolicies(NO_SUBS, 5, False))
    topics = {ns("opted-in"): FakeTopic(policies=on), ns("opted-out"): FakeTopic(policies=off),
              ns("default"): FakeTopic()}
    inactive, clock, _ = task(topics, InactiveTopicPolicies(NO_SUBS, 5, False))  # the broker's: off
    await inactive.run_once()
    clock.now += 100
    assert await inactive.run_once() == [ns("opted-in")]


async def test_a_topic_a_client_reached_meanwhile_stays():
    topics = {ns("raced"): FakeTopic()}
    clock = Clock()

    async def refuse(name: str) -> None:
        raise PreconditionFailed("topic has connected producers or consumers")

    inactive = InactiveTopicTask(topics, InactiveTopicPolicies(NO_SUBS, 1, True), 1.0, refuse, clock)  # type: ignore[arg-type]
    await inactive.run_once()
    clock.now += 2
    assert await inactive.run_once() == [] and ns("raced") in topics


@pytest.mark.parametrize("policy", [
    InactiveTopicPolicies("delete_sometimes", 60, True),  # type: ignore[arg-type]
    InactiveTopicPolicies(NO_SUBS, 0, True), InactiveTopicPolicies(NO_SUBS, 2**31, True),
    InactiveTopicPolicies(NO_SUBS, True, True),  # type: ignore[arg-type]
    InactiveTopicPolicies(NO_SUBS, 60, "yes"),  # type: ignore[arg-type]
])
def test_bad_policies_are_refused_and_change_nothing(policy: InactiveTopicPolicies):
    before = NamespacePolicies()
    with pytest.raises(InvalidArgument):
        with_policy(before, PolicyKind.INACTIVE_TOPIC, policy)
    assert before.inactive_topic_policies is None


def test_the_policy_round_trips_through_the_document():
    set_ = with_policy(NamespacePolicies(), PolicyKind.INACTIVE_TOPIC, InactiveTopicPolicies("delete_when_subscriptions_caught_up", 30, True))  # type: ignore[arg-type]
    assert set_.inactive_topic_policies == InactiveTopicPolicies(CAUGHT_UP, 30, True)
    assert from_document(to_document(set_)) == set_


async def test_idle_partitions_go_and_the_last_one_drops_its_partitioned_topic():
    """Each owner deletes its idle partitions; the partitioned topic is forgotten once none
    is left (asked after every partition deleted; another owner may have dropped it)."""
    left = {ns("parted-partition-0"), ns("parted-partition-1"), ns("parted-partition-2")}
    topics = {ns("parted-partition-0"): FakeTopic(), ns("parted-partition-1"): FakeTopic(),
              ns("busy-partition-0"): FakeTopic(producers={"p": object()})}
    clock, deleted, asked = Clock(), [], []

    async def delete(name: str) -> None:
        deleted.append(name)
        topics.pop(name)
        left.discard(name)

    async def drop_partitioned(base: str) -> bool:
        asked.append(base)
        if base == ns("gone"):
            raise TopicNotFound(f"partitioned topic {base} does not exist")
        return not any(p.startswith(base + "-partition-") for p in left)

    inactive = InactiveTopicTask(topics, InactiveTopicPolicies(NO_SUBS, 5, True), 1.0, delete,  # type: ignore[arg-type]
                                 clock, drop_partitioned=drop_partitioned)
    await inactive.run_once()
    clock.now += 5
    assert await inactive.run_once() == [ns("parted-partition-0"), ns("parted-partition-1")]
    assert asked == [ns("parted")] * 2  # partition 2 (another broker's) is still there
    left.clear()  # its owner deleted it
    topics[ns("parted-partition-1")] = FakeTopic()  # a client re-created one here: idle again
    topics[ns("gone-partition-0")] = FakeTopic()
    await inactive.run_once()
    clock.now += 5
    assert await inactive.run_once() == [ns("parted-partition-1"), ns("parted"), ns("gone-partition-0")]
    assert set(topics) == {ns("busy-partition-0")}
