"""Topic-level policies: what applies (a topic's over its namespace's over the broker's
default, field by field, backlog quotas by type), the admin over a document store twin
(kept under a partitioned topic's name, checked by the namespace rules, nothing written
when refused), and the policy task enforcing a topic's TTL where its namespace has none."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from test_dispatch import Sink, settle
from test_policy_enforcement import Policies, send

from magnetar.broker.namespace_policies import (
    BacklogQuota,
    DispatchRate,
    NamespacePolicies,
    PolicyKind,
    PublishRate,
    QuotaPolicy,
    QuotaType,
    overlay,
)
from magnetar.broker.policy_task import NamespacePolicyTask
from magnetar.broker.retention import RetentionPolicy
from magnetar.broker.subscription_type import InitialPosition, SubscriptionType
from magnetar.broker.topic_policies import TopicPolicyAdmin, policy_owner
from magnetar.common.errors import (
    ConsumerBusy,
    InvalidArgument,
    NamespaceNotFound,
    PreconditionFailed,
    ProducerBusy,
    TopicNotFound,
)
from magnetar.common.names import TopicName

STORAGE, AGE = QuotaType.DESTINATION_STORAGE, QuotaType.MESSAGE_AGE
TOPIC = "persistent://public/default/t"
EMPTY = NamespacePolicies()


# -- what applies ----------------------------------------------------------------------
def test_a_topic_policy_overrides_its_namespaces_field_by_field():
    namespace = NamespacePolicies(
        retention=RetentionPolicy(60, 10), message_ttl_s=30, deduplication=True,
        publish_rate=PublishRate(100, -1),
        backlog_quotas={STORAGE: BacklogQuota(1024, -1, QuotaPolicy.PRODUCER_EXCEPTION),
                        AGE: BacklogQuota(-1, 600, QuotaPolicy.CONSUMER_BACKLOG_EVICTION)},
    )
    topic = NamespacePolicies(message_ttl_s=0, dispatch_rate=DispatchRate(5, -1, False, 1),
                              backlog_quotas={AGE: BacklogQuota(-1, 60, QuotaPolicy.PRODUCER_REQUEST_HOLD)})
    applied = overlay(topic, namespace)
    assert applied.message_ttl_s == 0  # the topic's 0 (never expire) is a setting
    assert applied.retention == RetentionPolicy(60, 10) and applied.deduplication is True
    assert applied.publish_rate == PublishRate(100, -1)
    assert applied.dispatch_rate == DispatchRate(5, -1, False, 1)
    assert applied.quota(STORAGE) == namespace.quota(STORAGE)  # quotas by type
    assert applied.quota(AGE) == topic.quota(AGE)
    assert overlay(NamespacePolicies(), NamespacePolicies()) == NamespacePolicies()  # the broker's defaults
    assert overlay(topic, NamespacePolicies()).message_ttl_s == 0


# -- the admin -------------------------------------------------------------------------
class Documents:
    """The store's twin: documents by topic name, compare-and-set free (one writer)."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {}
        self.writes = 0

    async def get(self, topic: TopicName) -> dict[str, Any]:
        return copy.deepcopy(self.docs.get(str(topic), {}))

    async def update(self, topic: TopicName, fn: Any) -> dict[str, Any]:
        written = dict(fn(copy.deepcopy(self.docs.get(str(topic), {}))))
        self.docs[str(topic)] = written
        self.writes += 1
        return written

    async def delete(self, topic: TopicName) -> None:
        self.docs.pop(str(topic), None)


class Namespaces:
    def __init__(self, policies: NamespacePolicies) -> None:
        self.policies = policies

    async def get(self, namespace: str) -> NamespacePolicies:
        if namespace != "public/default":
            raise NamespaceNotFound(f"namespace {namespace} does not exist")
        return self.policies


def admin(namespace: NamespacePolicies = EMPTY) -> tuple[TopicPolicyAdmin, Documents, list[TopicName]]:
    docs, changed = Documents(), []
    return TopicPolicyAdmin(docs, Namespaces(namespace), on_change=changed.append), docs, changed


