"""A persistent topic (one partition): its managed ledger, producers, subscriptions,
message deduplication, and what it enforces of its namespace's policies.

Deduplication (as Pulsar's): each producer name has a highest sequence id *pushed*
(sent to the managed ledger) and *persisted* (stored). A batch whose lowest sequence id
is not above the pushed one is a resend and is not stored again. After a broker takes the
topic over, the state is rebuilt by scanning the topic's entries (each EntryBatch names
its producer and sequence ids) from the last snapshot on (:mod:`magnetar.broker.dedup`,
written every ``deduplication_entries_interval`` entries and on unload). Retry/DLQ
copies are deduplicated the same way, each moved message under a producer name of its
own; only the latest ``MAX_MOVE_NAMES`` of those are remembered.

Deduplication is on when the namespace says so (policy ``deduplication``), else when the
broker's ``deduplication_enabled`` does. Switched off, resends are stored again, but the
state is still kept, so switching it on again is exact at once. A topic loaded with it
off keeps no state; switching it on then rebuilds the state by the same scan, in the
background, and resends are recognised once that scan is done.

Namespace policies enforced here (the rest is :mod:`magnetar.broker.policy_task`'s): a
``destination_storage`` backlog quota that blocks producers is checked on every publish
and every new producer: with ``producer_exception`` they are refused
(``ProducerBlockedQuotaExceeded`` while the backlog is over ``limit_size``), with
``producer_request_hold`` the produce door stops reading the producer's requests until
the backlog is back under the quota (:meth:`hold_while_over_quota`); delayed delivery switched off delivers delayed messages at once (the
dispatchers ask :attr:`PersistentTopic.delayed_delivery_enabled`); a delayed message due
more than ``max_delivery_delay_ms`` after its publish time is refused. Rate limits
(``publishRate``, ``dispatchRate``) are token buckets per topic partition
(:mod:`magnetar.broker.ratelimit`): the produce door waits in :meth:`throttle_publish`
before it reads a producer's next request, and the dispatchers of every subscription
draw from :attr:`PersistentTopic.dispatch_limiter`.

Producer access modes (Shared, Exclusive, WaitForExclusive, ExclusiveWithFencing) and the
topic epoch that keeps a fenced producer fenced across reconnects and hand-overs are
:mod:`magnetar.broker.access`'s; :meth:`PersistentTopic.open_producer` applies them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from magnetar.broker.access import EPOCH_PROPERTY, ProducerAccess, ProducerAccessMode, parse_epoch
from magnetar.broker.backlog import backlog_bytes, slowest
from magnetar.broker.dedup import SNAPSHOT_PROPERTY, DedupState, Snapshot
from magnetar.broker.dispatch.delayed import effective_deliver_at
from magnetar.broker.entry import (
    CHUNK_METADATA_ROOM,
    Entry,
    check_chunk_entry,
    claimed_sequence_id,
    count_messages,
    decode_entry,
    is_partial_chunk,
    partial_chunk,
    publish_time,
    view_entry,
)
from magnetar.broker.namespace_policies import (
    NamespacePolicies,
    QuotaPolicy,
    QuotaType,
    managed_ledger_config,
)
from magnetar.broker.producers import (
    MAX_PRODUCERS_REACHED,
    ProducerAdmission,
    Publisher,
    TopicProducers,
)
from magnetar.broker.ratelimit import RateLimiter, limiter_for
from magnetar.broker.rates import Meter
from magnetar.broker.stats import TopicStats
from magnetar.broker.subscription import (
    TYPE_PROPERTY,
    TYPES_BY_NAME,
    Subscription,
    check_subscription_properties,
)
from magnetar.broker.subscription_type import InitialPosition, SubscriptionType
from magnetar.broker.termination import (
    TERMINATED_PROPERTY,
    encode_position,
    parse_terminated,
    terminated_error,
)
from magnetar.broker.topic_properties import store_ledger_property
from magnetar.common.compression import MAX_UNCOMPRESSED_SIZE
from magnetar.common.errors import (
    AlreadyExists,
    ConsumerBusy,
    InvalidArgument,
    LedgerFenced,
    MagnetarError,
    MessageTooBig,
    MetadataVersionConflict,
    NotOwner,
    ProducerBlockedQuotaExceeded,
    ProducerBusy,
    ServiceClosed,
    SubscriptionNotFound,
    TopicNotFound,
)
from magnetar.common.message_id import INT64_MAX, MessageId, Start, message_id_sentinel
from magnetar.common.names import check_subscription_name
from magnetar.common.tasks import BackgroundTasks
from magnetar.managedledger.config import ManagedLedgerConfig
from magnetar.managedledger.position import Position
from magnetar.managedledger.stats import estimated_size

if TYPE_CHECKING:
    from magnetar.broker.compaction.reader import CompactedEntries
    from magnetar.broker.config import BrokerConfig
    from magnetar.broker.deadletter import MovePublisher

log = logging.getLogger(__name__)



@dataclass
class PublishResult:
    position: Position | None
    duplicate: bool = False


class PersistentTopic:
    # One per loaded topic (thousands per broker): attributes in slots; the __dict__ is made
    # only when something else is set on an instance (tests replace methods).
    __slots__ = (
        "name", "_on_fenced", "partition", "ml", "config", "mover", "compacted", "access", "_producers",
        "producers", "subscriptions", "meter_in", "meter_out", "_dedup", "_since_snapshot", "_covered",
        "_snapshotting", "_dedup_tracked", "_dedup_complete", "policies", "ml_defaults", "_quota_blocked",
        "publish_limiter", "dispatch_limiter", "_settled_waiters", "terminated_position", "_terminating",
        "_closed", "_sub_lock", "_tasks",
        "__dict__",
    )

    def __init__(
        self, name: str, partition: int, managed_ledger: Any, config: BrokerConfig,
        on_fenced: Callable[[str], None] | None = None,
    ) -> None:
        """Args: on_fenced: called with the topic name when another broker took it over."""
        self.name = name
        self._on_fenced = on_fenced
        self.partition = partition
        self.ml = managed_ledger
        self.config = config
        self.mover: MovePublisher | None = None
        """Publishes retry and dead-letter copies (set by the broker service)."""
        self.compacted: CompactedEntries | None = None
        """What its ``read_compacted`` consumers read (set by the broker service)."""
        self.access = ProducerAccess(
            name, None, self._store_epoch, lambda work: self._tasks.spawn(work, name=f"grant-exclusive:{self.name}"))
        """Access modes and the topic epoch (read from the ledger's properties on :meth:`load`)."""
        self._producers = TopicProducers(self.access, self._check_new_producer)
        self.producers = self._producers.connected
        self.subscriptions: dict[str, Subscription] = {}
        self.meter_in = Meter()
        """Messages and bytes stored (resends deduplicated away are not counted)."""
        self.meter_out = Meter()
        """Messages and bytes delivered to the consumers of every subscription."""
        self._dedup = DedupState()
        self._since_snapshot = 0  # entries stored since the last deduplication snapshot
        self._covered: Position | None = None  # the last entry the state has taken in
        self._snapshotting = False
        self._dedup_tracked = False  # the state follows every stored entry from now on
        self._dedup_complete = False  # ... and covers every entry stored before, too
        self.policies = NamespacePolicies()
        """Its namespace's policies (set by the broker before :meth:`load`, refreshed by
        :meth:`apply_policies`)."""
        self.ml_defaults: ManagedLedgerConfig | None = None
        """The broker's managed-ledger settings, which the namespace's persistence
        policies change for the ledger (None: the ledger's are kept as they are)."""
        self._quota_blocked: str | None = None
        self.publish_limiter: RateLimiter | None = None
        """The namespace's publishRate for this partition (None: no limit)."""
        self.dispatch_limiter: RateLimiter | None = None
        """The namespace's dispatchRate for this partition, shared by its subscriptions."""
        self._settled_waiters: list[asyncio.Future[None]] = []  # woken when a publish ends
        self.terminated_position: Position | None = None
        """Set once the topic is terminated (:meth:`terminate`): the last entry it took."""
        self._terminating = False
        self._closed = False
        self._sub_lock = asyncio.Lock()
        self._tasks = BackgroundTasks(f"topic {name}")

    async def load(self) -> None:
        """Know the stored subscriptions; rebuild deduplication state from the entries
        when deduplication is on."""
        self._apply_rates()
        self._load_subscriptions()
        self.access.epoch = parse_epoch(self.ml.properties.get(EPOCH_PROPERTY))
        self.terminated_position = parse_terminated(self.ml.properties.get(TERMINATED_PROPERTY), self.name)
        if self.deduplication_enabled:
            self._dedup_tracked = True
            await self._scan_dedup()

    async def _scan_dedup(self) -> None:
        """Learn every producer's highest stored sequence id from the last snapshot and
        the entries after it (merged with what was learnt meanwhile); resends are
        recognised from then on."""
        position: Position | None = self.ml.first_position if self.ml.number_of_entries else None
        stored = self.ml.properties.get(SNAPSHOT_PROPERTY)
        snapshot = None if stored is None else Snapshot.decode(stored)
        if stored is not None and snapshot is None:
            log.warning("topic %s: the deduplication snapshot is unreadable; scanning every entry", self.name)
        if snapshot is not None:
            for name, seq in snapshot.producers.items():
                self._dedup.stored(name, seq)
            if position is not None:
                position = max(position, snapshot.scan_from)
        scanned, last = 0, None
        while position is not None and not self._closed:
            batch = await self.ml.read_entries(position, 500, 16 * 1024 * 1024)
            if not batch:
                break
            scanned, last = scanned + len(batch), batch[-1][0]
            for pos, data in batch:
                eb = view_entry(data)  # an entry stored as sent, never parsed, names no producer
                # A chunk before the last one does not complete its message (the
                # producer resends the rest after a crash: its last chunk must not be
                # taken for a resend).
                if eb.producer_name and eb.messages and not is_partial_chunk(eb):
                    self._dedup.stored(eb.producer_name, claimed_sequence_id(eb), pos)
            position = self.ml.next_position(batch[-1][0])
        pushed = self._dedup.pushed
        for name, seq in self._dedup.persisted.items():
            pushed[name] = max(pushed.get(name, -1), seq)
        if last is not None and (self._covered is None or last > self._covered):
            self._covered = last
        self._since_snapshot += scanned  # a long scan: the next store snapshots at once
        self._dedup_complete = True

    # -- namespace policies ----------------------------------------------------------
    @property
    def deduplication_enabled(self) -> bool:
        flag = self.policies.deduplication
        return self.config.deduplication_enabled if flag is None else flag

    @property
    def delayed_delivery_enabled(self) -> bool:
        """False: delayed messages are delivered at once (policy ``delayedDelivery``)."""
        return self.policies.delayed_delivery_active

    def apply_policies(self, policies: NamespacePolicies) -> None:
        """Enforce ``policies`` from now on."""
        self.policies = policies
        if self.ml_defaults is not None:  # the next ledger takes the namespace's quorums
            self.ml.config = managed_ledger_config(self.ml_defaults, policies)
        self._apply_rates()
        age = policies.quota(QuotaType.MESSAGE_AGE)
        if age is None or age.limit_time < 0 or not age.blocks_producers:
            self._quota_blocked = None  # else the policy task decides at its next round
        if self.deduplication_enabled and not self._dedup_tracked and not self._closed:
            self._dedup_tracked = True
            self._tasks.spawn(self._scan_dedup(), name=f"dedup-scan:{self.name}")

    def _apply_rates(self) -> None:
        """Limiters for the policies' rates (kept, with their state, when unchanged)."""
        publish, dispatch = self.policies.publish_rate, self.policies.dispatch_rate
        self.publish_limiter = None if publish is None else limiter_for(
            publish.msg_rate, publish.byte_rate, current=self.publish_limiter)
        if dispatch is None:
            self.dispatch_limiter = None
            return
        msgs, size = dispatch.msg_rate, dispatch.byte_rate
        if dispatch.relative_to_publish_rate:  # Pulsar's: the limit plus what comes in
            msgs += int(self.meter_in.msg_rate * dispatch.period_s) if msgs > 0 else 0
            size += int(self.meter_in.byte_rate * dispatch.period_s) if size > 0 else 0
        self.dispatch_limiter = limiter_for(msgs, size, dispatch.period_s, current=self.dispatch_limiter)

    async def throttle_publish(self, producer_name: str, messages: int, size: int) -> None:
        """Count a producer's sends against the publish rate and return once the rate
        allows more: the door reads the producer's next request only then (its sends wait
        in gRPC's flow control, never fail). A policy removed meanwhile ends the wait at
        the next check."""
        limiter = self.publish_limiter
        if limiter is None:
            return
        limiter.consume(messages, size)
        publisher = self.producers.get(producer_name)
        loop = asyncio.get_running_loop()
        while (limiter := self.publish_limiter) is not None and not self._closed and (wait := limiter.wait_s()) > 0:
            started = loop.time()
            await asyncio.sleep(min(wait, 1.0))  # re-checked: the policy may change
            if publisher is not None:
                publisher.throttled_s += loop.time() - started

    def block_producers(self, reason: str | None) -> None:
        """Refuse sends and new producers with ``reason`` (a message_age backlog quota,
        checked by the policy task); None: no longer."""
        self._quota_blocked = reason

    def backlog_bytes(self) -> int:
        """Bytes stored after the slowest durable subscription (estimated)."""
        marks = (s.cursor.mark_delete_position for s in self.subscriptions.values() if s.durable)
        return backlog_bytes(self.ml.layout, slowest(marks))

    def _quota_exceeded(self) -> tuple[ProducerBlockedQuotaExceeded, bool] | None:
        """Why producers are blocked now and whether the quota holds them
        (``producer_request_hold``) rather than refusing them (``producer_exception``)."""
        if self._quota_blocked is not None:
            age = self.policies.quota(QuotaType.MESSAGE_AGE)
            hold = age is not None and age.policy is QuotaPolicy.PRODUCER_REQUEST_HOLD
            return ProducerBlockedQuotaExceeded(self._quota_blocked), hold
        quota = self.policies.quota(QuotaType.DESTINATION_STORAGE)
        if quota is None or quota.limit_size < 0 or not quota.blocks_producers:
            return None
        size = self.backlog_bytes()
        if size <= quota.limit_size:
            return None
        hold = quota.policy is QuotaPolicy.PRODUCER_REQUEST_HOLD
        return ProducerBlockedQuotaExceeded(
            f"topic {self.name}: its backlog of {size} bytes is over its namespace's backlog quota of "
            f"{quota.limit_size} bytes (policy {quota.policy}); "
            + ("sends are held until consumers catch up" if hold else "sends are refused until consumers catch up")
        ), hold

    def _quota_error(self) -> ProducerBlockedQuotaExceeded | None:
        """The refusal of a ``producer_exception`` quota exceeded (a held one refuses nothing)."""
        exceeded = self._quota_exceeded()
        return None if exceeded is None or exceeded[1] else exceeded[0]

    @property
    def may_hold_producers(self) -> bool:
        """Cheap: whether a backlog quota could hold producers now (the door asks on every
        request before it awaits :meth:`hold_while_over_quota`)."""
        return bool(self.policies.backlog_quotas) or self._quota_blocked is not None

    async def hold_while_over_quota(self, producer_name: str, check_s: float = 0.2) -> None:
        """Return once no ``producer_request_hold`` backlog quota is exceeded: the door
        reads the producer's next request only then, so its sends wait (in the client,
        under its send timeout) instead of failing, as Pulsar's hold policy. The time
        counts as the producer's throttled time."""
        if not self.may_hold_producers:
            return
        publisher = self.producers.get(producer_name)
        loop = asyncio.get_running_loop()
        while not self._closed and (exceeded := self._quota_exceeded()) is not None and exceeded[1]:
            started = loop.time()
            await asyncio.sleep(check_s)  # consumers catch up, or the policy changes
            if publisher is not None:
                publisher.throttled_s += loop.time() - started

    # -- producers -------------------------------------------------------------
    def add_producer(self, producer_name: str, on_close: Callable[[MagnetarError], None] | None = None) -> int:
        """Register a connected Shared producer; returns its last stored sequence id (-1: none).

        ``on_close(error)`` ends the producer's stream with ``error`` when the topic stops
        being served here (see :meth:`close`) or an exclusive producer fences it out.

        Raises:
            ProducerBusy: a producer with this name is connected already, or an exclusive
                producer holds the topic.
        """
        self._producers.add_shared(producer_name, on_close)
        return self._dedup.persisted.get(producer_name, -1)

    async def open_producer(
        self, producer_name: str, on_close: Callable[[MagnetarError], None] | None = None,
        access_mode: ProducerAccessMode = ProducerAccessMode.Shared, topic_epoch: int | None = None,
        on_queued: Callable[[], None] | None = None,
    ) -> ProducerAdmission:  # fmt: skip
        """Register a connected producer in ``access_mode`` (``topic_epoch``: the epoch it
        was given before, when it reconnects). A WaitForExclusive producer that must wait
        is put in line (``on_queued()`` is called) and this returns once it holds the
        topic; cancel it to leave the line.

        Raises:
            ProducerBusy: the name is connected already; Shared while an exclusive
                producer holds the topic.
            ProducerFenced: an exclusive mode the topic cannot give now, or a
                ``topic_epoch`` older than the topic's.
            NotOwner: the new epoch could not be stored (another broker took the topic).
            ServiceClosed, ProducerBlockedQuotaExceeded.
        """
        publisher, epoch = await self._producers.open(producer_name, on_close, access_mode, topic_epoch, on_queued)
        return ProducerAdmission(publisher, self._dedup.persisted.get(producer_name, -1), epoch)

    def _check_new_producer(self, producer_name: str) -> None:
        if self._closed:
            raise ServiceClosed(f"topic {self.name} is closing")
        if self.terminated:
            raise terminated_error(self.name)
        if producer_name in self.producers:
            raise ProducerBusy(f"producer {producer_name!r} is already connected to {self.name}")
        if self.policies.producers_full(len(self.producers)):
            raise ProducerBusy(MAX_PRODUCERS_REACHED)
        blocked = self._quota_error()
        if blocked is not None:
            raise blocked

    def remove_producer(self, producer_name: str, publisher: Publisher | None = None) -> None:
        """Producer ``producer_name`` left (``publisher``: only when it is still the one
        registered under the name, not one that took the name since)."""
        self._producers.remove(producer_name, publisher)

    async def _store_epoch(self, epoch: int) -> None:
        """Store the topic epoch in the ledger list's properties before a producer is told it."""
        if self._closed:
            raise ServiceClosed(f"topic {self.name} is closing")
        self.ml.put_property(EPOCH_PROPERTY, str(epoch))
        try:
            await self.ml.store_properties()
        except MetadataVersionConflict as exc:
            raise NotOwner(f"topic {self.name} moved to another broker; look it up again") from exc

    def end_streams(self, error: MagnetarError) -> None:
        """End every producer's and consumer's stream with ``error`` (at once; what they
        had in flight still gets its answer first)."""
        self._producers.end_streams(error)
        for sub in self.subscriptions.values():
            for c in list(sub.consumers):
                if c.on_close is not None:
                    c.on_close(error)

    def publish(
        self, producer_name: str, entry: bytes, num_messages: int, lowest_seq: int, highest_seq: int, maybe_delayed: bool = True,
        checked: bool = False, chunk: tuple[int, int] | None = None,
    ) -> asyncio.Future[PublishResult]:  # fmt: skip
        """Store one entry (a batch); a resend recognised by deduplication is not stored.

        ``maybe_delayed=False``: the producer said the entry's message is not delayed
        (``SendBatch.deliver_at_ms`` 0), so the entry is not parsed to find out.
        ``checked=True``: the door has checked all that :func:`count_messages` checks (the
        Pulsar door, for a message sent without batching: its frame decoder verified the
        checksum and parsed the metadata), so the entry is not checked again unless it
        must be decoded (``maybe_delayed``).
        ``chunk``: (chunk id, number of chunks) of an entry that is a chunk of a chunked
        message. All chunks carry the message's sequence id; deduplication neither checks
        nor records a chunk before the last (as Pulsar's): the last one is recognised as a
        resend, or recorded. A chunk's payload is as large as the max message size (its
        door checks that) and its metadata comes on top: the entry may be up to
        :data:`CHUNK_METADATA_ROOM` larger (Pulsar's broker bounds a chunk by its frame
        size alone, max message size + 10 KiB).

        Returns a future (no task per publish: this is the hot path). It fails with
        MessageTooBig, ServiceClosed, ProducerBlockedQuotaExceeded, InvalidArgument (a
        delay over the namespace's maximum, a sequence id over 2^63-1), NotOwner (the ledger was fenced by a new
        owner) or the managed ledger's error.
        """
        loop = asyncio.get_running_loop()
        limit = self.config.max_message_bytes + (CHUNK_METADATA_ROOM if chunk is not None else 0)
        if len(entry) > limit:
            return _failed(loop, MessageTooBig(len(entry), limit))
        if self._closed:
            return _failed(loop, ServiceClosed(f"topic {self.name} is closing"))
        if self.terminated:
            return _failed(loop, terminated_error(self.name))
        if lowest_seq > INT64_MAX or highest_seq > INT64_MAX:
            # Pulsar's sequence ids are Java longs; ProducerOpened.last_sequence_id is int64.
            return _failed(loop, InvalidArgument(
                f"sequence ids are 0 to {INT64_MAX} (a 64-bit signed integer), got {lowest_seq}..{highest_seq}"
            ))
        refused: MagnetarError | None = None
        if self.policies.backlog_quotas or self._quota_blocked:
            refused = self._quota_error()
        one_delayed = num_messages == 1 and maybe_delayed
        parsed = (
            _parse_entry(entry, num_messages, one_delayed, self.config.max_message_bytes)
            if one_delayed or not checked else None
        )  # fmt: skip
        if isinstance(parsed, InvalidArgument):
            return _failed(loop, parsed)
        if chunk is not None and not checked:
            # The gRPC door: the send's chunk fields must be the entry's (a chunk decodes
            # cheaply: one message, never decompressed alone).
            try:
                check_chunk_entry(
                    parsed if parsed is not None else decode_entry(entry), chunk, self.config.max_message_bytes
                )
            except InvalidArgument as exc:
                return _failed(loop, exc)
        due = 0
        if one_delayed:
            assert parsed is not None
            due = batch_delivery_time(parsed)
            if refused is None and self.policies.max_delivery_delay_ms:
                refused = _delay_error(parsed, self.policies)
        if refused is not None:
            return _failed(loop, refused)
        tracked = self._dedup_tracked and bool(producer_name) and not (chunk is not None and partial_chunk(*chunk))
        if tracked:
            if self._dedup_complete and self.deduplication_enabled:
                if lowest_seq <= self._dedup.persisted.get(producer_name, -1):
                    return _done(loop, PublishResult(None, duplicate=True))
                if lowest_seq <= self._dedup.pushed.get(producer_name, -1):
                    # The first copy is still in flight: wait for how it ends (rare).
                    return loop.create_task(self._publish_after_settled(
                        producer_name, entry, num_messages, lowest_seq, highest_seq, maybe_delayed, checked, chunk))
            self._dedup.pushed[producer_name] = max(highest_seq, self._dedup.pushed.get(producer_name, -1))
        result: asyncio.Future[PublishResult] = loop.create_future()
        added = self.ml.add_entry(entry, due)
        publisher = self.producers.get(producer_name)
        meter = publisher.meter_in if publisher is not None else None
        added.add_done_callback(
            lambda f: self._published(f, result, producer_name if tracked else "", highest_seq, num_messages, len(entry), meter)
        )
        return result

    def _published(
        self, added: asyncio.Future[Position], result: asyncio.Future[PublishResult],
        producer_name: str, highest_seq: int, num_messages: int, size: int, meter: Meter | None = None,
    ) -> None:
        exc = added.exception() if not added.cancelled() else ServiceClosed(f"topic {self.name} is closing")
        dedup = self._dedup
        if exc is not None:
            if producer_name:  # let the producer's resend through
                dedup.pushed[producer_name] = dedup.persisted.get(producer_name, -1)
            if isinstance(exc, LedgerFenced):  # another broker recovered our ledger
                if self._on_fenced is not None:
                    self._on_fenced(self.name)
                exc = NotOwner(f"topic {self.name} moved to another broker; look it up again")
            self._wake_settled()
            if not result.done():
                result.set_exception(exc)
            return
        position = added.result()
        if producer_name:
            dedup.stored(producer_name, highest_seq, position)
            self._count_for_snapshot(position)
        self._wake_settled()
        self.meter_in.add(num_messages, size)
        if meter is not None:
            meter.add(num_messages, size)
        for sub in self.subscriptions.values():
            sub.notify_new_entries()
        if not result.done():
            result.set_result(PublishResult(position))

    async def _publish_after_settled(
        self, producer_name: str, entry: bytes, num_messages: int, lowest_seq: int, highest_seq: int, maybe_delayed: bool,
        checked: bool, chunk: tuple[int, int] | None = None,
    ) -> PublishResult:  # fmt: skip
        while lowest_seq > self._dedup.persisted.get(producer_name, -1) and lowest_seq <= self._dedup.pushed.get(producer_name, -1):
            waiter = asyncio.get_running_loop().create_future()
            self._settled_waiters.append(waiter)
            await waiter
        return await self.publish(producer_name, entry, num_messages, lowest_seq, highest_seq, maybe_delayed, checked, chunk)

    def _wake_settled(self) -> None:
        if self._settled_waiters:
            waiters, self._settled_waiters = self._settled_waiters, []
            for w in waiters:
                if not w.done():
                    w.set_result(None)

    # -- termination -------------------------------------------------------------
    @property
    def terminated(self) -> bool:
        """Terminated, or being terminated: no producer and no message is taken."""
        return self._terminating or self.terminated_position is not None

    async def terminate(self) -> Position:
        """Terminate the topic (Pulsar's ``terminate``); returns the position of the last
        entry it holds (entry id -1: it holds none in that ledger). Terminating it again
        answers the same position.

        New messages are refused at once; the adds already sent are waited for, then the
        terminated position is stored with the ledger list (see
        :mod:`magnetar.broker.termination`), then the producers are closed with
        TopicTerminated and the subscriptions woken: a consumer that has read everything
        is told it reached the end of the topic.

        Raises:
            NotOwner: another broker took the topic over before the position was stored
            (nothing is terminated then); ServiceClosed: the topic is closing.
        """
        if self.terminated_position is not None:
            return self.terminated_position
        if self._closed:
            raise ServiceClosed(f"topic {self.name} is closing")
        self._terminating = True
        try:
            while self.ml.pending_adds:
                waiter = asyncio.get_running_loop().create_future()
                self._settled_waiters.append(waiter)
                await waiter
            if self.terminated_position is not None:  # a concurrent terminate finished first
                return self.terminated_position
            last = self.ml.last_confirmed_position
            await store_ledger_property(self, TERMINATED_PROPERTY, encode_position(last))
            self.terminated_position = last
        finally:
            self._terminating = False
        self._producers.fence(terminated_error(self.name))
        for sub in self.subscriptions.values():
            sub.notify_new_entries()
        log.info("topic %s terminated at %s", self.name, last)
        return last

    # -- subscriptions ---------------------------------------------------------
    def _load_subscriptions(self) -> None:
        for name, cursor in self.ml.cursors.items():
            if name not in self.subscriptions:
                sub_type = TYPES_BY_NAME.get(cursor.properties.get(TYPE_PROPERTY, ""), SubscriptionType.Exclusive)
                self.subscriptions[name] = Subscription(self, name, sub_type, cursor)

    async def subscribe(
        self, name: str, sub_type: SubscriptionType, initial_position: InitialPosition,
        start: Position | None = None, inclusive: bool = False, durable: bool = True,
        properties: Mapping[str, str] | None = None,
    ) -> Subscription:
        """The subscription ``name``, created (its cursor at ``start`` when given, else at
        ``initial_position``, with ``properties``) when it does not exist; an existing
        one keeps its properties (as Pulsar's).

        Raises:
            InvalidArgument: a bad name or start.
            ServiceClosed: the topic is closing.
        """
        check_subscription_name(name)
        props = check_subscription_properties(properties or {})
        if self._closed:
            raise ServiceClosed(f"topic {self.name} is closing")
        async with self._sub_lock:
            sub = self.subscriptions.get(name)
            if sub is None:
                initial = "earliest" if initial_position == InitialPosition.Earliest else "latest"
                cursor = await self.ml.open_cursor(name, initial, start=start, inclusive=inclusive, durable=durable)
                if self._closed:
                    # Closed while the cursor was stored: close() did not see this
                    # subscription, so nobody would ever close it or end its streams.
                    await cursor.close(flush=False)
                    raise ServiceClosed(f"topic {self.name} is closing")
                sub = Subscription(self, name, sub_type, cursor, durable=durable, on_empty=self._drop_non_durable)
                self.subscriptions[name] = sub
                if props:
                    await sub.set_properties(props)
        return sub

    def _drop_non_durable(self, sub: Subscription) -> None:
        if self.subscriptions.get(sub.name) is sub:
            del self.subscriptions[sub.name]
        self._tasks.spawn(self._close_non_durable(sub), name=f"close-reader:{sub.name}")

    async def _close_non_durable(self, sub: Subscription) -> None:
        await sub.close()
        try:
            await self.ml.delete_cursor(sub.name)
        except MagnetarError as exc:
            log.warning("topic %s: could not drop reader cursor %s: %s", self.name, sub.name, exc.message)

    async def create_subscription(self, name: str, start: Position | Start) -> Subscription:
        """An admin's create: a durable subscription at ``start`` ("earliest", "latest" or
        a position), stored at once.

        Raises:
            AlreadyExists: the subscription exists.
        """
        if name in self.subscriptions:
            raise AlreadyExists(f"subscription {name!r} on {self.name} already exists")
        if isinstance(start, str):
            initial = InitialPosition.Earliest if start == "earliest" else InitialPosition.Latest
            sub = await self.subscribe(name, SubscriptionType.Exclusive, initial)
        else:
            sub = await self.subscribe(name, SubscriptionType.Exclusive, InitialPosition.Latest, start=start, inclusive=True)
        await sub.cursor.persist()
        return sub

    async def delete_subscription(self, name: str, force: bool = False) -> None:
        """Delete a subscription and its cursor.

        Raises:
            SubscriptionNotFound: no such subscription.
            ConsumerBusy: consumers are attached and not ``force``.
        """
        sub = self.subscriptions.get(name)
        if sub is None:
            if name not in self.ml.cursors:
                raise SubscriptionNotFound(f"subscription {name!r} on {self.name} does not exist")
        elif sub.consumers and not force:
            raise ConsumerBusy(
                f"subscription {name!r} on {self.name} has {len(sub.consumers)} consumer(s); "
                "close them first or delete with force"
            )
        if sub is not None:
            gone = SubscriptionNotFound(f"subscription {name!r} on {self.name} was deleted")
            for c in list(sub.consumers):
                if c.on_close is not None:
                    c.on_close(gone)
                sub.remove_consumer(c)
            self.subscriptions.pop(name, None)
            await sub.close()
        await self.ml.delete_cursor(name)

    def position_of(self, mid: MessageId) -> Position:
        """A message id's entry; earliest (-1) is ``(-1, -1)`` (before the first entry, as
        the cursor takes it), latest (INT64_MAX) the position after the last one."""
        named = message_id_sentinel(mid)
        if named == "earliest":
            return Position(-1, -1)
        if named == "latest":
            return self.ml.next_position(self.ml.last_confirmed_position)
        return Position.of((mid.ledger_id(), mid.entry_id()))

    async def position_for_time(self, timestamp_ms: int) -> Position:
        """The first entry published at or after ``timestamp_ms`` (the end when none)."""
        return await self.ml.find_position_by_time(timestamp_ms, publish_time)

    def last_position(self) -> Position | None:
        return self.ml.last_confirmed_position

    async def last_message_id(self, read_compacted: bool = False) -> tuple[int, int, int]:
        """``(ledger_id, entry_id, batch_index)`` of the topic's last message, as Pulsar's
        GetLastMessageId answers: in a batched entry the index of its last message, -1
        when the entry is not batched; entry id -1 when the topic has no entry (in its
        current ledger's id, as Pulsar; ``(-1, -1, -1)`` before it has a ledger). Every
        door answers with this (a reader's has_message_available compares it with what
        it has read; ``Consumer.get_last_message_id`` returns it). ``read_compacted``:
        asked for a compacted reader, which when everything is compacted gets the view's
        last message (:meth:`CompactedEntries.last_message_id`), not a tombstone it will
        never read."""
        last = self.last_position()
        if last is None:
            return -1, -1, -1
        if read_compacted and self.compacted is not None:
            in_view = await self.compacted.last_message_id(last)
            if in_view is not None:
                return in_view
        stored = await self.ml.read_entries(last, 1, 1 << 62)
        batch_index = -1
        if stored:
            entry = view_entry(stored[0][1])
            if entry.batched:
                batch_index = len(entry.messages) - 1
        return last[0], last[1], batch_index

    # -- deduplication snapshots ------------------------------------------------------
    def _count_for_snapshot(self, position: Position, entries: int = 1) -> None:
        """The state has taken in the entries up to ``position`` (stores complete in
        order): every ``deduplication_entries_interval`` entries, store a snapshot (in the
        background; one at a time)."""
        self._covered = position
        self._since_snapshot += entries
        interval = self.config.deduplication_entries_interval
        if interval and self._since_snapshot >= interval and not self._snapshotting and self._dedup_complete:
            self._snapshotting = True
            self._tasks.spawn(self._store_snapshot(), name=f"dedup-snapshot:{self.name}")

    def _put_snapshot(self) -> bool:
        """Put a snapshot of the state in the ledger list's properties (in memory);
        False when none can be made."""
        if self._covered is None or not self._dedup_complete:
            return False
        snapshot = self._dedup.snapshot(self.ml.next_position(self._covered))
        if snapshot is None:
            return False
        self.ml.put_property(SNAPSHOT_PROPERTY, snapshot.encode())
        self._since_snapshot = 0
        return True

    async def _store_snapshot(self) -> None:
        try:
            if self._put_snapshot() and not self._closed:
                await self.ml.store_properties()
        except MagnetarError as exc:
            log.warning("topic %s: could not store the deduplication snapshot: %s", self.name, exc.message)
        finally:
            self._snapshotting = False

    async def close(self, reason: MagnetarError | None = None) -> None:
        """Stop serving the topic: end every stream with ``reason`` (default NotOwner,
        which clients answer by looking the topic up again), then close the subscriptions
        and the managed ledger (which stores a last deduplication snapshot with its list)."""
        self._closed = True
        self.access.refuse_waiting(reason or NotOwner(f"topic {self.name} was unloaded from this broker; look it up again"))
        subscriptions = list(self.subscriptions.values())
        for sub in subscriptions:
            sub.closed = True  # a consumer subscribing now is refused, not left on a closed topic
        self.end_streams(reason or NotOwner(f"topic {self.name} was unloaded from this broker; look it up again"))
        for sub in subscriptions:
            await sub.close()
        await self._tasks.wait()
        if self._since_snapshot:
            self._put_snapshot()
        await self.ml.close()

    async def close_and_delete(self) -> None:
        """Stop serving and delete the topic's ledgers, cursors and metadata; every stream
        ends with TopicNotFound (the producers and consumers fail: nothing to reconnect to)."""
        self._closed = True
        self.access.refuse_waiting(TopicNotFound(f"topic {self.name} was deleted"))
        self.end_streams(TopicNotFound(f"topic {self.name} was deleted"))
        for sub in list(self.subscriptions.values()):
            await sub.dispatcher.close()
        await self._tasks.wait()
        view = self.compacted.view() if self.compacted is not None else None
        await self.ml.delete()
        if self.compacted is not None and view is not None:
            await self.compacted.delete_ledger(view.ledger_id)

    def count_out(self, messages: int, size: int = 0) -> None:
        """``messages`` (in entries of ``size`` bytes) went out to consumers of a subscription."""
        self.meter_out.add(messages, size)

    def consumer_limit_reached(self) -> bool:
        """Its consumers, on every subscription, are as many as the policies' maxConsumers."""
        return self.policies.consumers_full(sum(len(s.consumers) for s in self.subscriptions.values()))

    def meters(self) -> list[Meter]:
        """Every meter of the topic, for the rate sampler."""
        out = [self.meter_in, self.meter_out, *(p.meter_in for p in self.producers.values())]
        for sub in self.subscriptions.values():
            out.extend(sub.meters())
        return out

    def backlog_size(self) -> int:
        """Estimated bytes after the slowest durable subscription's mark-delete position."""
        marks = [s.cursor.mark_delete_position for s in self.subscriptions.values() if s.durable]
        if not marks:
            return 0
        return estimated_size(self.ml.layout, self.ml.next_position(min(marks)), self.ml.last_confirmed_position)

    def stats(self) -> TopicStats:
        subs = [s.stats() for s in self.subscriptions.values()]
        m_in, m_out = self.meter_in, self.meter_out
        return TopicStats(
            topic=self.name, msg_in_counter=m_in.messages, bytes_in_counter=m_in.bytes,
            msg_out_counter=m_out.messages, entries=self.ml.number_of_entries, storage_size=self.ml.total_size,
            subscriptions=subs, ledgers=len(self.ml.ledgers),
            publishers=[p.stats() for p in self.producers.values()],
            bytes_out_counter=m_out.bytes, msg_rate_in=m_in.msg_rate, msg_throughput_in=m_in.byte_rate,
            msg_rate_out=m_out.msg_rate, msg_throughput_out=m_out.byte_rate, backlog_size=self.backlog_size(),
        )


def _parse_entry(
    entry: bytes, num_messages: int, decode: bool = True, max_uncompressed: int = MAX_UNCOMPRESSED_SIZE,
) -> Entry | InvalidArgument | None:
    """The entry a producer sent, parsed, or why it is refused: the broker stores only
    entries its dispatchers, deduplication and peeks can read back (an entry of
    ``num_messages`` messages). Parsing costs about 1.5 µs for one message, 65 µs for a
    batch of 1,000 (upb), a few percent of the broker's work per message.

    ``decode=False``: only checked (:func:`count_messages`: a Pulsar client's batch of
    1,000 is walked in about a fifth of the CPU of decoding it), None when it passes.

    A compressed entry is decompressed to be checked, its declared uncompressed size
    within ``max_uncompressed`` (the broker's ``maxMessageSize``): a corrupt or lying one
    is refused, never stored."""
    try:
        if decode:
            batch = decode_entry(entry, max_uncompressed)
            count = len(batch.messages)
        else:
            batch, count = None, count_messages(entry, max_uncompressed)
    except InvalidArgument as exc:
        return InvalidArgument(f"{exc.message}; send it with a Magnetar or Pulsar-compatible client")
    if num_messages != count or num_messages < 1:
        return InvalidArgument(f"the send says {num_messages} messages, its entry holds {count}")
    return batch


def batch_delivery_time(batch: Entry) -> int:
    """When a one-message entry's delayed message is due (clamped; 0: not delayed).

    Only an entry of one message can be delayed (the dispatcher delivers a batch at once)."""
    if len(batch.messages) != 1:
        return 0
    return effective_deliver_at(batch.messages[0].deliver_at_ms, batch.publish_time_ms)


def delivery_time(entry: bytes) -> int:
    """:func:`batch_delivery_time` of a stored entry (0 for one that does not parse)."""
    try:
        batch = decode_entry(entry)
    except InvalidArgument:
        return 0  # malformed: not a delayed message
    return batch_delivery_time(batch)


def _delay_error(batch: Entry, policies: NamespacePolicies) -> InvalidArgument | None:
    """Pulsar's check of ``maxDeliveryDelayInMillis`` (only while delayed delivery is on)."""
    if not policies.delayed_delivery_active:
        return None
    limit = policies.max_delivery_delay_ms
    if len(batch.messages) == 1 and batch.messages[0].deliver_at_ms - batch.publish_time_ms > limit:
        return InvalidArgument(f"Exceeds max allowed delivery delay of {limit} milliseconds")
    return None


def _failed(loop: asyncio.AbstractEventLoop, exc: BaseException) -> asyncio.Future[PublishResult]:
    fut: asyncio.Future[PublishResult] = loop.create_future()
    fut.set_exception(exc)
    return fut


def _done(loop: asyncio.AbstractEventLoop, result: PublishResult) -> asyncio.Future[PublishResult]:
    fut: asyncio.Future[PublishResult] = loop.create_future()
    fut.set_result(result)
    return fut
