"""RetryPolicy, Backoff and the attempts loop under a fake clock: nothing sleeps."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from magnetar.common.errors import InvalidArgument, NotOwner, Timeout
from magnetar.common.retry import RetryPolicy


class FakeTime:
    """A clock that only moves when something sleeps; records every sleep."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def policy(t: FakeTime, **kw: object) -> RetryPolicy:
    return RetryPolicy(clock=t.clock, sleep=t.sleep, **kw)  # type: ignore[arg-type]


class Flaky:
    """Raises the given errors in turn, then returns "ok"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


async def test_run_retries_until_success_with_growing_capped_delays() -> None:
    t = FakeTime()
    fn = Flaky(*[Timeout(str(i)) for i in range(6)])
    got = await policy(t, delay_s=0.1, multiplier=2.0, max_delay_s=1.0).run(fn, retry_on=Timeout)
    assert got == "ok" and fn.calls == 7
    assert t.slept == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


async def test_run_gives_up_after_max_tries_raising_the_last_error() -> None:
    t = FakeTime()
    errors = [Timeout("first"), Timeout("second"), Timeout("third"), Timeout("unused")]
    fn = Flaky(*errors)
    with pytest.raises(Timeout) as info:
        await policy(t, max_tries=3, delay_s=0.5).run(fn, retry_on=Timeout)
    assert info.value is errors[2] and fn.calls == 3
    assert t.slept == [0.5, 1.0]  # no wait after the last try


async def test_run_passes_non_retriable_errors_through_at_once() -> None:
    t = FakeTime()
    fn = Flaky(Timeout("retry me"), NotOwner("not me"))
    with pytest.raises(NotOwner, match="not me"):
        await policy(t, max_tries=10).run(fn, retry_on=Timeout)
    assert fn.calls == 2 and len(t.slept) == 1


async def test_run_accepts_a_tuple_or_a_predicate() -> None:
    t = FakeTime()
    assert await policy(t).run(Flaky(Timeout(), NotOwner()), retry_on=(Timeout, NotOwner)) == "ok"
    assert await policy(t).run(Flaky(NotOwner()), retry_on=lambda e: getattr(e, "retriable", False)) == "ok"
    with pytest.raises(InvalidArgument):  # not retriable by its flag
        await policy(t).run(Flaky(InvalidArgument()), retry_on=lambda e: getattr(e, "retriable", False))


async def test_run_reports_each_retry_with_its_wait() -> None:
    t = FakeTime()
    seen: list[tuple[str, float]] = []
    await policy(t, delay_s=0.25).run(
        Flaky(Timeout("a"), Timeout("b")), retry_on=Timeout, on_retry=lambda e, d: seen.append((str(e), d))
    )
    assert seen == [("a", 0.25), ("b", 0.5)]


async def test_deadline_stops_before_a_wait_that_would_pass_it() -> None:
    t = FakeTime()
    fn = Flaky(*[Timeout(str(i)) for i in range(100)])
    with pytest.raises(Timeout, match="^3$"):
        # Tries at 0, 1, 3, 7; the next would start at 15 > 10.
        await policy(t, delay_s=1.0, max_delay_s=100.0, deadline_s=10.0).run(fn, retry_on=Timeout)
    assert t.slept == [1.0, 2.0, 4.0] and fn.calls == 4


async def test_deadline_counts_time_spent_in_the_calls() -> None:
    t = FakeTime()

    async def slow() -> str:
        t.now += 4.0
        raise Timeout("slow")

    with pytest.raises(Timeout):
        await policy(t, delay_s=0.1, deadline_s=10.0).run(slow, retry_on=Timeout)
    assert len(t.slept) == 2  # tries fail at 4, 8.1 and 12.3 s: a fourth would be too late


def test_jitter_stays_within_its_fraction() -> None:
    rng = random.Random(5)
    p = RetryPolicy(delay_s=1.0, multiplier=1.0, max_delay_s=1.0, jitter=0.25, uniform=rng.uniform)
    b = p.backoff()
    delays = [b.next() for _ in range(2000)]
    assert all(0.75 <= d <= 1.0 for d in delays)
    assert min(delays) < 0.76 and max(delays) > 0.99  # the whole range is used


def test_full_jitter_is_anywhere_below_the_delay() -> None:
    rng = random.Random(9)
    b = RetryPolicy(delay_s=0.002, max_delay_s=0.1, jitter=1.0, uniform=rng.uniform).backoff()
    caps = [0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.1, 0.1]
    for cap in caps:
        assert 0.0 <= b.next() <= cap


def test_no_jitter_draws_nothing() -> None:
    def never(a: float, b: float) -> float:
        raise AssertionError("no random draw without jitter")

    b = RetryPolicy(delay_s=0.1, uniform=never).backoff()
    assert [b.next() for _ in range(3)] == pytest.approx([0.1, 0.2, 0.4])


def test_backoff_reset_and_failed() -> None:
    t = FakeTime()
    b = policy(t, max_tries=3, delay_s=1.0).backoff()
    assert b.failed() == 1.0 and b.failed() == 2.0 and b.failed() is None
    b.reset()
    assert b.tries == 1 and b.failed() == 1.0


async def test_attempts_loop_counts_tries_and_sleeps_between_them() -> None:
    t = FakeTime()
    attempts = policy(t, max_tries=4, delay_s=0.5, multiplier=3.0).attempts()
    seen = [n async for n in attempts]
    assert seen == [0, 1, 2, 3] and attempts.tries == 4
    assert t.slept == [0.5, 1.5, 4.5]


async def test_attempts_loop_ends_with_the_body() -> None:
    t = FakeTime()
    seen = []
    async for n in policy(t, max_tries=10).attempts():
        seen.append(n)
        if n == 2:
            break
    assert seen == [0, 1, 2] and len(t.slept) == 2


async def test_zero_delay_never_sleeps() -> None:
    t = FakeTime()
    seen = [n async for n in policy(t, max_tries=5, delay_s=0.0).attempts()]
    assert seen == [0, 1, 2, 3, 4] and t.slept == []
    with pytest.raises(Timeout):
        await policy(t, max_tries=3, delay_s=0.0).run(Flaky(*[Timeout()] * 3), retry_on=Timeout)
    assert t.slept == []


async def test_unlimited_tries_keep_going() -> None:
    t = FakeTime()
    fn = Flaky(*[Timeout() for _ in range(50)])
    assert await policy(t, delay_s=0.01, max_delay_s=0.02).run(fn, retry_on=Timeout) == "ok"
    assert fn.calls == 51


def test_replace_keeps_the_injected_clock() -> None:
    t = FakeTime()
    p = replace(policy(t, max_tries=2), deadline_s=5.0)
    assert p.clock == t.clock and p.max_tries == 2


@pytest.mark.parametrize(
    "kw",
    [{"max_tries": 0}, {"delay_s": -1.0}, {"multiplier": 0.5}, {"jitter": 1.5}, {"deadline_s": 0.0}],
)
def test_bad_policies_are_refused(kw: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kw)  # type: ignore[arg-type]