async def test_a_partitions_policies_are_its_partitioned_topics():
    topics, docs, changed = admin(NamespacePolicies(message_ttl_s=300, retention=RetentionPolicy(10, 10)))
    await topics.set(TOPIC + "-partition-1", PolicyKind.MESSAGE_TTL, 5)
    assert list(docs.docs) == [TOPIC] and changed == [TopicName.parse(TOPIC)]
    for name in (TOPIC, TOPIC + "-partition-0"):
        assert (await topics.get(name)).message_ttl_s == 5
        applied = await topics.applied(name)
        assert applied.message_ttl_s == 5 and applied.retention == RetentionPolicy(10, 10)
    await topics.remove(TOPIC, PolicyKind.MESSAGE_TTL)
    assert (await topics.get(TOPIC)).message_ttl_s is None
    assert (await topics.applied(TOPIC + "-partition-0")).message_ttl_s == 300  # the namespace's again
    await topics.delete(TOPIC + "-partition-3")
    assert docs.docs == {}
    assert policy_owner(TOPIC + "-partition-2") == TopicName.parse(TOPIC)


async def test_backlog_quotas_are_set_and_removed_by_type():
    topics, _, _ = admin()
    await topics.set(TOPIC, PolicyKind.BACKLOG_QUOTA, BacklogQuota(-1, 60, QuotaPolicy.PRODUCER_EXCEPTION), AGE)
    await topics.set(TOPIC, PolicyKind.BACKLOG_QUOTA, BacklogQuota(2048, -1, QuotaPolicy.PRODUCER_EXCEPTION))
    await topics.remove(TOPIC, PolicyKind.BACKLOG_QUOTA, STORAGE)
    assert dict((await topics.get(TOPIC)).backlog_quotas) == {AGE: BacklogQuota(-1, 60, QuotaPolicy.PRODUCER_EXCEPTION)}


@pytest.mark.parametrize(("topic", "kind", "value", "error", "reason"), [
    (TOPIC, PolicyKind.MESSAGE_TTL, -1, PreconditionFailed, "Invalid value for message TTL"),
    (TOPIC, PolicyKind.RETENTION, RetentionPolicy(0, 10), InvalidArgument, "Invalid retention policy"),
    (TOPIC, PolicyKind.PUBLISH_RATE, PublishRate(-2, -1), InvalidArgument, "publishThrottlingRateInMsg"),
    (TOPIC, PolicyKind.MAX_PRODUCERS, -1, PreconditionFailed, "maxProducers must be 0 or more"),
    (TOPIC, PolicyKind.MAX_CONSUMERS, 2**31, PreconditionFailed, "maxConsumers must be 0 or more"),
    (TOPIC, PolicyKind.DEAD_LETTER, None, InvalidArgument, "has no topic level"),
    (TOPIC, PolicyKind.SCHEMA_VALIDATION_ENFORCED, True, InvalidArgument, "has no topic level"),
    ("persistent://public/nope/t", PolicyKind.MESSAGE_TTL, 5, NamespaceNotFound, "public/nope"),
    ("persistent://public/default/", PolicyKind.MESSAGE_TTL, 5, InvalidArgument, ""),
])
async def test_bad_input_is_refused_with_pulsars_reason_and_writes_nothing(topic, kind, value, error, reason):
    topics, docs, changed = admin()
    await topics.set(TOPIC, PolicyKind.DEDUPLICATION, True)
    before, writes = copy.deepcopy(docs.docs), docs.writes
    with pytest.raises(error) as info:
        await topics.set(topic, kind, value)
    assert reason in info.value.message
    assert docs.docs == before and docs.writes == writes and len(changed) == 1


