"""The producers connected to one topic (Pulsar's ``AbstractTopic`` producer map).

:class:`TopicProducers` registers and removes them, keeps the callback that ends each
one's stream, and applies the access modes through :class:`~magnetar.broker.access.
ProducerAccess`. A persistent and a non-persistent topic keep their producers in one each;
what differs between them (the checks a new producer passes: closed, terminated, limits,
backlog quota; what it is told: its last stored sequence id) stays in the topic.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from magnetar.broker.access import ProducerAccess, ProducerAccessMode
from magnetar.broker.rates import Meter
from magnetar.broker.stats import PublisherStats
from magnetar.common.errors import MagnetarError

__all__ = ["ProducerAdmission", "Publisher", "TopicProducers"]


MAX_PRODUCERS_REACHED = "Topic reached max producers limit"
"""A producer over the topic's maxProducers gets ProducerBusy with this (Pulsar's reason)."""


@dataclass
class Publisher:
    """A connected producer, for stats."""

    name: str
    connected_since_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    meter_in: Meter = field(default_factory=Meter)
    throttled_s: float = 0.0
    """Time its stream was paused by the publish rate limit (or held by a backlog quota)."""

    def stats(self) -> PublisherStats:
        m = self.meter_in
        return PublisherStats(
            producer_name=self.name, connected_since_ms=self.connected_since_ms, msg_in_counter=m.messages,
            bytes_in_counter=m.bytes, msg_rate_in=m.msg_rate, msg_throughput_in=m.byte_rate,
            throttled_time_ms=int(self.throttled_s * 1000),
        )


@dataclass
class ProducerAdmission:
    """What a producer admitted to a topic is told."""

    publisher: Publisher
    last_sequence_id: int
    """The highest sequence id stored under its name (-1: none)."""
    topic_epoch: int | None
    """The topic epoch (None: the topic was never held by an exclusive producer)."""


class TopicProducers:
    """The connected producers of one topic, by name, and how to end their streams."""

    def __init__(self, access: ProducerAccess, check_new: Callable[[str], None]) -> None:
        """Args: access: the topic's access modes and epoch.
        check_new: the topic's checks of a new producer's name (raises why it is refused);
        run before the producer waits for access and again once it has it."""
        self.access = access
        self._check_new = check_new
        self.connected: dict[str, Publisher] = {}
        """Never rebound: the topic hands this same dict out as its ``producers``."""
        self._closers: dict[str, Callable[[MagnetarError], None]] = {}

    def add_shared(self, name: str, on_close: Callable[[MagnetarError], None] | None) -> Publisher:
        """Register a Shared producer at once.

        Raises: what ``check_new`` raises; ProducerBusy: an exclusive producer holds the topic.
        """
        self._check_new(name)
        self.access.acquire_shared()
        return self._register(name, on_close)

    async def open(
        self, name: str, on_close: Callable[[MagnetarError], None] | None, access_mode: ProducerAccessMode,
        topic_epoch: int | None, on_queued: Callable[[], None] | None,
    ) -> tuple[Publisher, int | None]:  # fmt: skip
        """Register a producer in ``access_mode`` once the topic grants it (see
        :meth:`ProducerAccess.acquire`); returns it and the topic epoch it was given.

        Raises: what ``check_new`` and :meth:`ProducerAccess.acquire` raise.
        """
        self._check_new(name)
        epoch = await self.access.acquire(name, access_mode, topic_epoch, len(self.connected), self.fence, on_queued)
        try:
            self._check_new(name)  # checked again: time passed
        except MagnetarError:
            if access_mode is not ProducerAccessMode.Shared:
                self.access.release(name)
            raise
        return self._register(name, on_close), epoch

    def _register(self, name: str, on_close: Callable[[MagnetarError], None] | None) -> Publisher:
        publisher = self.connected[name] = Publisher(name)
        if on_close is not None:
            self._closers[name] = on_close
        return publisher

    def remove(self, name: str, publisher: Publisher | None = None) -> None:
        """Producer ``name`` left (``publisher``: only when it is still the one registered
        under the name, not one that took the name since)."""
        if publisher is not None and self.connected.get(name) is not publisher:
            return
        if self.connected.pop(name, None) is None:
            return
        self._closers.pop(name, None)
        self.access.release(name)

    def fence(self, error: MagnetarError) -> None:
        """Close every connected producer with ``error``; they are gone from the topic at
        once (their later sends are refused by their doors). ExclusiveWithFencing,
        termination and a closing non-persistent topic use it."""
        closers, self._closers = self._closers, {}
        self.connected.clear()
        for close in closers.values():
            close(error)

    def end_streams(self, error: MagnetarError) -> None:
        """End every producer's stream with ``error``; they stay registered until their
        doors remove them (what they had in flight still gets its answer first)."""
        closers, self._closers = self._closers, {}
        for close in closers.values():
            close(error)
