"""Topic patterns of pattern subscriptions (client/pattern.py) and their options: pure."""

from __future__ import annotations

import asyncio
import re

import pulsar
import pytest

import magnetar
from magnetar.client.connection import ConnectionPool
from magnetar.client.consumer import Consumer
from magnetar.client.message import Message
from magnetar.client.options import (
    ConsumerConfig,
    RegexSubscriptionMode,
    check_discovery_period,
    check_regex_subscription_mode,
)
from magnetar.client.partition_consumer import PartitionConsumer, Queued
from magnetar.client.pattern import is_pattern, parse_pattern
from magnetar.client.receive_queue import ReceiveQueue
from magnetar.common.message_id import MessageId
from magnetar.proto.v1 import broker_pb2 as pb

PERSISTENT_ONLY = RegexSubscriptionMode.PersistentOnly
NAMES = [
    "persistent://t/ns/orders",
    "persistent://t/ns/orders-1",
    "persistent://t/ns/orders-2",
    "persistent://t/ns/my-orders-3",
    "non-persistent://t/ns/orders-4",
]


@pytest.mark.parametrize(
    ("pattern", "namespace", "expression"),
    [
        (re.compile("persistent://t/ns/orders-.*"), "t/ns", "t/ns/orders-.*"),
        ("t/ns/orders-.*", "t/ns", "t/ns/orders-.*"),
        ("orders-.*", "public/default", "public/default/orders-.*"),
        ("non-persistent://t/ns/o.*", "t/ns", "t/ns/o.*"),
    ],
)
def test_a_pattern_names_one_namespace_and_an_expression_without_the_domain(pattern, namespace, expression):
    parsed = parse_pattern(pattern, PERSISTENT_ONLY)
    assert str(parsed.namespace) == namespace
    assert parsed.regex.pattern == expression
    assert parsed.text == (pattern.pattern if isinstance(pattern, re.Pattern) else pattern)


def test_the_expression_matches_whole_names_of_the_mode_s_domain():
    parsed = parse_pattern(re.compile("persistent://t/ns/orders-.*"), PERSISTENT_ONLY)
    assert parsed.matching(NAMES) == ["persistent://t/ns/orders-1", "persistent://t/ns/orders-2"]
    # the pattern's domain is ignored (as pulsar-client); the mode decides
    every = parse_pattern("non-persistent://t/ns/orders-.*", RegexSubscriptionMode.AllTopics)
    assert every.matching(NAMES) == [
        "persistent://t/ns/orders-1", "persistent://t/ns/orders-2", "non-persistent://t/ns/orders-4",
    ]
    assert parse_pattern("t/ns/orders", PERSISTENT_ONLY).matching(NAMES) == ["persistent://t/ns/orders"]


def test_a_compiled_pattern_keeps_its_flags():
    parsed = parse_pattern(re.compile("t/ns/ORDERS-1", re.IGNORECASE), PERSISTENT_ONLY)
    assert parsed.matching(NAMES) == ["persistent://t/ns/orders-1"]


@pytest.mark.parametrize(
    ("pattern", "error", "problem"),
    [
        ("persistent://t/.*/orders", magnetar.InvalidTopicName, "one namespace"),
        ("t/(a|b)/orders", magnetar.InvalidTopicName, "one namespace"),
        (".*/ns/orders", magnetar.InvalidTopicName, "one namespace"),
        ("t/ns", magnetar.InvalidTopicName, "is not persistent://"),
        ("t/ns/", magnetar.InvalidTopicName, "is not persistent://"),
        ("kafka://t/ns/x", magnetar.InvalidTopicName, "unknown domain"),
        ("t/ns/orders-[", magnetar.InvalidArgument, "not a regular expression"),
        (re.compile(b"t/ns/x"), magnetar.InvalidArgument, "a str expression"),
        (42, magnetar.InvalidArgument, "a str or a compiled expression"),
    ],
)
def test_bad_patterns_are_refused(pattern, error, problem):
    with pytest.raises(error, match=problem):
        parse_pattern(pattern, PERSISTENT_ONLY)


