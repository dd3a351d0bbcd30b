"""A burst of ZooKeeper requests is queued on the event loop, not pushed into kazoo at
once (whose wake-up socket would then block the loop: the broker lost its lease so, in
CI), and the lease's ping never waits behind it. A stand-in kazoo client counts what was
handed to it; everything else is ZkSession's own code."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from magnetar.metadata.session import MAX_IN_FLIGHT, ZkSession


class PendingResult:
    """A kazoo IAsyncResult answered when the test says so."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.exception: BaseException | None = None
        self._callbacks: list[Callable[[Any], None]] = []

    def successful(self) -> bool:
        return True

    def rawlink(self, callback: Callable[[Any], None]) -> None:
        self._callbacks.append(callback)

    def answer(self) -> None:
        for cb in self._callbacks:
            cb(self)


class CountingClient:
    """Hands out results that stay unanswered until :meth:`answer_all`."""

    def __init__(self) -> None:
        self.handed: list[tuple[str, PendingResult]] = []
        self.answered = 0

    @property
    def unanswered(self) -> list[tuple[str, PendingResult]]:
        return self.handed[self.answered:]

    def exists_async(self, path: str) -> PendingResult:
        result = PendingResult(None)
        self.handed.append((path, result))
        return result

    def answer_all(self) -> None:
        pending = self.unanswered
        self.answered = len(self.handed)
        for _, result in pending:
            result.answer()


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_burst_is_handed_to_kazoo_a_bounded_number_at_a_time_and_the_ping_goes_first() -> None:
    async def main() -> None:
        session = ZkSession("127.0.0.1:1", "/bounds")
        client = CountingClient()
        session._client = client  # type: ignore[assignment]  # the stand-in for kazoo
        burst = [asyncio.ensure_future(session.exists(f"/bounds/n{i}")) for i in range(3 * MAX_IN_FLIGHT + 5)]
        await _settle()
        assert len(client.unanswered) == MAX_IN_FLIGHT  # the rest wait on the event loop

        ping = asyncio.ensure_future(session.ping())
        await _settle()
        assert len(client.unanswered) == MAX_IN_FLIGHT + 1
        assert client.unanswered[-1][0] == "/bounds"  # the ping, not behind the burst

        peak = 0
        while not all(f.done() for f in burst):
            peak = max(peak, len(client.unanswered))
            client.answer_all()
            await _settle()
        assert ping.done() and peak <= MAX_IN_FLIGHT + 1
        assert [f.result() for f in burst] == [None] * len(burst)
        assert sorted(p for p, _ in client.handed if p != "/bounds") == sorted(
            f"/bounds/n{i}" for i in range(len(burst))
        )

    asyncio.run(main())
