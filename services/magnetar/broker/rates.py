"""Message and byte counters with their rates, as topic stats report them (Pulsar's
``msgRateIn``, ``msgThroughputOut`` …).

A :class:`Meter` only counts on the hot path; :class:`RateSampler` samples every meter of
the served topics every ``interval_s``, and a meter's rates are those of the last whole
interval (as Pulsar's are those of its last stats period). A meter created during an
interval counts from the interval's start.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

log = logging.getLogger(__name__)


class Meter:
    """Messages and bytes counted since creation; rates per second over the last interval."""

    __slots__ = ("messages", "bytes", "msg_rate", "byte_rate", "_at", "_messages", "_bytes")

    def __init__(self) -> None:
        self.messages = 0
        self.bytes = 0
        self.msg_rate = 0.0
        self.byte_rate = 0.0
        self._at: float | None = None
        self._messages = 0
        self._bytes = 0

    def add(self, messages: int, size: int) -> None:
        self.messages += messages
        self.bytes += size

    def sample(self, now: float, previous: float | None = None) -> None:
        """Take a sample at ``now`` (seconds, monotonic): the rates become those since
        this meter's previous sample; a meter not sampled yet counts from ``previous``
        (the sampler's previous round, before the meter existed) when given."""
        if self._at is None and previous is not None:
            self._at = previous
        if self._at is not None and now > self._at:
            elapsed = now - self._at
            self.msg_rate = (self.messages - self._messages) / elapsed
            self.byte_rate = (self.bytes - self._bytes) / elapsed
        self._at, self._messages, self._bytes = now, self.messages, self.bytes


class Metered(Protocol):
    def meters(self) -> Iterable[Meter]:
        """Every meter of the topic (its subscriptions', consumers' and producers' too)."""


class RateSampler:
    """Samples the meters of the served topics every ``interval_s`` (owned task)."""

    def __init__(
        self, topics: Mapping[str, Metered], interval_s: float, clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._topics = topics
        self.interval_s = interval_s
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._previous: float | None = None

    def sample_all(self) -> None:
        now = self._clock()
        for topic in list(self._topics.values()):
            for meter in topic.meters():
                meter.sample(now, self._previous)
        self._previous = now

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="rate-sampler")

    async def _run(self) -> None:
        while True:
            try:
                self.sample_all()
            except Exception:  # a bug in one meter must not stop the rates of every topic
                log.exception("sampling the topics' rates failed")
            await asyncio.sleep(self.interval_s)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
