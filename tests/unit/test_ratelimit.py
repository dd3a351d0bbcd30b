"""The token buckets behind publishRate and dispatchRate, on a fake clock."""

from __future__ import annotations

import math

import pytest
from test_session_lease import Clock as FakeClock

from magnetar.broker.ratelimit import RateLimiter, TokenBucket, limiter_for


def test_bucket_starts_full_and_refills_at_its_rate_up_to_capacity() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=10, capacity=20, clock=clock)
    assert bucket.tokens == 20
    bucket.consume(20)
    assert bucket.tokens == 0
    clock.now += 0.5
    assert bucket.tokens == pytest.approx(5)
    clock.now += 60
    assert bucket.tokens == 20  # capped


def test_bucket_goes_into_debt_and_wait_pays_it_back() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=100, capacity=100, clock=clock)
    bucket.consume(350)  # one big batch is let through whole
    assert bucket.tokens == -250
    assert bucket.wait_s() == pytest.approx(2.51)
    clock.now += 2.5
    assert bucket.wait_s() == pytest.approx(0.01)
    clock.now += 0.01
    assert bucket.wait_s() == 0


def test_bucket_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        TokenBucket(0, 10)
    with pytest.raises(ValueError):
        RateLimiter(10, 0, period_s=0)


def test_long_run_average_is_the_rate() -> None:
    """A sender that sends whenever wait_s() is 0, in batches of 37, gets 1,000/s."""
    clock = FakeClock()
    limiter = RateLimiter(msg_rate=1000, byte_rate=-1, clock=clock)
    start, sent = clock.now, 0
    while clock.now - start < 10:
        wait = limiter.wait_s()
        if wait:
            clock.now += wait
            continue
        limiter.consume(37, 37 * 100)
        sent += 37
    # the first second's full bucket (1,000) is the only excess
    assert sent == pytest.approx(10 * 1000 + 1000, rel=0.01)


def test_limiter_waits_for_the_slower_bucket() -> None:
    clock = FakeClock()
    limiter = RateLimiter(msg_rate=1000, byte_rate=10_000, clock=clock)
    limiter.consume(10, 20_000)  # bytes: 10,000 in debt; messages: fine
    assert limiter.msg_wait_s() == 0
    assert limiter.byte_wait_s() == pytest.approx(1.0001)
    assert limiter.wait_s() == limiter.byte_wait_s()
    assert limiter.messages_available() == 990


def test_rate_period_spreads_the_limit() -> None:
    clock = FakeClock()
    limiter = RateLimiter(msg_rate=100, byte_rate=0, period_s=10, clock=clock)  # 10 msgs/s, burst 100
    assert limiter.messages_available() == 100
    limiter.consume(100, 0)
    clock.now += 1
    assert limiter.messages_available() == 10
    assert limiter.bytes is None and limiter.byte_wait_s() == 0


def test_no_limit_and_reuse() -> None:
    clock = FakeClock()
    assert limiter_for(-1, -1) is None
    assert limiter_for(0, 0) is None
    first = limiter_for(100, -1, clock=clock)
    assert first is not None and first.messages_available() == 100
    assert math.isinf(RateLimiter(0, 5, clock=clock).messages_available())
    first.consume(100, 0)
    assert limiter_for(100, -1, current=first, clock=clock) is first  # the same policy keeps its debt
    other = limiter_for(200, -1, current=first, clock=clock)
    assert other is not first and other is not None and other.messages_available() == 200
