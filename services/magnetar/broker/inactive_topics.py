"""Inactive-topic deletion (Pulsar's ``brokerDeleteInactiveTopics*`` and a namespace's
``inactiveTopicPolicies``): the owner of a topic nobody has used for a while deletes it,
with its ledgers, as Pulsar's ``checkGC`` does.

Every ``delete_inactive_topics_frequency_s`` a round looks at each topic this broker
serves. A topic with a producer or a consumer connected is active (its clock starts
again); an idle one is deleted once it has been idle for ``max_inactive_duration_s``
when its policy (the namespace's, else the broker's settings) says
``delete_while_inactive`` and its mode allows it:

- ``delete_when_no_subscriptions``: it has no subscription left;
- ``delete_when_subscriptions_caught_up``: every subscription has acknowledged
  everything (no backlog).

Idle time is counted from the round that first saw the topic idle (a topic loaded idle
starts its clock then), so a topic goes up to one round later than its duration.
Deletion is :meth:`BrokerService.delete_topic` without force: a client that connects
meanwhile keeps the topic. Owned by the broker service: :meth:`start` creates the task,
:meth:`close` cancels and awaits it.

A partitioned topic goes as Pulsar's (``PersistentTopic.checkGC`` then
``tryToDeletePartitionedMetadata``): only a partition's owner knows whether it is
active, so each owner deletes its own idle partition by the same rules, and then asks
``drop_partitioned`` to forget the partitioned topic (its metadata, schema and
policies) when none of its partitions has a managed ledger any more. Whichever owner
deletes the last partition drops the metadata; owners deleting at the same time both
ask, and one of them finds it gone (TopicNotFound, ignored). A partition that no broker
serves (never loaded since it was created, or its broker gone) is never judged, so its
partitioned topic stays, as in Pulsar.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from magnetar.broker.namespace_policies import InactiveTopicDeleteMode, InactiveTopicPolicies
from magnetar.common.errors import MagnetarError, PreconditionFailed, TopicNotFound
from magnetar.common.names import TopicName
from magnetar.common.tasks import PeriodicRounds

if TYPE_CHECKING:
    from magnetar.broker.topic import PersistentTopic

log = logging.getLogger(__name__)


def has_clients(topic: PersistentTopic) -> bool:
    return bool(topic.producers) or any(s.consumers for s in topic.subscriptions.values())


def may_delete(topic: PersistentTopic, mode: InactiveTopicDeleteMode) -> bool:
    """Whether an idle ``topic`` may go by ``mode`` (never with clients connected)."""
    if has_clients(topic):
        return False
    if mode is InactiveTopicDeleteMode.DELETE_WHEN_NO_SUBSCRIPTIONS:
        return not topic.subscriptions
    return all(s.cursor.backlog() == 0 for s in topic.subscriptions.values())


class InactiveTopicTask:
    def __init__(
        self, topics: Mapping[str, PersistentTopic], default: InactiveTopicPolicies, interval_s: float,
        delete: Callable[[str], Awaitable[None]], clock: Callable[[], float] = time.monotonic,
        drop_partitioned: Callable[[str], Awaitable[bool]] | None = None,
    ) -> None:
        """Args:
        topics: the served topics by name (read anew every round).
        default: the broker's settings (a namespace's inactiveTopicPolicies replace them).
        interval_s: time between rounds.
        delete: deletes a topic with its data (``BrokerService.delete_topic``).
        clock: monotonic seconds.
        drop_partitioned: after a partition is deleted, forgets its partitioned topic
            (named) if no partition is left; returns whether it did.
        """
        self._topics = topics
        self._default = default
        self._delete = delete
        self._clock = clock
        self._drop_partitioned = drop_partitioned
        self._idle_since: dict[str, float] = {}
        self._rounds = PeriodicRounds("inactive-topics", lambda: interval_s, lambda: self.run_once())

    def start(self) -> None:
        self._rounds.start()

    async def close(self) -> None:
        await self._rounds.close()

    def policy(self, topic: PersistentTopic) -> InactiveTopicPolicies:
        return topic.policies.inactive_topic_policies or self._default

    async def run_once(self) -> list[str]:
        """One round; returns the topics deleted (a partitioned topic after its last
        partition, when this round dropped it)."""
        now = self._clock()
        served = dict(self._topics)
        self._idle_since = {n: t for n, t in self._idle_since.items() if n in served}
        deleted: list[str] = []
        for name, topic in served.items():
            if has_clients(topic):
                self._idle_since.pop(name, None)
                continue
            since = self._idle_since.setdefault(name, now)
            policy = self.policy(topic)
            if not policy.delete_while_inactive or now - since < policy.max_inactive_duration_s:
                continue
            if not may_delete(topic, policy.delete_mode):
                continue
            try:
                await self._delete(name)
            except (TopicNotFound, PreconditionFailed):
                continue  # gone meanwhile, or a client connected: not inactive
            except MagnetarError as exc:
                log.warning("could not delete inactive topic %s: %s", name, exc.message)
                continue
            self._idle_since.pop(name, None)
            log.info("deleted topic %s: inactive for %.0f s (%s)", name, now - since, policy.delete_mode)
            deleted.append(name)
            parsed = TopicName.parse(name)
            if parsed.is_partition and await self._partitioned_dropped(str(parsed.partitioned_topic_name)):
                deleted.append(str(parsed.partitioned_topic_name))
        return deleted

    async def _partitioned_dropped(self, base: str) -> bool:
        if self._drop_partitioned is None:
            return False
        try:
            dropped = await self._drop_partitioned(base)
        except TopicNotFound:
            return False  # another partition's owner dropped it
        except MagnetarError as exc:
            log.warning("could not delete inactive partitioned topic %s: %s", base, exc.message)
            return False
        if dropped:
            log.info("deleted partitioned topic %s: its last partition was deleted as inactive", base)
        return dropped
