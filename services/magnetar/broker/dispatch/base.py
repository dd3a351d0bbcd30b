"""What every dispatcher shares: the loop, reading new entries, the replay set.

A dispatcher hands a subscription's messages to its consumers. Each round it first
sends again what is waiting in the *replay set* (entries sent back by a nack, an ack
timeout or a departed consumer, and in Key_Shared messages held for their key), in
position order, and then reads new entries from the cursor's read position. Which
consumer gets which message is the subclass's :meth:`route`.

Redelivery counts are stored before anything is sent again: when the cursor has
unstored counts, the round writes them first (``ManagedCursor.persist_counts``).

Under a dispatch rate limit (``DispatchContext.dispatch_limiter``, the namespace's
``dispatchRate``) a round reads at most as many entries as the message bucket has
tokens, and a round that finds the bucket empty waits for it (a timer wakes the loop)
instead of reading; what goes out is counted by ``count_out``. Nothing is dropped: the
messages wait in the topic.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from magnetar.broker.consumer import BrokerConsumer, Delivery
from magnetar.broker.dispatch.delayed import DelayedIndex, effective_deliver_at
from magnetar.broker.entry import Entry, view_entry
from magnetar.common import masks
from magnetar.common.lightevent import LightEvent
from magnetar.managedledger.position import Position

if TYPE_CHECKING:
    from magnetar.broker.ratelimit import RateLimiter


class EntrySource(Protocol):
    """The entries a dispatcher reads (the topic's managed ledger)."""

    async def read_entries(self, position: Position, max_entries: int, max_bytes: int) -> list[tuple[Position, bytes]]: ...

    def next_position(self, position: Position) -> Position: ...

    def contains(self, position: Position) -> bool: ...


class DispatchSettings(Protocol):
    """The broker settings a dispatcher uses."""

    @property
    def dispatch_max_entries(self) -> int: ...

    @property
    def delayed_bucket_s(self) -> float: ...

    @property
    def delayed_spill_dir(self) -> str: ...

    @property
    def delayed_inline_max_bytes(self) -> int: ...


class DispatchContext(Protocol):
    """What a dispatcher needs of its subscription, and nothing more (the subscription is
    one; a test or another door can hand it any other)."""

    @property
    def name(self) -> str: ...

    @property
    def topic_name(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def consumers(self) -> list[BrokerConsumer]: ...

    @property
    def cursor(self) -> Any: ...

    @property
    def entries(self) -> EntrySource: ...

    @property
    def settings(self) -> DispatchSettings: ...

    @property
    def delayed_delivery(self) -> bool:
        """False: delayed messages go out at once (the namespace's policy)."""

    @property
    def dispatch_limiter(self) -> RateLimiter | None:
        """The dispatch rate limit (None: none); ``count_out`` takes its tokens."""

    def count_out(self, messages: int, size: int = 0) -> None:
        """``messages`` (in entries of ``size`` bytes) went out to consumers (stats, and
        the dispatch rate limit's tokens)."""

    @property
    def terminated_position(self) -> Position | None:
        """The topic's last entry when it was terminated (None: it is not)."""

    def divert(self, position: Position, batch: Entry, n: int, mask: int) -> bool:
        """True when the messages go to the dead letter topic instead (past
        max_redeliver_count); the subscription moves them."""

    def send_back(self, consumer: BrokerConsumer, positions: Iterable[Position] | None, *, failed: bool = True) -> None:
        """What ``consumer`` holds of ``positions`` (None: all) is delivered again; counted
        as a redelivery only when ``failed``."""


log = logging.getLogger(__name__)

MAX_READ_BYTES = 4 * 1024 * 1024


class Dispatcher:
    #: Stop at an entry no consumer can take (keeps order); Key_Shared moves on instead.
    stop_on_undeliverable = True
    #: Hold delayed messages until their time (Shared, Key_Shared); else deliver at once.
    delays_messages = False
    #: Deliver due messages from the timer, not only from a dispatch round (Shared: it has
    #: no per-key order to keep).
    delivers_due_at_once = False

    def __init__(self, subscription: DispatchContext) -> None:
        self.sub = subscription
        self.replay: dict[Position, int] = {}
        """Messages to send again: position -> mask."""
        self.epoch = 0
        """Bumped by :meth:`reset`; a read that started before it is dropped."""
        self._out: dict[BrokerConsumer, list[Delivery]] = {}
        self._wakeup = LightEvent()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        config = subscription.settings
        self.delayed = DelayedIndex(
            bucket_ms=int(config.delayed_bucket_s * 1000),
            spill_dir=config.delayed_spill_dir or None,
            inline_max_bytes=config.delayed_inline_max_bytes,
        )
        self._replay_data: dict[Position, bytes] = {}
        """Data of replay entries known without a read (delayed entries that came due)."""
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0.0
        self.throttled_s = 0.0
        """Time spent waiting for the dispatch rate limit with work to do (stats)."""
        self.throttled_msg_events = 0
        self.throttled_byte_events = 0
        self._throttled_since: float | None = None
        self._throttle_timer: asyncio.TimerHandle | None = None
        self.compacted_out: Callable[[Position], int] | None = None
        """Set on a subscription reading the compacted view: the messages of an entry the
        view left out, sent as skipped (see :mod:`magnetar.broker.compaction.reader`)."""

    # -- hooks for subclasses -----------------------------------------------------------
    def route(self, position: Position, data: bytes, batch: Entry, n: int, mask: int, from_replay: bool) -> int:
        """Deliver ``mask``'s messages of the entry (with :meth:`deliver`); return the
        mask of those no consumer could take now."""
        raise NotImplementedError

    def consumers_changed(self) -> None:
        """A consumer joined or left (the subscription already sent back what a departed
        one held)."""

    def released(self, consumer: BrokerConsumer, position: Position, mask: int) -> None:
        """``consumer`` no longer holds ``mask`` of ``position`` (acked or sent back)."""

    def entry_size(self, position: Position) -> int:
        """Messages in a live entry, when known (0: unknown)."""
        return 0

    def may_read_new(self) -> bool:
        """Whether new entries may be read this round (replay first, by default)."""
        return not self.replay

    def _replay_removed(self, position: Position, mask: int) -> None:
        """``mask`` of ``position`` left the replay set."""

    def _replay_added(self, position: Position, mask: int) -> None:
        """``mask`` of ``position`` entered the replay set."""

    # -- control ---------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None and not self._closed:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"dispatch-{self.sub.name}")

    def wake(self) -> None:
        self._wakeup.set()

    def add_replay(self, held: dict[Position, int]) -> None:
        """Send these messages again (before new ones)."""
        for position, mask in held.items():
            old = self.replay.get(position, 0)
            new = mask & ~old
            if new:
                self.replay[position] = old | new
                self._replay_added(position, new)
        if held:
            self.wake()

    def reset(self) -> None:
        """Forget the replay set and any read in flight (the cursor moved)."""
        self.epoch += 1
        for position, mask in list(self.replay.items()):
            self._replay_removed(position, mask)
        self.replay.clear()
        self._replay_data.clear()
        self._out.clear()
        self.delayed.clear()  # found again when the entries are read again
        self._cancel_timer()
        self.wake()

    def _drop_replay(self, position: Position, mask: int = -1) -> None:
        old = self.replay.get(position)
        if old is None:
            return
        gone = old & mask
        if old & ~mask:
            self.replay[position] = old & ~mask
        else:
            del self.replay[position]
            self._replay_data.pop(position, None)
        if gone:
            self._replay_removed(position, gone)

    # -- delivering --------------------------------------------------------------------
    def deliver(self, consumer: BrokerConsumer, position: Position, data: bytes, n: int, mask: int) -> None:
        """Queue ``mask``'s messages of the entry for ``consumer`` (sent at the end of the step)."""
        consumer.hold(position, mask, len(data))
        delivery = Delivery(position, data, self.sub.cursor.delivery_count(position), masks.full_mask(n) & ~mask, n)
        self._out.setdefault(consumer, []).append(delivery)
        self.sub.count_out(masks.count(mask), len(data))

    def _flush(self) -> None:
        out, self._out = self._out, {}
        for consumer, deliveries in out.items():
            if not consumer.closed:
                consumer.sink(deliveries)

    # -- the loop ----------------------------------------------------------------------
    async def _run(self) -> None:
        while not self._closed:
            self._wakeup.clear()
            try:
                progressed = await self._round()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("subscription %s on %s: dispatch failed; retrying", self.sub.name, self.sub.topic_name)
                self._out.clear()
                await asyncio.sleep(0.5)
                continue
            if not progressed:
                await self._wakeup.wait()

    def _any_available(self) -> bool:
        return any(c.available for c in self.sub.consumers)

    # -- delayed messages ------------------------------------------------------------
    def _due_ms(self, batch: Entry) -> int:
        """When a delayed entry may go out (0: now). Delayed messages are never batched;
        an entry of several messages goes out at once."""
        if not self.delays_messages or len(batch.messages) != 1 or not self.sub.delayed_delivery:
            return 0
        return effective_deliver_at(batch.messages[0].deliver_at_ms, batch.publish_time_ms)

    async def _release_due(self) -> None:
        await self.delayed.refill()
        self._hand_out_due(self.delayed.pop_due_entries(), at_once=False)
        self._schedule_delayed()

    def _hand_out_due(self, due: list[tuple[Position, bytes | None]], at_once: bool) -> None:
        """Due entries go to the replay set; with ``at_once`` those whose data is known go
        straight to a consumer with permits (no wait for the round in progress)."""
        held = {}
        for position, data in due:
            if at_once and data is not None and self._any_available():
                batch, n = self._message_count(position, data)
                mask = self._unacked_mask(position, n)
                if mask and self.sub.divert(position, batch, n, mask):
                    continue  # past max_redeliver_count: to the dead letter topic
                left = self.route(position, data, batch, n, mask, False) if mask else 0
                if not left:
                    continue
                held[position] = left
            else:
                held[position] = 1
            if data is not None:
                self._replay_data[position] = data
        if at_once:
            self._flush()
        if held:
            self.add_replay(held)

    def _schedule_delayed(self) -> None:
        wakeup = self.delayed.next_wakeup_ms()
        if wakeup is not None:
            self._schedule(wakeup)

    def _schedule(self, due_ms: float) -> None:
        if self._timer is not None and self._timer_due <= due_ms:
            return
        self._cancel_timer()
        delay_s = max(0.0, (due_ms - self.delayed.clock_ms()) / 1000)
        self._timer_due = due_ms
        self._timer = asyncio.get_running_loop().call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self.delivers_due_at_once and not self._closed and not self.sub.cursor.counts_dirty:
            # A round may be waiting for a read (of new entries, of a spilled bucket):
            # due entries with their data do not wait for it. (Redelivery counts not yet
            # stored: the round stores them first.)
            self._hand_out_due(self.delayed.pop_due_entries(), at_once=True)
            self._schedule_delayed()
        self.wake()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _round(self) -> bool:
        if self._throttled_since is not None:  # the wait of the previous round is over
            self.throttled_s += asyncio.get_running_loop().time() - self._throttled_since
            self._throttled_since = None
        if self.delayed:
            await self._release_due()
        self._tell_end_of_topic()
        if not self._any_available() or self._throttled():
            return False
        progressed = False
        if self.sub.cursor.counts_dirty:
            # Counts are stored before anything goes out again (a subscription whose
            # consumers all left re-reads from the cursor, not from the replay set).
            await self.sub.cursor.persist_counts()
        if self.replay:
            progressed = await self._dispatch_replay()
        if self.may_read_new() and self._any_available() and self.sub.cursor.has_more_entries():
            progressed = await self._dispatch_new() or progressed
        return progressed

    def _tell_end_of_topic(self) -> None:
        """On a terminated topic, tell each consumer not told yet that it reached the end,
        once the subscription has read every entry and holds none to send again."""
        if self.sub.terminated_position is None or self.replay or self.delayed or self.sub.cursor.has_more_entries():
            return
        for c in self.sub.consumers:
            if not c.told_end_of_topic and not c.closed:
                c.told_end_of_topic = True
                if c.on_end_of_topic is not None:
                    c.on_end_of_topic()

    # -- dispatch rate limit ----------------------------------------------------------
    def _throttled(self) -> bool:
        """True (and a wake-up set for when tokens are back) when the rate limit stops
        this round while there is something to send."""
        loop = asyncio.get_running_loop()
        limiter = self.sub.dispatch_limiter
        if limiter is None:
            return False
        wait = limiter.wait_s()
        if wait <= 0 or not (self.replay or self.sub.cursor.has_more_entries()):
            return False
        self.throttled_msg_events += limiter.msg_wait_s() > 0
        self.throttled_byte_events += limiter.byte_wait_s() > 0
        self._throttled_since = loop.time()
        if self._throttle_timer is not None:
            self._throttle_timer.cancel()
        self._throttle_timer = loop.call_later(min(wait, 1.0), self.wake)  # re-checked: the policy may change
        return True

    def _read_limit(self) -> int:
        """Entries one read may take: the broker's maximum, fewer when the rate limit's
        message bucket holds fewer tokens (an entry is at least one message)."""
        limit = self.sub.settings.dispatch_max_entries
        limiter = self.sub.dispatch_limiter
        if limiter is None:
            return limit
        return int(max(1, min(limit, limiter.messages_available())))

    def _message_count(self, position: Position, data: bytes) -> tuple[Entry, int]:
        # An entry that does not decode (stored before the broker checked what producers
        # send) goes out as one opaque message instead of stopping the subscription's
        # dispatch for good.
        batch = view_entry(data)
        return batch, len(batch.messages)

    def _unacked_mask(self, position: Position, n: int) -> int:
        cursor = self.sub.cursor
        if cursor.is_acked(position):
            return 0
        mask = masks.full_mask(n) & ~cursor.acked_mask(position)
        if self.compacted_out is not None:
            mask &= ~self.compacted_out(position)  # left out of the compacted view: skipped
        return mask

    async def _dispatch_new(self) -> bool:
        cursor = self.sub.cursor
        ml = self.sub.entries
        epoch = self.epoch
        start = cursor.read_position
        entries = await ml.read_entries(start, self._read_limit(), MAX_READ_BYTES)
        if epoch != self.epoch or cursor.read_position != start:
            return True  # the cursor moved while reading: start over
        moved = False
        for position, data in entries:
            batch, n = self._message_count(position, data)
            mask = self._unacked_mask(position, n)
            due = self._due_ms(batch) if mask else 0
            if mask and self.sub.divert(position, batch, n, mask):
                pass  # past max_redeliver_count: to the dead letter topic
            elif due and due > self.delayed.clock_ms():
                self.delayed.add(position, due, data)  # handed back by _release_due when due
            elif mask:
                left = self.route(position, data, batch, n, mask, False)
                if left == mask and self.stop_on_undeliverable:
                    break
                if left:
                    self.add_replay({position: left})
            cursor.read_position = ml.next_position(position)
            moved = True
        if self.delayed:
            self._schedule_delayed()
        self._flush()
        return moved

    async def _dispatch_replay(self) -> bool:
        ml = self.sub.entries
        epoch = self.epoch
        limit = self._read_limit()
        wanted = sorted(self.replay) if len(self.replay) <= limit else heapq.nsmallest(limit, self.replay)
        progressed = False
        for run in _runs(wanted):
            entries = self._known_entries(run)
            if entries is None:
                entries = await ml.read_entries(run[0], len(run), MAX_READ_BYTES)
                if epoch != self.epoch:
                    return True
            got = {p for p, _ in entries}
            for p in run:
                if p not in got and not ml.contains(p):
                    self._drop_replay(p)  # trimmed away
            stop = False
            for position, data in entries:
                want = self.replay.get(position)
                if want is None:
                    continue
                batch, n = self._message_count(position, data)
                mask = want & self._unacked_mask(position, n)
                if mask != want:
                    self._drop_replay(position, want & ~mask)  # acked meanwhile
                if not mask or self.sub.divert(position, batch, n, mask):
                    self._drop_replay(position, mask)
                    progressed = True
                    continue
                left = self.route(position, data, batch, n, mask, True)
                if left != mask:
                    progressed = True
                    self._drop_replay(position, mask & ~left)
                if left == mask and self.stop_on_undeliverable:
                    stop = True
                    break
            self._flush()
            if stop or not self._any_available():
                break
        return progressed

    def _known_entries(self, run: list[Position]) -> list[tuple[Position, bytes]] | None:
        """The run's entries when all their data is known (no read needed)."""
        known = self._replay_data
        if not known:
            return None
        out = []
        for p in run:
            data = known.get(p)
            if data is None:
                return None
            out.append((p, data))
        return out

    def stop(self) -> None:
        """Stop at once (a replaced dispatcher must not touch the shared cursor again)."""
        self._closed = True
        self._cancel_timer()
        if self._throttle_timer is not None:
            self._throttle_timer.cancel()
        self.delayed.close()  # deletes the spill files
        if self._task is not None:
            self._task.cancel()

    async def close(self) -> None:
        self.stop()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


def _runs(positions: list[Position]) -> list[list[Position]]:
    """Sorted positions grouped into runs of consecutive entries of one ledger."""
    runs: list[list[Position]] = []
    for p in positions:
        if runs and runs[-1][-1][0] == p[0] and runs[-1][-1][1] + 1 == p[1]:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs
