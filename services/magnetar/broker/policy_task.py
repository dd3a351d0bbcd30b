"""The broker's periodic enforcement of namespace policies on the topics it serves.

Every ``policy_check_interval_s`` a round reads the policies of each namespace with a
served topic once, and those each served topic sets (a partitioned topic's once for its
partitions), so a change made through another broker arrives within one interval; what
applies to a topic is its policies over its namespace's
(:func:`~magnetar.broker.namespace_policies.overlay`). For each topic:

- hands them to the topic (:meth:`PersistentTopic.apply_policies`: deduplication,
  delayed delivery, the destination_storage quota checked on each publish);
- message TTL: acknowledges, on every durable subscription, the messages published more
  than ``message_ttl_in_seconds`` ago (Pulsar's expiry: the mark-delete position moves
  past them);
- backlog quotas with ``consumer_backlog_eviction``: a ``destination_storage`` quota
  moves the slowest subscriptions forward until at most ``limit_size`` bytes (estimated)
  are behind them; a ``message_age`` quota acknowledges messages older than
  ``limit_time`` seconds;
- a ``message_age`` quota that blocks producers refuses sends while the oldest
  unacknowledged message is older than ``limit_time``;
- ``compaction_threshold``: a topic with more bytes after its compaction horizon is
  compacted (``compact``, the broker's: in the background, unless one is running).

A failure on one topic or namespace is logged and the round goes on; the next round
tries again. Owned by the broker service: :meth:`start` creates the task, :meth:`close`
cancels and awaits it.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from magnetar.broker.backlog import backlog_bytes, eviction_point, last_entry_before, slowest
from magnetar.broker.compaction.threshold import compaction_due
from magnetar.broker.entry import publish_time
from magnetar.broker.namespace_policies import BacklogQuota, NamespacePolicies, QuotaType, overlay
from magnetar.broker.topic_policies import policy_owner
from magnetar.common.errors import MagnetarError, ServiceClosed
from magnetar.common.names import TopicName
from magnetar.common.tasks import PeriodicRounds
from magnetar.managedledger.position import Position

if TYPE_CHECKING:
    from magnetar.broker.subscription import Subscription
    from magnetar.broker.topic import PersistentTopic

log = logging.getLogger(__name__)


class PolicySource(Protocol):
    """Where a namespace's policies are read (``NamespacePolicyAdmin``)."""

    async def get(self, namespace: str) -> NamespacePolicies: ...


