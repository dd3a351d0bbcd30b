"""A non-persistent topic (one partition): producers and subscriptions, no storage.

As Pulsar's ``NonPersistentTopic``: a published message is answered at once with the
message id 0:0 (nothing is stored, no bookie is written), then handed to each
subscription, whose dispatcher sends it to the consumer it chooses now or drops it
(:mod:`magnetar.broker.nonpersistent.dispatcher`). So delivery is at most once:
acknowledgements are accepted and ignored, nothing is redelivered, a new subscription
(or reader) starts at the next message published, and a seek is refused. The topic lives
in the broker's memory only: unloaded or taken over, it starts empty at its next owner.

It offers the doors what :class:`magnetar.broker.topic.PersistentTopic` does (producers
in every access mode, subscriptions of every type, stats), so they need not know which
kind of topic they serve.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from magnetar.broker.access import ProducerAccess, ProducerAccessMode
from magnetar.broker.entry import count_messages, routing_key, view_entry
from magnetar.broker.namespace_policies import NamespacePolicies
from magnetar.broker.nonpersistent.subscription import (
    NON_PERSISTENT_POSITION,
    NonPersistentSubscription,
    seek_refused,
)
from magnetar.broker.producers import (
    MAX_PRODUCERS_REACHED,
    ProducerAdmission,
    Publisher,
    TopicProducers,
)
from magnetar.broker.rates import Meter
from magnetar.broker.stats import TopicStats
from magnetar.broker.subscription import check_subscription_properties
from magnetar.broker.subscription_type import InitialPosition, SubscriptionType
from magnetar.broker.topic import PublishResult
from magnetar.common.errors import (
    AlreadyExists,
    ConsumerBusy,
    InvalidArgument,
    MagnetarError,
    MessageTooBig,
    NotAllowedError,
    NotOwner,
    ProducerBusy,
    ServiceClosed,
    SubscriptionNotFound,
)
from magnetar.common.message_id import MessageId
from magnetar.common.names import check_subscription_name
from magnetar.common.tasks import BackgroundTasks
from magnetar.managedledger.position import Position

if TYPE_CHECKING:
    from magnetar.broker.config import BrokerConfig

log = logging.getLogger(__name__)


class NonPersistentTopic:
    """See the module docstring."""

    compacted = None
    """No compacted view: ``read_compacted`` consumers are refused."""
    mover = None
    publish_limiter = None
    dispatch_limiter = None
    may_hold_producers = False
    terminated = False
    terminated_position: Position | None = None
    delayed_delivery_enabled = False

    def __init__(self, name: str, partition: int, config: BrokerConfig) -> None:
        self.name = name
        self.partition = partition
        self.config = config
        self.policies = NamespacePolicies()
        self.subscriptions: dict[str, NonPersistentSubscription] = {}
        self.meter_in = Meter()
        self.meter_out = Meter()
        self._tasks = BackgroundTasks(f"topic {name}")
        self.access = ProducerAccess(name, None, self._store_epoch, lambda work: self._tasks.spawn(work, name=f"grant-exclusive:{name}"))
        """Access modes, as on a persistent topic; the epoch lives in memory only."""
        self._producers = TopicProducers(self.access, self._check_new_producer)
        self.producers = self._producers.connected
        self._closed = False

    async def _store_epoch(self, epoch: int) -> None:
        if self._closed:
            raise ServiceClosed(f"topic {self.name} is closing")

    def apply_policies(self, policies: NamespacePolicies) -> None:
        self.policies = policies

    # -- producers -------------------------------------------------------------------
    async def open_producer(
        self, producer_name: str, on_close: Callable[[MagnetarError], None] | None = None,
        access_mode: ProducerAccessMode = ProducerAccessMode.Shared, topic_epoch: int | None = None,
        on_queued: Callable[[], None] | None = None,
    ) -> ProducerAdmission:  # fmt: skip
        """Register a connected producer (see :meth:`PersistentTopic.open_producer`); its
        last sequence id is always -1: nothing is kept to deduplicate against.

        Raises: ProducerBusy, ProducerFenced, ServiceClosed.
        """
        publisher, epoch = await self._producers.open(producer_name, on_close, access_mode, topic_epoch, on_queued)
        return ProducerAdmission(publisher, -1, epoch)

    def _check_new_producer(self, producer_name: str) -> None:
        if self._closed:
            raise ServiceClosed(f"topic {self.name} is closing")
        if producer_name in self.producers:
            raise ProducerBusy(f"producer {producer_name!r} is already connected to {self.name}")
        if self.policies.producers_full(len(self.producers)):
            raise ProducerBusy(MAX_PRODUCERS_REACHED)

    def consumer_limit_reached(self) -> bool:
        """Its consumers, on every subscription, are as many as the policies' maxConsumers."""
        return self.policies.consumers_full(sum(len(s.consumers) for s in self.subscriptions.values()))

    def remove_producer(self, producer_name: str, publisher: Publisher | None = None) -> None:
        self._producers.remove(producer_name, publisher)

    async def throttle_publish(self, producer_name: str, messages: int, size: int) -> None:
        """No publish rate is applied to a non-persistent topic."""

    async def hold_while_over_quota(self, producer_name: str, check_s: float = 0.2) -> None:
        """No backlog, so no quota to wait for."""

    def block_producers(self, reason: str | None) -> None:
        """No backlog quota applies (there is no backlog)."""

    # -- publish: answered at once, dispatched now or dropped ---------------------------
    def publish(
        self, producer_name: str, entry: bytes, num_messages: int, lowest_seq: int, highest_seq: int,
        maybe_delayed: bool = True, checked: bool = False, chunk: tuple[int, int] | None = None,
    ) -> asyncio.Future[PublishResult]:  # fmt: skip
        """Hand one entry (a batch) to every subscription now; the future is done at once
        with position 0:0 (Pulsar's answer), or failed with MessageTooBig,
        InvalidArgument (an entry that does not decode) or ServiceClosed."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[PublishResult] = loop.create_future()
        if len(entry) > self.config.max_message_bytes:
            done.set_exception(MessageTooBig(len(entry), self.config.max_message_bytes))
            return done
        if self._closed:
            done.set_exception(ServiceClosed(f"topic {self.name} is closing"))
            return done
        if not checked:
            try:
                num_messages = count_messages(entry, self.config.max_message_bytes)
            except InvalidArgument as exc:
                done.set_exception(exc)
                return done
        self.meter_in.add(num_messages, len(entry))
        publisher = self.producers.get(producer_name)
        if publisher is not None:
            publisher.meter_in.add(num_messages, len(entry))
        done.set_result(PublishResult(NON_PERSISTENT_POSITION))
        if self.subscriptions:
            key = self._key(entry)
            for sub in list(self.subscriptions.values()):
                sub.dispatch(entry, num_messages, key)
        return done

    @staticmethod
    def _key(entry: bytes) -> str | bytes:
        messages = view_entry(entry).messages
        return routing_key(messages[0]) if messages else ""

    def count_out(self, messages: int, size: int = 0) -> None:
        self.meter_out.add(messages, size)

    # -- subscriptions ------------------------------------------------------------------
    async def subscribe(
        self, name: str, sub_type: SubscriptionType, initial_position: InitialPosition,
        start: Position | None = None, inclusive: bool = False, durable: bool = True,
        properties: Mapping[str, str] | None = None,
    ) -> NonPersistentSubscription:
        """The subscription ``name``, made (with ``properties``, kept in memory while the
        topic is loaded) when it does not exist. It gets the messages published from now
        on: ``initial_position`` and ``start`` cannot reach back (there is nothing kept),
        as on Pulsar's non-persistent topics.

        Raises: InvalidArgument (a bad name or properties); ServiceClosed.
        """
        check_subscription_name(name)
        props = check_subscription_properties(properties or {})
        if self._closed:
            raise ServiceClosed(f"topic {self.name} is closing")
        sub = self.subscriptions.get(name)
        if sub is None:
            sub = self.subscriptions[name] = NonPersistentSubscription(
                self, name, sub_type, durable=durable, on_empty=self._drop_non_durable)
            sub.properties = props
        return sub

    def _drop_non_durable(self, sub: NonPersistentSubscription) -> None:
        if self.subscriptions.get(sub.name) is sub:
            del self.subscriptions[sub.name]

    async def create_subscription(self, name: str, start: Any = None) -> NonPersistentSubscription:
        """Admin's create (or a producer's initial subscription): from now on.

        Raises: AlreadyExists; InvalidArgument; ServiceClosed.
        """
        if name in self.subscriptions:
            raise AlreadyExists(f"subscription {name!r} already exists on {self.name}")
        return await self.subscribe(name, SubscriptionType.Exclusive, InitialPosition.Latest)

    async def delete_subscription(self, name: str, force: bool = False) -> None:
        """Raises: SubscriptionNotFound; ConsumerBusy: consumers are attached (without ``force``)."""
        sub = self.subscriptions.get(name)
        if sub is None:
            raise SubscriptionNotFound(f"subscription {name!r} does not exist on {self.name}")
        if sub.consumers and not force:
            raise ConsumerBusy(f"subscription {name!r} on {self.name} has connected consumers")
        del self.subscriptions[name]
        sub.close(SubscriptionNotFound(f"subscription {name!r} on {self.name} was deleted"))

    def position_of(self, mid: MessageId) -> Position:
        """Where a start message id points: nowhere that is kept (a subscription starts
        at the next message whatever it asked for)."""
        return NON_PERSISTENT_POSITION

    async def position_for_time(self, timestamp_ms: int) -> Position:
        raise seek_refused()

    async def last_message_id(self) -> tuple[int, int, int]:
        raise NotAllowedError(f"GetLastMessageId is not allowed on non-persistent topic {self.name}: nothing is kept")

    # -- lifecycle ------------------------------------------------------------------
    def end_streams(self, error: MagnetarError) -> None:
        self._producers.end_streams(error)
        for sub in self.subscriptions.values():
            for c in list(sub.consumers):
                if c.on_close is not None:
                    c.on_close(error)

    async def close(self, reason: MagnetarError | None = None) -> None:
        """Stop serving: every stream ends with ``reason`` (default NotOwner: the clients
        look the topic up again); what the topic held in memory is gone."""
        if self._closed:
            return
        self._closed = True
        error = reason or NotOwner(f"topic {self.name} is no longer served here; look it up again")
        self._producers.fence(error)
        for sub in self.subscriptions.values():
            sub.close(error)
        await self._tasks.close()

    # -- stats ------------------------------------------------------------------------
    def meters(self) -> list[Meter]:
        out = [self.meter_in, self.meter_out, *(p.meter_in for p in self.producers.values())]
        for sub in self.subscriptions.values():
            out.extend(sub.meters())
        return out

    def stats(self) -> TopicStats:
        """Pulsar's ``NonPersistentTopicStats``: no storage, no backlog; ``msg_drop_*`` sum
        the subscriptions' drops."""
        subs = [s.stats() for s in self.subscriptions.values()]
        m_in, m_out = self.meter_in, self.meter_out
        return TopicStats(
            topic=self.name, msg_in_counter=m_in.messages, bytes_in_counter=m_in.bytes,
            msg_out_counter=m_out.messages, bytes_out_counter=m_out.bytes, entries=0, storage_size=0, ledgers=0,
            msg_rate_in=m_in.msg_rate, msg_throughput_in=m_in.byte_rate, msg_rate_out=m_out.msg_rate,
            msg_throughput_out=m_out.byte_rate, backlog_size=0,
            publishers=[p.stats() for p in self.producers.values()],
            subscriptions=subs,
            msg_drop_counter=sum(s.msg_drop_counter for s in subs),
            msg_drop_rate=sum(s.msg_drop_rate for s in subs),
        )
