"""A consumer attached to a subscription, as the broker sees it: permits, the messages it
holds unacknowledged, and where its deliveries go (the gRPC stream, or any other adapter,
which translates each :class:`Delivery` to its wire)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from magnetar.broker.rates import Meter
from magnetar.broker.subscription_type import KeySharedPolicy
from magnetar.common import masks
from magnetar.common.errors import MagnetarError
from magnetar.managedledger.position import Position

if TYPE_CHECKING:
    from magnetar.broker.deadletter.policy import DeadLetterPolicy

_ids = itertools.count(1)


@dataclass(slots=True)
class Delivery:
    """An entry sent to a consumer.

    Attributes:
        position: the entry (its message ids are this position on the subscription's
            topic partition, with the batch index of each message of a batch).
        entry: the entry as stored (:mod:`magnetar.broker.entry`).
        redelivery_count: how often this entry was failed and delivered again (nack, ack
            timeout, redeliver-all), stored with the cursor; at least 1 when it may have
            been delivered before (a consumer that held it left, a previous owner).
        skipped: mask of the messages of the entry that are not for this consumer
            (already acknowledged, or in Key_Shared another consumer's key); 0: none.
        messages: the number of messages in the entry (the width of ``skipped``).
    """

    position: Position
    entry: bytes
    redelivery_count: int
    skipped: int = 0
    messages: int = 1


@dataclass(eq=False)
class BrokerConsumer:
    """Attributes:
        sink: takes a list of :class:`Delivery`; must not block.
        on_reset: tells the consumer its subscription was moved (a seek): what it was
            sent before is void.
        max_unacked: the consumer is blocked while it holds this many unacked messages,
            until it is down to half (0: no limit).
        on_close: ends the consumer's stream with an error: NotOwner when the topic stops
            being served here (the client looks it up again), a fatal one when its
            subscription or topic was deleted.
        on_active: on Exclusive and Failover subscriptions, told whether the consumer is
            the active one when it attaches and whenever that changes (Pulsar's
            ACTIVE_CONSUMER_CHANGE).
        pending: entries delivered and not acknowledged: position -> mask of the messages
            held; ``unacked`` counts the messages held (the masks' bits).
        dead_letter: its retry/dead-letter policy (None: it asked for none).
        key_shared: on a Key_Shared subscription, its mode and sticky hash ranges (None:
            AUTO_SPLIT).
        meter_out: the messages and bytes delivered to it (stats).
        meter_ack: the messages it acknowledged of those it held (Pulsar's
            ``messageAckRate``); bytes not counted.
        meter_redeliver: the messages it failed (a nack, an ack timeout, a redeliver-all
            request: Pulsar's ``msgRateRedeliver``); bytes not counted.
        read_compacted: reads the topic's compacted view up to its horizon, then the
            topic (Exclusive and Failover subscriptions only, as Pulsar's).
        on_end_of_topic: told once when its topic was terminated and its subscription
            has read every entry (Pulsar's REACHED_END_OF_TOPIC).
    """

    name: str
    priority: int
    sink: Callable[[list[Delivery]], None]
    on_reset: Callable[[], None] | None = None
    max_unacked: int = 0
    on_close: Callable[[MagnetarError], None] | None = None
    on_active: Callable[[bool], None] | None = None
    key_shared: KeySharedPolicy | None = None
    read_compacted: bool = False
    on_end_of_topic: Callable[[], None] | None = None
    consumer_id: int = field(default_factory=lambda: next(_ids), init=False)
    permits: int = field(default=0, init=False)
    pending: dict[Position, int] = field(default_factory=dict, init=False)
    unacked: int = field(default=0, init=False)
    blocked: bool = field(default=False, init=False)
    closed: bool = field(default=False, init=False)
    told_end_of_topic: bool = field(default=False, init=False)
    dead_letter: DeadLetterPolicy | None = field(default=None, init=False)
    meter_out: Meter = field(default_factory=Meter, init=False)
    meter_ack: Meter = field(default_factory=Meter, init=False)
    meter_redeliver: Meter = field(default_factory=Meter, init=False)
    connected_since_ms: int = field(default_factory=lambda: int(time.time() * 1000), init=False)

    @property
    def available(self) -> bool:
        """May get more messages now (permits left, not blocked, not closed)."""
        return self.permits > 0 and not self.blocked and not self.closed

    def hold(self, position: Position, mask: int, size: int = 0) -> None:
        """``mask``'s messages of ``position`` (an entry of ``size`` bytes) were delivered
        to this consumer."""
        n = masks.count(mask)
        self.meter_out.add(n, size)
        self.pending[position] = self.pending.get(position, 0) | mask
        self.unacked += n
        self.permits -= n
        if self.max_unacked and self.unacked >= self.max_unacked:
            self.blocked = True

    def release(self, position: Position, mask: int = -1) -> int:
        """Forget held messages (acked or sent back); returns the mask released."""
        held = self.pending.get(position)
        if held is None:
            return 0
        released = held & mask
        rest = held & ~mask
        if rest:
            self.pending[position] = rest
        else:
            del self.pending[position]
        self.unacked -= masks.count(released)
        if self.blocked and self.unacked <= self.max_unacked // 2:
            self.blocked = False
        return released

    def acknowledged(self, position: Position, mask: int = -1) -> int:
        """:meth:`release` what it acknowledged, counted in ``meter_ack``."""
        released = self.release(position, mask)
        if released:
            self.meter_ack.add(masks.count(released), 0)
        return released

    def release_all(self) -> dict[Position, int]:
        """Forget everything held; returns it."""
        held, self.pending = self.pending, {}
        self.unacked = 0
        self.blocked = False
        return held

    def __repr__(self) -> str:
        return f"BrokerConsumer({self.name!r}, permits={self.permits}, unacked={self.unacked})"