# -- the policy task -------------------------------------------------------------------
async def test_the_task_expires_by_the_topics_ttl_where_its_namespace_has_none(persistent_topic):
    topic = persistent_topic
    await topic.load()
    sub = await topic.subscribe("a", SubscriptionType.Shared, InitialPosition.Earliest)
    for seq, published in enumerate([1_000, 2_000, 3_000]):
        await send(topic, seq, publish_ms=published)
    await settle()
    levels = {TOPIC: NamespacePolicies(message_ttl_s=2)}
    asked: list[str] = []

    async def topic_level(name: str) -> NamespacePolicies:
        asked.append(name)
        return levels.get(name, NamespacePolicies())

    task = NamespacePolicyTask({topic.name: topic}, Policies(NamespacePolicies()), 60.0, clock=lambda: 4.5,
                               topic_level=topic_level)
    assert await task.run_once() == {TOPIC: 2}  # published at 1 000 and 2 000 ms
    assert sub.cursor.backlog() == 1 and asked == [TOPIC]
    assert topic.policies.message_ttl_s == 2  # the topic enforces what applies
    levels.clear()  # removed: the namespace's (none) applies again
    await task.run_once()
    assert topic.policies.message_ttl_s is None


# -- maxProducers / maxConsumers -------------------------------------------------------
async def test_one_producer_or_consumer_too_many_is_refused_with_pulsars_reason(persistent_topic):
    topic = persistent_topic
    await topic.load()
    namespace = NamespacePolicies(max_producers=3, max_consumers=1)
    topic.apply_policies(overlay(NamespacePolicies(max_producers=1), namespace))  # the topic's 1 over 3
    topic.add_producer("a")
    with pytest.raises(ProducerBusy, match="^Topic reached max producers limit$"):
        topic.add_producer("b")
    with pytest.raises(ProducerBusy, match="^Topic reached max producers limit$"):
        await topic.open_producer("c")
    topic.remove_producer("a")
    topic.add_producer("b")  # room again
    first = await topic.subscribe("s1", SubscriptionType.Shared, InitialPosition.Earliest)
    second = await topic.subscribe("s2", SubscriptionType.Shared, InitialPosition.Earliest)
    Sink(first, "c1")  # the namespace's per-topic limit: the topic sets none
    with pytest.raises(ConsumerBusy, match="^Topic reached max consumers limit$"):
        Sink(second, "c2")  # counted over every subscription
    topic.apply_policies(NamespacePolicies(max_producers=0, max_consumers=0))  # 0: no limit
    Sink(second, "c2")
    topic.add_producer("c")
    assert set(topic.producers) == {"b", "c"} and [len(s.consumers) for s in (first, second)] == [1, 1]


async def test_a_missing_topic_is_not_found_for_get_set_and_remove_and_nothing_is_written():
    """As Pulsar's preValidation: 404 "Topic ... not found"; a partitioned topic's metadata
    counts as existing (asked under the partitioned name for a partition too)."""
    asked: list[TopicName] = []
    existing = {TopicName.parse(TOPIC)}

    async def exists(name: TopicName) -> bool:
        asked.append(name)
        return name in existing

    docs, changed = Documents(), []
    topics = TopicPolicyAdmin(docs, Namespaces(NamespacePolicies(message_ttl_s=9)), on_change=changed.append,
                              exists=exists)
    missing = "persistent://public/default/missing"
    for call in (topics.get(missing), topics.applied(missing), topics.set(missing, PolicyKind.MESSAGE_TTL, 5),
                 topics.remove(missing, PolicyKind.MESSAGE_TTL)):
        with pytest.raises(TopicNotFound, match=f"^Topic {missing} not found$"):
            await call
    assert docs.docs == {} and docs.writes == 0 and changed == []
    await topics.set(TOPIC + "-partition-1", PolicyKind.MESSAGE_TTL, 5)  # its partitioned topic exists
    assert (await topics.get(TOPIC)).message_ttl_s == 5 and asked[-1] == TopicName.parse(TOPIC)
    assert (await topics.level(missing)).message_ttl_s is None  # the broker's own read: no check