def test_each_mode_takes_its_domains():
    listed = ["persistent://t/ns/x1", "non-persistent://t/ns/x2", "non-persistent://t/ns/y", "persistent://t/ns/x3"]
    taken = {m: parse_pattern("persistent://t/ns/x.*", m).matching(listed) for m in RegexSubscriptionMode}
    assert taken == {
        RegexSubscriptionMode.PersistentOnly: ["persistent://t/ns/x1", "persistent://t/ns/x3"],
        RegexSubscriptionMode.NonPersistentOnly: ["non-persistent://t/ns/x2"],
        RegexSubscriptionMode.AllTopics: ["persistent://t/ns/x1", "non-persistent://t/ns/x2", "persistent://t/ns/x3"],
    }


def test_what_is_a_pattern():
    assert is_pattern(re.compile("x"), False)
    assert is_pattern("x.*", True)
    assert not is_pattern("x", False) and not is_pattern(["x"], False)
    with pytest.raises(magnetar.InvalidArgument, match="a list of topics does not support"):
        is_pattern(["x"], True)


def test_the_mode_takes_pulsar_client_s_members_and_refuses_others():
    assert check_regex_subscription_mode(pulsar.RegexSubscriptionMode.AllTopics) is RegexSubscriptionMode.AllTopics
    assert check_regex_subscription_mode(RegexSubscriptionMode.PersistentOnly) is RegexSubscriptionMode.PersistentOnly
    for bad in (0, "Everything", None):
        with pytest.raises(magnetar.InvalidConfiguration, match="regex_subscription_mode"):
            check_regex_subscription_mode(bad)


def test_the_discovery_period_is_a_number_of_seconds():
    assert check_discovery_period(60) == 60.0 and check_discovery_period(0.5) == 0.5 and check_discovery_period(0) == 0
    for bad in ("60", True, None, float("nan")):
        with pytest.raises(magnetar.InvalidConfiguration, match="pattern_auto_discovery_period"):
            check_discovery_period(bad)


# -- joining a topic, on never-connected partition consumers -----------------------------------
async def test_a_joining_topic_s_partitions_take_acks_while_the_others_still_subscribe(monkeypatch):
    """A partition that started delivers at once: its messages are acked through the
    consumer while the topic's other partition is still subscribing."""
    queue: ReceiveQueue[Queued] = ReceiveQueue()
    pool = ConnectionPool("127.0.0.1:1")
    started: dict[int, asyncio.Event] = {0: asyncio.Event(), 1: asyncio.Event()}
    release = asyncio.Event()

    async def partitions(topic: str, auto_create: bool = False) -> int:
        return 2

    async def start(self: PartitionConsumer) -> None:
        started[self.partition].set()
        if self.partition == 1:
            await release.wait()

    monkeypatch.setattr(pool, "partitions", partitions)
    monkeypatch.setattr(PartitionConsumer, "start", start)
    pattern = parse_pattern(re.compile("persistent://t/ns/orders-.*"), PERSISTENT_ONLY)
    consumer = Consumer([], ConsumerConfig(subscription_name="s"), [], queue, pattern=pattern)
    consumer._pool, consumer._consumer_name = pool, "c"
    assert consumer.topic() == "persistent://t/ns/orders-.*" and consumer.consumer_name() == "c"

    joining = asyncio.create_task(consumer._join(["persistent://t/ns/orders-new"]))
    await asyncio.wait_for(started[1].wait(), 5)  # partition 0 is up, partition 1 subscribing
    mid = MessageId(ledger_id=7, entry_id=0, partition=0)
    owner, _ = consumer.target_of(Message("persistent://t/ns/orders-new-partition-0", mid, pb.SingleMessage(payload=b"x"), 0))
    assert owner.topic == "persistent://t/ns/orders-new-partition-0"
    release.set()
    await joining
    assert consumer.topics() == ["persistent://t/ns/orders-new"] and len(consumer.partitions) == 2
    await consumer._close(flush=False)
