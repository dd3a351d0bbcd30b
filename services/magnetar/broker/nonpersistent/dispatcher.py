"""Which consumer of a non-persistent subscription gets a message, as Pulsar's
``NonPersistentDispatcher*``: chosen at publish time among the connected consumers; when
the chosen one has no permits (or there is none) the message is dropped for this
subscription and counted (``msgDropRate``). Nothing is held, acknowledged or redelivered.

- Exclusive, Failover: the active consumer (the persistent dispatchers' rule,
  :func:`magnetar.broker.dispatch.single_active.choose_active`).
- Shared: round robin over the consumers of the best priority level that have permits
  (Pulsar's ``getNextConsumer``): a message is dropped only when none has any.
- Key_Shared: the consumer owning the message key's hash slot (the persistent
  selectors: consistent hashing, or STICKY declared ranges); dropped when that consumer
  has no permits, so a key never goes to another consumer.
"""

from __future__ import annotations

from magnetar.broker.consumer import BrokerConsumer
from magnetar.broker.dispatch.key_shared import ConsistentHashSelector, StickyRangeSelector, slot_of
from magnetar.broker.dispatch.single_active import choose_active
from magnetar.broker.subscription_type import KeySharedMode, SubscriptionType


class NonPersistentDispatcher:
    """Chooses the consumer of each message of one subscription (pure: no I/O, no tasks)."""

    def __init__(self, sub_type: SubscriptionType, partition: int) -> None:
        self.sub_type = sub_type
        self.partition = partition
        self.consumers: list[BrokerConsumer] = []
        self.active: BrokerConsumer | None = None
        """Exclusive and Failover: the consumer that gets the messages."""
        self._next = 0  # Shared: where the round robin goes on
        self._selector: ConsistentHashSelector | StickyRangeSelector | None = None

    def consumers_changed(self, consumers: list[BrokerConsumer]) -> None:
        """The subscription's consumers are now ``consumers``."""
        self.consumers = list(consumers)
        if self.sub_type in (SubscriptionType.Exclusive, SubscriptionType.Failover):
            self.active = choose_active(self.consumers, self.partition)
        elif self.sub_type == SubscriptionType.Key_Shared:
            sticky = any(c.key_shared is not None and c.key_shared.mode == KeySharedMode.STICKY for c in self.consumers)
            self._selector = StickyRangeSelector() if sticky else ConsistentHashSelector()
            self._selector.rebuild(self.consumers)

    def choose(self, key: str | bytes = "") -> BrokerConsumer | None:
        """The consumer to send a message (of routing ``key``) to now; None: drop it."""
        if self.sub_type == SubscriptionType.Shared:
            return self._round_robin()
        if self.sub_type == SubscriptionType.Key_Shared:
            owner = self._selector.pick(slot_of(key)) if self._selector is not None else None
        else:
            owner = self.active
        return owner if owner is not None and owner.available else None

    def _round_robin(self) -> BrokerConsumer | None:
        ready = [c for c in self.consumers if c.available]
        if not ready:
            return None
        best = min(c.priority for c in ready)
        ready = [c for c in ready if c.priority == best]
        chosen = ready[self._next % len(ready)]
        self._next += 1
        return chosen