class NamespacePolicyTask:
    def __init__(
        self, topics: Mapping[str, PersistentTopic], policies: PolicySource, interval_s: float,
        clock: Callable[[], float] = time.time, compact: Callable[[PersistentTopic], None] | None = None,
        topic_level: Callable[[str], Awaitable[NamespacePolicies]] | None = None,
    ) -> None:
        """Args:
        topics: the served topics by name (read anew every round).
        policies: the namespaces' policies.
        interval_s: time between rounds.
        clock: seconds since the epoch (publish times are compared with it).
        compact: starts a compaction of a topic over its compaction threshold (None:
            the threshold is not enforced).
        topic_level: what a topic (a partition: its partitioned topic) sets; None: topics
            set nothing.
        """
        self._topics = topics
        self._policies = policies
        self._interval_s = interval_s
        self._clock = clock
        self._compact = compact
        self._topic_level = topic_level
        self._rounds = PeriodicRounds("namespace-policies", lambda: interval_s, lambda: self.run_once())

    def start(self) -> None:
        self._rounds.start()

    async def close(self) -> None:
        await self._rounds.close()

    async def run_once(self) -> dict[str, int]:
        """One round; returns the entries acknowledged (expired or evicted) per topic."""
        by_namespace: dict[str, list[PersistentTopic]] = defaultdict(list)
        for name, topic in list(self._topics.items()):
            by_namespace[str(TopicName.parse(name).namespace)].append(topic)
        acknowledged: dict[str, int] = {}
        for namespace, topics in by_namespace.items():
            try:
                policies = await self._policies.get(namespace)
            except MagnetarError as exc:
                log.warning("namespace %s: cannot read its policies, skipping it this round: %s", namespace, exc.message)
                continue
            levels: dict[str, NamespacePolicies] = {}
            for topic in topics:
                try:
                    done = await self.enforce(topic, await self._applied(topic.name, policies, levels))
                except ServiceClosed:
                    continue  # unloaded meanwhile: its next owner enforces
                except MagnetarError as exc:
                    log.warning("namespace policies on %s: %s", topic.name, exc.message)
                    continue
                if done:
                    acknowledged[topic.name] = done
        return acknowledged

    async def _applied(
        self, name: str, policies: NamespacePolicies, levels: dict[str, NamespacePolicies],
    ) -> NamespacePolicies:
        if self._topic_level is None:
            return policies
        owner = str(policy_owner(name))
        if owner not in levels:
            levels[owner] = await self._topic_level(owner)
        return overlay(levels[owner], policies)

    async def enforce(self, topic: PersistentTopic, policies: NamespacePolicies) -> int:
        """Apply ``policies`` to ``topic``; returns the entries acknowledged."""
        topic.apply_policies(policies)
        now_ms = int(self._clock() * 1000)
        done = 0
        if policies.message_ttl_s:
            done += await _expire(topic, now_ms - policies.message_ttl_s * 1000)
        size_quota = policies.quota(QuotaType.DESTINATION_STORAGE)
        if size_quota is not None and size_quota.limit_size >= 0 and not size_quota.blocks_producers:
            done += _evict_by_size(topic, size_quota.limit_size)
        done += await self._enforce_age(topic, policies.quota(QuotaType.MESSAGE_AGE), now_ms)
        if self._compact is not None and compaction_due(topic.ml, policies.compaction_threshold):
            self._compact(topic)
        return done

    async def _enforce_age(self, topic: PersistentTopic, quota: BacklogQuota | None, now_ms: int) -> int:
        if quota is None or quota.limit_time < 0:
            topic.block_producers(None)
            return 0
        oldest_ms = now_ms - quota.limit_time * 1000
        if not quota.blocks_producers:
            topic.block_producers(None)
            return await _expire(topic, oldest_ms)
        published = await _oldest_unacked_publish_time(topic)
        if published is not None and published < oldest_ms:
            topic.block_producers(
                f"topic {topic.name}: its oldest unacknowledged message is {(now_ms - published) // 1000} s old, "
                f"over its namespace's backlog quota of {quota.limit_time} s (policy {quota.policy}); sends are "
                "refused until consumers catch up"
            )
        else:
            topic.block_producers(None)
        return 0


def _durable(topic: PersistentTopic) -> list[Subscription]:
    return [s for s in topic.subscriptions.values() if s.durable]


def _acknowledge_through(topic: PersistentTopic, last: Position) -> int:
    return sum(s.acknowledge_through(last) for s in _durable(topic) if s.cursor.mark_delete_position < last)


async def _expire(topic: PersistentTopic, before_ms: int) -> int:
    """Acknowledge, on every durable subscription, the entries published before ``before_ms``."""
    oldest = await _oldest_unacked_publish_time(topic)  # one read spares the search
    if oldest is None or oldest >= before_ms:
        return 0
    first_kept = await topic.position_for_time(before_ms)
    last = last_entry_before(topic.ml.layout, first_kept)
    return 0 if last is None else _acknowledge_through(topic, last)


def _evict_by_size(topic: PersistentTopic, limit_bytes: int) -> int:
    layout = topic.ml.layout
    marks = [s.cursor.mark_delete_position for s in _durable(topic)]
    if backlog_bytes(layout, slowest(marks)) <= limit_bytes:
        return 0
    last = eviction_point(layout, limit_bytes)
    return 0 if last is None else _acknowledge_through(topic, last)


async def _oldest_unacked_publish_time(topic: PersistentTopic) -> int | None:
    """Publish time (ms) of the first entry after the slowest durable mark-delete position."""
    mark = slowest(s.cursor.mark_delete_position for s in _durable(topic))
    if mark is None:
        return None
    ml = topic.ml
    first = ml.layout.normalize(ml.next_position(mark))
    if not ml.contains(first):
        return None
    got = await ml.read_entries(first, 1, 16 * 1024 * 1024)
    return publish_time(got[0][1]) if got else None
