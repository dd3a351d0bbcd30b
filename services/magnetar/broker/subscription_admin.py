"""Subscription admin on the topics this broker serves: list, create, delete, skip,
clear the backlog, reset the cursor, expire messages (pulsar-admin's ``topics
subscriptions``, ``create-subscription``, ``unsubscribe``, ``skip``, ``clear-backlog``,
``reset-cursor``, ``expire-messages``).

A partitioned topic's operation applies to every partition (or, for a message id, to
the partition the id names). Every partition must be served here; ``magnetar admin``
instead looks each partition up and sends the call to its owner. Every target is
checked before any is changed, so bad input changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from magnetar.broker.subscription import check_subscription_properties
from magnetar.common.errors import (
    AlreadyExists,
    ConsumerBusy,
    InvalidArgument,
    NotOwner,
    SubscriptionNotFound,
)
from magnetar.common.message_id import MessageId, Start, message_id_sentinel
from magnetar.common.names import TopicName, check_subscription_name
from magnetar.common.partitions import admin_targets

if TYPE_CHECKING:
    from magnetar.broker.service import BrokerService
    from magnetar.broker.topic import PersistentTopic



def check_message_id(message_id: MessageId) -> None:
    """Raises: InvalidArgument: neither a sentinel nor an entry's id."""
    if message_id_sentinel(message_id) is None and (message_id.ledger_id() < 0 or message_id.entry_id() < 0):
        raise InvalidArgument(
            f"invalid message id {message_id.ledger_id()}:{message_id.entry_id()}: ledger and entry ids "
            "are >= 0 (or -1:-1 for earliest)"
        )


