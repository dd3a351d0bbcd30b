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

A round costs little when nothing changed: per namespace it reads the namespace's
policies and the list of its topics that set policies of their own (one read each; only
those topics' documents are read), and it passes over a topic whose applied policies are
the ones it applied last round (the namespace's, kept as the same object while they read
equal) and need nothing done on a timer (no TTL, backlog quota, compaction threshold or
dispatch rate relative to the publish rate). A broker with 10,000 idle topics in one
namespace thus makes two ZooKeeper reads a round, not 10,001.

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
        setters: Callable[[str], Awaitable[set[str]]] | None = None,
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
        setters: the names of a namespace's topics (partitioned topics: their base
            names) that may set policies; the others are taken to set nothing and their
            ``topic_level`` is not read. None: every topic's is read.
        """
        self._topics = topics
        self._policies = policies
        self._interval_s = interval_s
        self._clock = clock
        self._compact = compact
        self._topic_level = topic_level
        self._setters = setters
        self._seen: dict[str, NamespacePolicies] = {}
        """Each namespace's policies as last read; an equal read is replaced by this object."""
        self._namespace_of: dict[str, str] = {}
        self._overlaid: dict[str, tuple[NamespacePolicies, NamespacePolicies, NamespacePolicies]] = {}
        """By topic (policy owner): its level and its namespace's policies as last read, and their overlay."""
        self._rounds = PeriodicRounds("namespace-policies", lambda: interval_s, lambda: self.run_once())

    def start(self) -> None:
        self._rounds.start()

    async def close(self) -> None:
        await self._rounds.close()

    async def run_once(self) -> dict[str, int]:
        """One round; returns the entries acknowledged (expired or evicted) per topic."""
        by_namespace: dict[str, list[PersistentTopic]] = defaultdict(list)
        namespace_of: dict[str, str] = {}
        for name, topic in list(self._topics.items()):
            namespace = self._namespace_of.get(name) or str(TopicName.parse(name).namespace)
            namespace_of[name] = namespace
            by_namespace[namespace].append(topic)
        self._namespace_of = namespace_of
        self._seen = {ns: p for ns, p in self._seen.items() if ns in by_namespace}
        acknowledged: dict[str, int] = {}
        levels: dict[str, NamespacePolicies] = {}  # what each topic (policy owner) read this round sets
        for namespace, topics in by_namespace.items():
            try:
                policies = await self._policies.get(namespace)
                setters = None if self._setters is None or self._topic_level is None else await self._setters(namespace)
            except MagnetarError as exc:
                log.warning("namespace %s: cannot read its policies, skipping it this round: %s", namespace, exc.message)
                continue
            seen = self._seen.get(namespace)
            if seen is not None and seen == policies:
                policies = seen  # unchanged: the topics that have it applied are passed over
            self._seen[namespace] = policies
            for topic in topics:
                try:
                    applied = await self._applied(topic.name, policies, levels, setters)
                    if applied is topic.policies and not _timed(applied):
                        continue
                    done = await self.enforce(topic, applied)
                except ServiceClosed:
                    continue  # unloaded meanwhile: its next owner enforces
                except MagnetarError as exc:
                    log.warning("namespace policies on %s: %s", topic.name, exc.message)
                    continue
                if done:
                    acknowledged[topic.name] = done
        self._overlaid = {owner: kept for owner, kept in self._overlaid.items() if owner in levels}
        return acknowledged

    async def _applied(
        self, name: str, policies: NamespacePolicies, levels: dict[str, NamespacePolicies], setters: set[str] | None,
    ) -> NamespacePolicies:
        if self._topic_level is None or setters is not None and not setters:
            return policies
        owner = str(policy_owner(name))
        if setters is not None and owner not in setters:
            return policies
        if owner not in levels:
            levels[owner] = await self._topic_level(owner)
        level = levels[owner]
        last = self._overlaid.get(owner)
        if last is not None and last[1] is policies and last[0] == level:
            return last[2]  # the same object as last round: the topic is passed over
        applied = overlay(level, policies)
        self._overlaid[owner] = (level, policies, applied)
        return applied

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


def _timed(policies: NamespacePolicies) -> bool:
    """Whether ``policies`` ask for work on every round even when they did not change."""
    rate = policies.dispatch_rate
    return bool(
        policies.message_ttl_s or policies.backlog_quotas or policies.compaction_threshold
        or (rate is not None and rate.relative_to_publish_rate)
    )


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
