"""Producer access modes of one topic and its topic epoch (Pulsar's ``ProducerAccessMode``,
PIP-68).

- ``Shared`` (the default): any number of producers; refused (ProducerBusy) while an
  exclusive producer holds the topic or one waits for it.
- ``Exclusive``: the only producer; refused (ProducerFenced) when any other is connected
  or waiting.
- ``WaitForExclusive``: waits in line until no other producer is connected, then holds
  the topic as ``Exclusive`` does.
- ``ExclusiveWithFencing``: takes the topic at once: every other producer is closed
  (ProducerFenced) and every waiting one refused.

Each time an exclusive producer takes the topic the *topic epoch* goes up by one and is
stored in the managed ledger's properties (``pulsar.topic.epoch``, as Pulsar's) before
the producer is told it, so it survives a broker hand-over. A producer reconnecting (after
its connection broke, or at a new owner) says the epoch it was given; one lower than the
topic's means another exclusive producer held the topic meanwhile: it is fenced out
(ProducerFenced) and stays so. A reconnecting exclusive producer whose epoch is the
topic's gets the topic back at the same epoch.

This module keeps the decisions; :class:`~magnetar.broker.producers.TopicProducers` (one
per topic, persistent or not) keeps the producers and calls it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from magnetar.common.access_mode import ProducerAccessMode
from magnetar.common.errors import MagnetarError, ProducerBusy, ProducerFenced

__all__ = ["EPOCH_PROPERTY", "ProducerAccess", "ProducerAccessMode", "parse_epoch"]

log = logging.getLogger(__name__)

EPOCH_PROPERTY = "pulsar.topic.epoch"
"""The managed ledger property holding the topic epoch (decimal)."""


def parse_epoch(text: str | None) -> int | None:
    """The stored epoch (None: none stored, or unreadable)."""
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        log.warning("the stored topic epoch %r is not a number; taken as none", text)
        return None
    return value if value >= 0 else None


@dataclass(eq=False)
class _Waiter:
    name: str
    epoch: int | None
    granted: asyncio.Future[int]


class ProducerAccess:
    """Who may produce on one topic: the exclusive holder, the line of WaitForExclusive
    producers, and the topic epoch."""

    def __init__(
        self, topic_name: str, epoch: int | None, store_epoch: Callable[[int], Awaitable[None]],
        spawn: Callable[[Coroutine[Any, Any, None]], object],
    ) -> None:  # fmt: skip
        """Args: epoch: the stored topic epoch (None: never held exclusively).
        store_epoch: stores a new epoch durably (raises when it cannot).
        spawn: runs a coroutine in a task its owner keeps (giving the topic to the next in line)."""
        self.topic_name = topic_name
        self._spawn = spawn
        self.epoch = epoch
        self.exclusive: str | None = None
        """The name of the producer holding the topic exclusively (None: none)."""
        self._store_epoch = store_epoch
        self._waiting: list[_Waiter] = []  # rarely anyone: a list is 56 bytes, a deque 760

    @property
    def waiting(self) -> int:
        """WaitForExclusive producers in line."""
        return len(self._waiting)

    async def acquire(
        self, name: str, mode: ProducerAccessMode, epoch: int | None, others: int,
        fence: Callable[[MagnetarError], None], on_queued: Callable[[], None] | None = None,
    ) -> int | None:  # fmt: skip
        """Admit producer ``name`` in ``mode`` (``epoch``: the one it was given before, on a
        reconnect; ``others``: producers connected now). Returns the topic epoch to tell it.

        ``fence(error)`` closes every other connected producer (ExclusiveWithFencing).
        ``on_queued()`` is called when a WaitForExclusive producer is put in line; the call
        then returns once it holds the topic (cancel it to leave the line).

        Raises:
            ProducerBusy: Shared while the topic is held exclusively or awaited.
            ProducerFenced: an exclusive mode the topic cannot give, or ``epoch`` older
                than the topic's.
        """
        if mode is ProducerAccessMode.Shared:
            return self.acquire_shared()
        if mode is ProducerAccessMode.Exclusive:
            if self.exclusive is not None or self._waiting:
                raise ProducerFenced(f"Topic has an existing exclusive producer: {self.exclusive or self._waiting[0].name}")
            if others:
                raise ProducerFenced("Topic has existing shared producers")
        elif mode is ProducerAccessMode.ExclusiveWithFencing:
            if self.exclusive is not None or others or self._waiting:
                waiting, self._waiting = self._waiting, []
                for w in waiting:
                    if not w.granted.done():
                        w.granted.set_exception(ProducerFenced("Fenced out"))
                self.exclusive = None
                fence(ProducerFenced(f"Fenced out of {self.topic_name} by the exclusive producer {name}"))
        elif self.exclusive is not None or others:  # WaitForExclusive
            waiter = _Waiter(name, epoch, asyncio.get_running_loop().create_future())
            self._waiting.append(waiter)
            if on_queued is not None:
                on_queued()
            try:
                return await asyncio.shield(waiter.granted)
            except asyncio.CancelledError:
                if waiter in self._waiting:
                    self._waiting.remove(waiter)
                elif not waiter.granted.done():
                    waiter.granted.cancel()  # being given the topic: the grant passes it on
                elif not waiter.granted.cancelled() and waiter.granted.exception() is None:
                    self.release(name)  # it got the topic as it left: the next one in line gets it
                raise
        self._check_epoch(epoch)
        self.exclusive = name
        try:
            return await self._take(epoch)
        except BaseException:
            if self.exclusive == name:
                self.exclusive = None
            raise

    def acquire_shared(self) -> int | None:
        """Admit a Shared producer; returns the topic epoch.

        Raises:
            ProducerBusy: the topic is held exclusively or awaited.
        """
        if self.exclusive is not None or self._waiting:
            raise ProducerBusy(f"Topic has an existing exclusive producer: {self.exclusive or self._waiting[0].name}")
        return self.epoch

    def _check_epoch(self, epoch: int | None) -> None:
        if epoch is not None and self.epoch is not None and epoch < self.epoch:
            raise ProducerFenced(f"Topic epoch has already moved. Current epoch: {self.epoch}, Producer epoch: {epoch}")

    async def _take(self, epoch: int | None) -> int:
        """Store the epoch of a new exclusive holder: its own on a reconnect, else one more."""
        new = epoch if epoch is not None else (-1 if self.epoch is None else self.epoch) + 1
        await self._store_epoch(new)
        self.epoch = new
        return new

    def release(self, name: str) -> None:
        """Producer ``name`` left. When it held the topic, the next in line is given it
        (in a spawned task: its epoch is stored first)."""
        if self.exclusive != name:
            return
        self.exclusive = None
        while self._waiting:
            waiter = self._waiting.pop(0)
            if waiter.granted.done():
                continue
            self.exclusive = waiter.name
            self._spawn(self._grant(waiter))
            return

    async def _grant(self, waiter: _Waiter) -> None:
        try:
            self._check_epoch(waiter.epoch)
            epoch = await self._take(waiter.epoch)
        except MagnetarError as exc:
            if self.exclusive == waiter.name:
                self.exclusive = None
            if not waiter.granted.done():
                waiter.granted.set_exception(exc)
            return
        if waiter.granted.done():  # it left meanwhile
            self.release(waiter.name)
            return
        waiter.granted.set_result(epoch)

    def refuse_waiting(self, error: MagnetarError) -> None:
        """The topic closes: every producer in line is refused with ``error``."""
        waiting, self._waiting = self._waiting, []
        for w in waiting:
            if not w.granted.done():
                w.granted.set_exception(error)