class SubscriptionAdmin:
    """The admin operations of one broker (see the module docstring)."""

    def __init__(self, service: BrokerService, clock: Callable[[], float] = time.time) -> None:
        """Args: clock: wall-clock seconds (message expiry compares publish times with it)."""
        self.service = service
        self._clock = clock

    # -- targets -----------------------------------------------------------------
    async def _partitions(self, topic: str) -> int:
        name = TopicName.parse(topic)
        return await self.service.partitions(str(name.partitioned_topic_name))

    async def _targets(
        self, topic: str, message_id: MessageId | None = None, whole_topic: bool = False,
    ) -> list[PersistentTopic]:
        """The served topics (partitions) the call applies to, opened. A message id
        selects its partition of a partitioned topic, unless ``whole_topic`` (the call
        must apply to every partition: then an entry's id is refused).

        Raises:
            InvalidArgument: a message id without a partition on a partitioned topic, or
                naming another partition than the topic's.
            TopicNotFound, NamespaceNotFound: no such topic.
            NotOwner: a target is served by another broker.
        """
        name = TopicName.parse(topic)
        partitions = await self._partitions(topic)
        targets = admin_targets(topic, partitions, message_id, whole_topic)
        fanned_out = len(targets) > 1 or targets[0] != str(name)
        out = []
        for target in targets:
            try:
                # Partitions of a partitioned topic exist by declaration: open them.
                out.append(await self.service.get_topic(target, create=False, explicit=partitions > 0))
            except NotOwner as exc:
                if not fanned_out:
                    raise
                raise NotOwner(
                    f"partition {target} of {name} is served by another broker; send the call for each "
                    "partition to its owner (magnetar admin does)"
                ) from exc
        return out

    @staticmethod
    def _require(topics: list[PersistentTopic], subscription: str) -> None:
        for t in topics:
            if subscription not in t.subscriptions:
                raise SubscriptionNotFound(f"subscription {subscription!r} of {t.name} does not exist")

    # -- operations --------------------------------------------------------------
    async def list_subscriptions(self, topic: str) -> list[str]:
        """Durable and non-durable subscriptions (of every partition), sorted."""
        names: set[str] = set()
        for t in await self._targets(topic):
            names.update(t.subscriptions)
        return sorted(names)

    async def create_subscription(self, topic: str, subscription: str, start: MessageId | Start) -> None:
        """Create ``subscription`` starting at ``start`` on the topic (every partition
        that lacks it).

        Raises:
            AlreadyExists: every target has it already.
        """
        check_subscription_name(subscription)
        message_id: MessageId | None = None
        named: Start | None = None
        if isinstance(start, MessageId):
            check_message_id(start)
            message_id, named = start, message_id_sentinel(start)
        elif start in ("earliest", "latest"):
            named = start
        else:
            raise InvalidArgument(f"a subscription starts at earliest, latest or a message id, not {start!r}")
        targets = await self._targets(topic, message_id, whole_topic=True)
        missing = [t for t in targets if subscription not in t.subscriptions]
        if not missing:
            raise AlreadyExists(f"subscription {subscription!r} of {topic} already exists")
        for t in missing:
            if named is None:
                assert message_id is not None  # start was a message id
                await t.create_subscription(subscription, t.position_of(message_id))
            else:
                await t.create_subscription(subscription, named)

    async def delete_subscription(self, topic: str, subscription: str, force: bool) -> None:
        """Delete ``subscription`` (on every partition that has it).

        Raises:
            SubscriptionNotFound: no target has it.
            ConsumerBusy: consumers are attached and not ``force`` (nothing is deleted).
        """
        check_subscription_name(subscription)
        targets = [t for t in await self._targets(topic) if subscription in t.subscriptions]
        if not targets:
            raise SubscriptionNotFound(f"subscription {subscription!r} of {topic} does not exist")
        if not force:
            for t in targets:
                if t.subscriptions[subscription].consumers:
                    raise ConsumerBusy(
                        f"subscription {subscription!r} of {t.name} has connected consumers; "
                        "close them first or force it"
                    )
        for t in targets:
            await t.delete_subscription(subscription, force)

    async def skip(self, topic: str, subscription: str, count: int) -> int:
        """Acknowledge the next ``count`` entries (on every partition); returns how many were.

        Raises:
            InvalidArgument: ``count`` below 1.
            SubscriptionNotFound: a target lacks the subscription (nothing is skipped).
        """
        check_subscription_name(subscription)
        if count < 1:
            raise InvalidArgument(f"give at least 1 message to skip, got {count} (or clear the whole backlog)")
        targets = await self._targets(topic)
        self._require(targets, subscription)
        return sum(t.subscriptions[subscription].skip(count) for t in targets)

    async def clear_backlog(self, topic: str, subscription: str) -> int:
        """Acknowledge the whole backlog (of every partition); returns the entries acknowledged."""
        check_subscription_name(subscription)
        targets = await self._targets(topic)
        self._require(targets, subscription)
        return sum(t.subscriptions[subscription].clear_backlog() for t in targets)

    async def get_properties(self, topic: str, subscription: str) -> dict[str, str]:
        """The subscription's properties (of a partitioned topic, every partition's
        merged, as Pulsar's).

        Raises:
            SubscriptionNotFound: a target lacks the subscription.
        """
        check_subscription_name(subscription)
        targets = await self._targets(topic)
        self._require(targets, subscription)
        out: dict[str, str] = {}
        for t in targets:
            out.update(t.subscriptions[subscription].properties)
        return out

    async def update_properties(self, topic: str, subscription: str, properties: dict[str, str]) -> None:
        """Replace the subscription's properties (on every partition).

        Raises:
            InvalidArgument: bad properties; SubscriptionNotFound: a target lacks the
                subscription (nothing is changed either way).
        """
        check_subscription_name(subscription)
        properties = check_subscription_properties(properties)
        targets = await self._targets(topic)
        self._require(targets, subscription)
        for t in targets:
            await t.subscriptions[subscription].set_properties(properties)

    async def reset_cursor(self, topic: str, subscription: str, target: int | MessageId) -> None:
        """Move the subscription to a publish time (ms since epoch; every partition) or a
        message id (the partition it names).

        Raises:
            InvalidArgument: a negative time or a bad id.
            SubscriptionNotFound: a target lacks the subscription (nothing is moved).
        """
        check_subscription_name(subscription)
        if isinstance(target, MessageId):
            check_message_id(target)
            topics = await self._targets(topic, target)
        else:
            if target < 0:
                raise InvalidArgument(f"a reset time is ms since the epoch, got {target}")
            topics = await self._targets(topic)
        self._require(topics, subscription)
        positions = []
        for t in topics:
            if isinstance(target, MessageId):
                positions.append(t.position_of(target))
            else:
                positions.append(await t.position_for_time(target))
        for t, position in zip(topics, positions, strict=True):
            await t.subscriptions[subscription].reset_cursor(position)

    async def expire_all_subscriptions(self, topic: str, expire_time_s: int) -> int:
        """Acknowledge, on every subscription of the topic (of each partition), every
        message published more than ``expire_time_s`` seconds ago (Pulsar's
        ``expireMessagesForAllSubscriptions``); returns the entries acknowledged.

        Raises:
            InvalidArgument: a negative time.
        """
        _check_expiry(expire_time_s)
        topics = await self._targets(topic)
        cutoff_ms = max(0, int(self._clock() * 1000) - expire_time_s * 1000)
        keep = [await t.position_for_time(cutoff_ms) for t in topics]
        return sum(
            sub.expire_before(p) for t, p in zip(topics, keep, strict=True) for sub in list(t.subscriptions.values())
        )

    async def expire_messages(self, topic: str, subscription: str, expire_time_s: int) -> int:
        """Acknowledge every message published more than ``expire_time_s`` seconds ago
        (on every partition); returns the entries acknowledged. Publish times are taken to
        grow along the topic (the search for the first one to keep is a binary search).

        Raises:
            InvalidArgument: a negative time.
            SubscriptionNotFound: a target lacks the subscription (nothing is expired).
        """
        check_subscription_name(subscription)
        _check_expiry(expire_time_s)
        topics = await self._targets(topic)
        self._require(topics, subscription)
        cutoff_ms = max(0, int(self._clock() * 1000) - expire_time_s * 1000)
        keep = [await t.position_for_time(cutoff_ms) for t in topics]
        return sum(t.subscriptions[subscription].expire_before(p) for t, p in zip(topics, keep, strict=True))


def _check_expiry(expire_time_s: int) -> None:
    if isinstance(expire_time_s, bool) or not isinstance(expire_time_s, int) or expire_time_s < 0:
        raise InvalidArgument(f"an expiry time is seconds >= 0, got {expire_time_s!r}")
