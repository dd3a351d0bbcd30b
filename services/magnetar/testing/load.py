"""Offered load for tests and benchmarks: a producer pushed at a fixed rate (or as fast as
it can), its confirmations counted by time (tests/integration/test_rate_limits.py,
bench/rate_limits.py)."""

from __future__ import annotations

import asyncio
import time

import magnetar.asyncio as mg

CLUMP_S = 0.005
"""Receipts this close together came in one clump (their callbacks run one by one)."""


class Pusher:
    """Offers ``rate`` msgs/s (or as fast as it can with rate 0) with blocking sends
    (``block_if_queue_full``) and counts the confirmations by time. Payloads are
    ``{name}-{n}``, n from 0, so a reader can check that every one arrived."""

    def __init__(self, producer: mg.Producer, name: str, rate: int = 0) -> None:
        self.producer, self.name, self.rate = producer, name, rate
        self.sent = 0
        self.confirmed: list[float] = []
        self.failed: list[BaseException] = []
        self.outstanding = 0  # futures are not kept: a million of them slowed every GC pass
        self._settled = asyncio.Event()

    def _done(self, fut: asyncio.Future[mg.MessageId]) -> None:
        self.outstanding -= 1
        if not self.outstanding:
            self._settled.set()
        if fut.cancelled() or fut.exception() is not None:
            self.failed.append(fut.exception() or asyncio.CancelledError())
        else:
            self.confirmed.append(time.monotonic())

    async def run(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        step = 0.01
        while (now := loop.time()) - start < seconds:
            burst = int(self.rate * step) if self.rate else 100
            for _ in range(burst):
                fut = await self.producer.enqueue(f"{self.name}-{self.sent}".encode())
                fut.add_done_callback(self._done)
                self.outstanding += 1
                self.sent += 1
            if self.rate:
                await asyncio.sleep(max(0.0, now + step - loop.time()))
            else:
                await asyncio.sleep(0)

    def rate_between(self, start: float, end: float) -> float:
        """Confirmations a second between the first and the last one in [start, end).
        Receipts come in clumps (a paused producer's batches go in together), so
        counting from one clump to another avoids an error of one clump."""
        inside = [t for t in self.confirmed if start <= t < end]
        if len(inside) < 2 or inside[-1] - inside[0] < CLUMP_S:
            return 0.0
        return sum(1 for t in inside if t > inside[0] + CLUMP_S) / (inside[-1] - inside[0])

    def slices(self, start: float, end: float, width: float = 0.5) -> list[float]:
        """The rate in each whole ``width`` slice of [start, end)."""
        count = int((end - start) / width)
        return [self.rate_between(start + i * width, start + (i + 1) * width) for i in range(count)]

    async def settle(self) -> None:
        """Wait until every send was confirmed or failed."""
        await self.producer.flush()
        while self.outstanding:
            self._settled.clear()
            await self._settled.wait()
