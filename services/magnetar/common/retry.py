"""One retry policy: how often, how long apart and for how long to try something again.

Shaped like kazoo's ``KazooRetry``: an immutable :class:`RetryPolicy` (tries, first
delay, multiplier, cap, jitter, deadline) and three ways to use it:

* :meth:`RetryPolicy.run` calls an async function again while it raises a retriable
  error, and raises the last error when the policy gives up;
* :meth:`RetryPolicy.attempts` is an ``async for`` loop of tries, for compare-and-set
  loops whose body decides itself what is worth another try (``continue``) and what
  ends the loop (``return`` / ``raise``), and which raise their own error after it;
* :class:`Backoff` is the per-attempt state (next delay, tries so far, deadline) for
  loops that keep their own state, such as the client's reconnect loop.

Delays grow ``delay_s``, ``delay_s * multiplier``, … up to ``max_delay_s``; each is then
scaled by a random factor in ``[1 - jitter, 1]`` so that contending callers do not retry
in lockstep (``jitter=1`` is "full jitter": anywhere between 0 and the delay). A delay
of 0 does not sleep (not even ``sleep(0)``). The clock, the sleep and the random source
are fields, so tests pass fakes and never sleep.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")
RetryOn = type[BaseException] | tuple[type[BaseException], ...] | Callable[[BaseException], bool]


@dataclass(frozen=True)
class RetryPolicy:
    """When to try again, and how long to wait first.

    Attributes:
        max_tries: tries in all, the first included; None for no limit.
        delay_s: the wait before the second try.
        multiplier: each further wait is the previous one times this.
        max_delay_s: no wait is longer than this.
        jitter: fraction of each wait that is random: a wait ``d`` becomes a uniform
            value in ``[d * (1 - jitter), d]``.
        deadline_s: give up when the next try would start later than this many seconds
            after the first one; None for no deadline.
        clock: monotonic seconds.
        sleep: async sleep (used by :meth:`run` and :meth:`attempts`).
        uniform: ``uniform(a, b)``, a random float in ``[a, b]``.
    """

    max_tries: int | None = None
    delay_s: float = 0.1
    multiplier: float = 2.0
    max_delay_s: float = 5.0
    jitter: float = 0.0
    deadline_s: float | None = None
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)
    sleep: Callable[[float], Awaitable[object]] = field(default=asyncio.sleep, repr=False, compare=False)
    uniform: Callable[[float, float], float] = field(default=random.uniform, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_tries is not None and self.max_tries < 1:
            raise ValueError(f"max_tries is at least 1 (or None), not {self.max_tries}")
        if self.delay_s < 0 or self.max_delay_s < 0:
            raise ValueError("delays are not negative")
        if self.multiplier < 1:
            raise ValueError(f"the multiplier is at least 1, not {self.multiplier}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter is a fraction in [0, 1], not {self.jitter}")
        if self.deadline_s is not None and self.deadline_s <= 0:
            raise ValueError(f"the deadline is positive (or None), not {self.deadline_s}")

    def backoff(self) -> Backoff:
        """A fresh per-attempt state; its deadline (if any) starts now."""
        return Backoff(self)

    def attempts(self) -> Attempts:
        """Tries as an ``async for`` loop: the body runs once per try, numbered from 0.

        The first try starts at once; each further one after the policy's wait. The loop
        ends (without an error) when the tries are used up or the deadline would pass,
        so code after the loop is the "gave up" case::

            async for _ in policy.attempts():
                try:
                    return await write()
                except Conflict:
                    continue
            raise GaveUp(...)
        """
        return Attempts(self.backoff(), self.sleep)

    async def run(
        self,
        fn: Callable[[], Awaitable[T]],
        *,
        retry_on: RetryOn,
        on_retry: Callable[[Exception, float], object] | None = None,
    ) -> T:
        """Call ``fn`` until it returns, retrying the errors ``retry_on`` accepts.

        Args:
            fn: the call to make (again).
            retry_on: the exception class(es) worth another try, or a predicate on the
                exception.
            on_retry: called with the error and the wait before each retry (to log it).

        Returns:
            What ``fn`` returned.

        Raises:
            Exception: the first error that ``retry_on`` rejects, or the last error when
                the tries are used up or the deadline would pass.
        """
        backoff = self.backoff()
        while True:
            try:
                return await fn()
            except Exception as exc:
                if not _accepts(retry_on, exc):
                    raise
                delay = backoff.failed()
                if delay is None:
                    raise
                if on_retry is not None:
                    on_retry(exc, delay)
                if delay > 0:
                    await self.sleep(delay)


def _accepts(retry_on: RetryOn, exc: BaseException) -> bool:
    if isinstance(retry_on, type | tuple):
        return isinstance(exc, retry_on)
    return retry_on(exc)


class Backoff:
    """The state of one retry loop under a policy: the next wait, tries, deadline."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.reset()

    def reset(self) -> None:
        """Start over: first wait again, no tries counted, the deadline from now."""
        self.tries = 1  # the try that is running (or just failed)
        self._next = min(self.policy.delay_s, self.policy.max_delay_s)
        self._deadline = None if self.policy.deadline_s is None else self.policy.clock() + self.policy.deadline_s

    def next(self) -> float:
        """The next wait (jittered), ignoring the try limit and the deadline."""
        p = self.policy
        delay = self._next
        self._next = min(p.max_delay_s, self._next * p.multiplier)
        if p.jitter and delay:
            delay *= p.uniform(1.0 - p.jitter, 1.0)
        return delay

    def failed(self) -> float | None:
        """Record that the current try failed.

        Returns:
            The wait before the next try, or None when the policy gives up: the tries
            are used up, or the next try would start after the deadline.
        """
        delay = self.next()
        if self.policy.max_tries is not None and self.tries >= self.policy.max_tries:
            return None
        if self._deadline is not None and self.policy.clock() + delay > self._deadline:
            return None
        self.tries += 1
        return delay


class Attempts:
    """The ``async for`` iterator of :meth:`RetryPolicy.attempts`."""

    def __init__(self, backoff: Backoff, sleep: Callable[[float], Awaitable[object]]) -> None:
        self._backoff = backoff
        self._sleep = sleep
        self._started = False

    @property
    def tries(self) -> int:
        """Tries started so far."""
        return self._backoff.tries if self._started else 0

    def __aiter__(self) -> Attempts:
        return self

    async def __anext__(self) -> int:
        # Asked for another try only when the body neither returned nor raised: the
        # current try failed.
        if self._started:
            delay = self._backoff.failed()
            if delay is None:
                raise StopAsyncIteration
            if delay > 0:
                await self._sleep(delay)
        self._started = True
        return self._backoff.tries - 1
