"""Topic admin on the topics this broker serves, for the gateway's
``/admin/v2/persistent``: internal stats, growing a partitioned topic, peeking and
examining messages (pulsar-admin's ``stats-internal``, ``update-partitioned-topic``,
``peek-messages``, ``examine-message``) and terminating one (``terminate``: it takes no
more messages; see :mod:`magnetar.broker.termination`). Nothing here changes a topic's data.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Literal

from magnetar.broker import peek as peeking
from magnetar.broker.topic_properties import (
    check_topic_properties,
    remove_topic_property,
    topic_properties,
    update_topic_properties,
)
from magnetar.common.errors import (
    InvalidArgument,
    InvalidTopicName,
    MagnetarError,
    NoSuchEntry,
    NotFound,
    SubscriptionNotFound,
    TopicNotFound,
)
from magnetar.common.names import TopicName, check_subscription_name
from magnetar.common.partitions import admin_targets
from magnetar.managedledger.opening import PreparedLedger, prepare_ledger, unprepare_ledger
from magnetar.managedledger.position import ManagedLedgerName, Position
from magnetar.managedledger.stats import ManagedLedgerFigures, figures

if TYPE_CHECKING:
    from magnetar.broker.peek import PeekedMessage
    from magnetar.broker.service import BrokerService
    from magnetar.broker.topic import PersistentTopic
    from magnetar.managedledger.cursor import ManagedCursor

log = logging.getLogger(__name__)


class TopicAdmin:
    """The topic admin operations of one broker (see the module docstring)."""

    def __init__(self, service: BrokerService) -> None:
        self.service = service

    async def topic(self, topic: str) -> PersistentTopic:
        """The served topic (a non-partitioned topic, or one partition), opened; a
        partition of a partitioned topic exists by declaration and is opened even if
        nothing was published to it yet.

        Raises:
            TopicNotFound: no such topic (or partition); NotOwner: served elsewhere;
            InvalidTopicName: a bad name, or a partitioned topic's own name.
        """
        name = TopicName.parse(topic)
        if str(name) in self.service.topics:  # served already: it exists (no metadata read)
            return await self.service.get_topic(str(name), create=False)
        partitions = await self.service.partitions(str(name.partitioned_topic_name))
        admin_targets(str(name), partitions)  # TopicNotFound for a partition past the count
        return await self.service.get_topic(str(name), create=False, explicit=name.is_partition and partitions > 0)

    async def properties(self, topic: str) -> dict[str, str]:
        """The topic's properties (a non-partitioned topic or one partition)."""
        return topic_properties(await self.topic(topic))

    async def update_properties(self, topic: str, properties: dict[str, str]) -> None:
        """Merge ``properties`` into the topic's (see :mod:`magnetar.broker.topic_properties`)."""
        properties = check_topic_properties(properties)  # before the topic is opened
        await update_topic_properties(await self.topic(topic), properties)

    async def remove_property(self, topic: str, key: str) -> None:
        """Remove one of the topic's properties."""
        if not key:
            raise InvalidArgument("give the key of the topic property to remove")
        await remove_topic_property(await self.topic(topic), key)

    async def internal_stats(self, topic: str) -> ManagedLedgerFigures:
        served = await self.topic(topic)
        stats = figures(served.ml)
        for cursor in stats.cursors:
            sub = served.subscriptions.get(cursor.name)
            cursor.active = sub is not None and bool(sub.consumers)
        return stats

    async def terminate(self, topic: str) -> Position:
        """Terminate a non-partitioned topic or one partition; returns its last entry
        (see :meth:`PersistentTopic.terminate`).

        Raises:
            TopicNotFound; InvalidTopicName: a partitioned topic's own name (terminate each
            partition); NotOwner: served elsewhere.
        """
        return await (await self.topic(topic)).terminate()

    async def message_id_by_time(self, topic: str, timestamp_ms: int) -> Position:
        """The first entry published at or after ``timestamp_ms`` (Pulsar's
        ``getMessageIdByTimestamp``).

        Raises:
            InvalidArgument: a negative time; NotFound: no entry was published then or
            later (Pulsar's 404 "Message ID not found").
        """
        if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, int) or timestamp_ms < 0:
            raise InvalidArgument(f"a publish time is ms since the epoch, got {timestamp_ms!r}")
        served = await self.topic(topic)
        found = await served.position_for_time(timestamp_ms)
        if not served.ml.contains(found):
            raise NotFound(f"Message ID not found: nothing on {served.name} was published at or after {timestamp_ms}")
        return found

    async def message_by_id(self, topic: str, ledger_id: int, entry_id: int) -> PeekedMessage:
        """The message stored at ``ledger_id:entry_id`` (Pulsar's ``getMessageById``);
        of a batch, its first message (with its batch index).

        Raises:
            InvalidArgument: a negative id; NoSuchEntry: no such entry on the topic
            (never stored, or trimmed).
        """
        if ledger_id < 0 or entry_id < 0:
            raise InvalidArgument(f"a message id is two integers >= 0, got {ledger_id}:{entry_id}")
        served = await self.topic(topic)
        position = Position(ledger_id, entry_id)
        if not served.ml.contains(position):
            raise NoSuchEntry(ledger_id, entry_id, served.name)
        stored = await served.ml.read_entries(position, 1, 1 << 62)
        if not stored or stored[0][0] != position:  # trimmed meanwhile
            raise NoSuchEntry(ledger_id, entry_id, served.name)
        return peeking.PeekedMessage(position, peeking.decode(stored[0][1]), 0)

    async def update_partitions(self, topic: str, partitions: int) -> int:
        """Grow a partitioned topic to ``partitions``; returns the count it had (the
        same count changes nothing).

        As Pulsar's ``updatePartitionedTopic``, the new partitions are made ready first
        and the count is raised last: each new partition gets a ledger list and every
        durable subscription of the existing partitions, at its start (nothing published
        there is missed), stored in ZooKeeper without opening it (nobody serves it yet;
        without durable subscriptions nothing is stored: it is created on first use).
        Then the count is raised with one compare-and-set. A failure before that undoes
        what was prepared, so a failed grow leaves the topic as it was.

        Raises:
            InvalidTopicName: ``topic`` names a partition.
            TopicNotFound: it is not a partitioned topic.
            InvalidArgument: fewer partitions than it has, or more than the most allowed.
        """
        name = TopicName.parse(topic)
        if name.is_partition:
            raise InvalidTopicName(f"{name} names a partition; update the partitioned topic {name.partitioned_topic_name}")
        tenants, store = self.service.tenants, self.service.ml_store
        tenant, namespace, local = name.tenant, name.namespace_part, name.local_name
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions > tenants.max_partitions:
            raise InvalidArgument(f"a partitioned topic has at most {tenants.max_partitions} partitions, got {partitions!r}")
        old = await tenants.get_partitions(tenant, namespace, local, domain=name.domain)
        if old == 0:
            raise TopicNotFound(f"{name} is not a partitioned topic")
        if partitions < old:
            raise InvalidArgument(f"{name} has {old} partitions; the count can only grow, not go down to {partitions}")
        if partitions == old:
            return old
        durable: set[str] = set()
        for i in range(old) if name.is_persistent else ():  # nothing is kept of a non-persistent one
            durable.update(await store.list_cursors(tenant, namespace, name.partition(i).local_name))
        prepared: list[PreparedLedger] = []
        try:
            for i in range(old, partitions) if durable else ():
                ml_name = ManagedLedgerName(tenant, namespace, name.partition(i).local_name)
                prepared.append(await prepare_ledger(ml_name, store, sorted(durable), self.service.ml_config))
            return await tenants.update_partitions(tenant, namespace, local, partitions, domain=name.domain)  # the last step
        except BaseException:
            await self._unprepare(name, prepared)
            raise

    async def _unprepare(self, name: TopicName, prepared: list[PreparedLedger]) -> None:
        """Undo a failed grow's preparations, except of partitions that exist after all
        (another grow raised the count meanwhile: they are its partitions now)."""
        try:
            count = await self.service.tenants.get_partitions(
                name.tenant, name.namespace_part, name.local_name, domain=name.domain)
            for p in prepared:
                if TopicName.parse(str(p.name)).partition_index >= count:
                    await unprepare_ledger(self.service.ml_store, p)
        except MagnetarError as exc:
            log.warning("growing %s failed, and undoing its new partitions' metadata failed too: %s", name, exc)

    async def peek(self, topic: str, subscription: str, n: int) -> PeekedMessage | None:
        """The ``n``-th message ``subscription`` has not acknowledged (None: it has fewer).

        Raises:
            SubscriptionNotFound; InvalidArgument: ``n`` below 1.
        """
        served, cursor = await self._cursor(topic, subscription)
        return await peeking.peek(served.ml, cursor, n)

    async def peek_many(self, topic: str, subscription: str, n: int, count: int) -> list[PeekedMessage]:
        """Up to ``count`` messages from the ``n``-th one ``subscription`` has not
        acknowledged on.

        Raises:
            SubscriptionNotFound; InvalidArgument: ``n`` or ``count`` below 1.
        """
        served, cursor = await self._cursor(topic, subscription)
        return await peeking.peek_many(served.ml, cursor, n, count)

    async def _cursor(self, topic: str, subscription: str) -> tuple[PersistentTopic, ManagedCursor]:
        check_subscription_name(subscription)
        served = await self.topic(topic)
        sub = served.subscriptions.get(subscription)
        if sub is None:
            raise SubscriptionNotFound(f"subscription {subscription!r} of {served.name} does not exist")
        return served, sub.cursor

    async def examine(self, topic: str, start: Literal["earliest", "latest"], n: int) -> PeekedMessage:
        """The ``n``-th message from the start or the end (see :func:`peek.examine`).

        Raises:
            PreconditionFailed: the topic holds no messages; InvalidArgument: ``n`` below 1.
        """
        return await peeking.examine((await self.topic(topic)).ml, start, n)
