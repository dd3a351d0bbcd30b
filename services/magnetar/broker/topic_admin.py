"""Topic admin on the topics this broker serves, for the gateway's
``/admin/v2/persistent``: internal stats, growing a partitioned topic, peeking and
examining messages (pulsar-admin's ``stats-internal``, ``update-partitioned-topic``,
``peek-messages``, ``examine-message``). Nothing here changes a topic's data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from magnetar.broker import peek as peeking
from magnetar.broker.managedledger.stats import ManagedLedgerFigures, figures
from magnetar.common.errors import InvalidTopicName, SubscriptionNotFound
from magnetar.common.names import TopicName, check_subscription_name
from magnetar.common.partitions import admin_targets

if TYPE_CHECKING:
    from magnetar.broker.managedledger.cursor import ManagedCursor
    from magnetar.broker.peek import PeekedMessage
    from magnetar.broker.service import BrokerService
    from magnetar.broker.topic import PersistentTopic


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

    async def internal_stats(self, topic: str) -> ManagedLedgerFigures:
        served = await self.topic(topic)
        stats = figures(served.ml)
        for cursor in stats.cursors:
            sub = served.subscriptions.get(cursor.name)
            cursor.active = sub is not None and bool(sub.consumers)
        return stats

    async def update_partitions(self, topic: str, partitions: int) -> int:
        """Grow a partitioned topic to ``partitions``; returns the count it had. Its new
        partitions exist from then on (they are opened on first use).

        Raises:
            InvalidTopicName: ``topic`` names a partition.
            TopicNotFound: it is not a partitioned topic.
            InvalidArgument: fewer partitions than it has, or more than the most allowed.
        """
        name = TopicName.parse(topic)
        if name.is_partition:
            raise InvalidTopicName(f"{name} names a partition; update the partitioned topic {name.partitioned_topic_name}")
        return await self.service.tenants.update_partitions(name.tenant, name.namespace_part, name.local_name, partitions)

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
