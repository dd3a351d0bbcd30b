"""Subscription operations over a namespace (Pulsar's ``namespaces clear-backlog`` and
``namespaces unsubscribe``), on the topics of one of its bundles.

As Pulsar's brokers do, each bundle's owner runs the operation on the bundle's topics
(an unowned bundle is taken by the broker asked, as a lookup would). A topic (or a
partition) without the subscription is left alone. An unsubscribe first checks every
topic of the bundle: while one of them has consumers connected to the subscription,
nothing is deleted and the answer is Pulsar's 412 reason. ``check_only`` runs only that
check, so a caller spanning bundles (``AdminClient``) checks them all before it deletes
anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from magnetar.common.errors import InvalidArgument, PreconditionFailed, TopicNotFound
from magnetar.common.names import NamespaceName, TopicName, check_subscription_name

if TYPE_CHECKING:
    from magnetar.broker.service import BrokerService
    from magnetar.broker.topic import PersistentTopic

SUBSCRIPTION_BUSY = "Subscription has active connected consumers"
"""Pulsar's reason (412) for an unsubscribe of a subscription with consumers."""


@dataclass(frozen=True)
class NamespaceOpResult:
    subscriptions: int = 0
    """Subscriptions cleared or deleted."""
    entries: int = 0
    """Entries acknowledged by a clear."""


class NamespaceOps:
    """The namespace subscription operations of one broker (see the module docstring)."""

    def __init__(self, service: BrokerService) -> None:
        self.service = service

    async def _bundle_topics(self, namespace: str, bundle: str) -> list[PersistentTopic]:
        """The bundle's topics (every partition), opened here.

        Raises: NamespaceNotFound; InvalidArgument: no such bundle; NotOwner: another
        broker owns the bundle.
        """
        ns = NamespaceName.parse(namespace)
        await self.service.bundle_owners(str(ns), bundle)  # NamespaceNotFound, a bad bundle
        bundles = await self.service.bundles_data(str(ns))
        out = []
        for name in await self.service.list_topic_partitions(str(ns)):
            if bundles.bundle_of(TopicName.parse(name)) != bundle:
                continue
            try:
                out.append(await self.service.get_topic(name, create=False))
            except TopicNotFound:
                continue  # a partition never used: nothing stored, no subscription
        return out

    async def clear_backlog(self, namespace: str, bundle: str, subscription: str = "") -> NamespaceOpResult:
        """Acknowledge the whole backlog of ``subscription`` (empty: every subscription)
        on each topic of the bundle that has it."""
        if subscription:
            check_subscription_name(subscription)
        subscriptions = entries = 0
        for topic in await self._bundle_topics(namespace, bundle):
            for name, sub in list(topic.subscriptions.items()):
                if not subscription or name == subscription:
                    entries += sub.clear_backlog()
                    subscriptions += 1
        return NamespaceOpResult(subscriptions, entries)

    async def unsubscribe(self, namespace: str, bundle: str, subscription: str, check_only: bool = False) -> NamespaceOpResult:
        """Delete ``subscription`` on each topic of the bundle that has it.

        Raises:
            InvalidArgument: no subscription named.
            PreconditionFailed: consumers are connected to it on one of the topics
                (nothing is deleted).
        """
        if not subscription:
            raise InvalidArgument("name the subscription to delete")
        check_subscription_name(subscription)
        having = [t for t in await self._bundle_topics(namespace, bundle) if subscription in t.subscriptions]
        busy = [t.name for t in having if t.subscriptions[subscription].consumers]
        if busy:
            raise PreconditionFailed(f"{SUBSCRIPTION_BUSY} ({subscription!r} on {', '.join(busy)})")
        if check_only:
            return NamespaceOpResult()
        for topic in having:
            await topic.delete_subscription(subscription, False)
        return NamespaceOpResult(len(having))
