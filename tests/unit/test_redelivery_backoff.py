"""Negative-ack redelivery backoff: the arithmetic of pulsar-client's (Java)
MultiplierRedeliveryBackoff, its input checks, and the delay a nacked message gets."""

from __future__ import annotations

import time

import pytest

import magnetar
from magnetar.client.options import ConsumerConfig
from magnetar.client.redelivery_backoff import MultiplierRedeliveryBackoff, check_backoff
from magnetar.common.errors import InvalidConfiguration


def test_defaults_are_the_java_builders():
    b = MultiplierRedeliveryBackoff()
    assert (b.min_delay_ms, b.max_delay_ms, b.multiplier) == (10_000, 600_000, 2.0)
    assert magnetar.MultiplierRedeliveryBackoff is MultiplierRedeliveryBackoff


@pytest.mark.parametrize(("count", "delay"), [
    (-1, 100), (0, 100), (1, 200), (2, 400), (3, 800), (4, 1000), (5, 1000), (10_000, 1000), (2**31 - 1, 1000),
])
def test_delay_is_min_times_multiplier_to_the_redelivery_count_capped_at_max(count: int, delay: int):
    assert MultiplierRedeliveryBackoff(100, 1000, 2.0).next(count) == delay


def test_a_fractional_multiplier_truncates_as_java_casts_to_long():
    b = MultiplierRedeliveryBackoff(1000, 60_000, 1.5)
    assert [b.next(n) for n in range(6)] == [1000, 1500, 2250, 3375, 5062, 7593]


def test_a_zero_min_delay_redelivers_at_once():
    assert [MultiplierRedeliveryBackoff(0, 1000, 3.0).next(n) for n in (0, 1, 5)] == [0, 0, 0]


@pytest.mark.parametrize("kwargs", [
    {"min_delay_ms": -1}, {"min_delay_ms": 2000, "max_delay_ms": 1000}, {"multiplier": 1.0},
    {"multiplier": 0.5}, {"multiplier": float("nan")}, {"multiplier": "2"}, {"min_delay_ms": 1.5},
    {"max_delay_ms": True},
])
def test_bad_settings_are_refused(kwargs: dict):
    with pytest.raises(InvalidConfiguration):
        MultiplierRedeliveryBackoff(**kwargs)


def test_check_backoff():
    b = MultiplierRedeliveryBackoff()
    assert check_backoff(b) is b and check_backoff(None) is None
    with pytest.raises(InvalidConfiguration, match="MultiplierRedeliveryBackoff"):
        check_backoff(1000)


class _Acks:
    def forget_unacked(self, pos: object) -> None:
        pass


class _Waker:
    def set(self) -> None:
        pass


def _nack_delay_s(conf: ConsumerConfig, redelivery_count: int) -> float:
    """When PartitionConsumer.nack schedules the message (its own code, no network)."""
    from magnetar.client.partition_consumer import PartitionConsumer
    from magnetar.common.message_id import MessageId

    pc = PartitionConsumer.__new__(PartitionConsumer)
    pc.conf, pc.acks, pc._nack_due, pc._wakeup = conf, _Acks(), {}, _Waker()
    pc._writer, pc._closed = None, False  # never connected: nothing to arm
    before = time.monotonic()
    pc.nack(MessageId(-1, 7, 3), redelivery_count)
    (due,) = pc._nack_due.values()
    return due - before


def test_nack_waits_the_backoffs_delay_for_the_messages_redelivery_count():
    conf = ConsumerConfig(
        subscription_name="s", negative_ack_redelivery_delay_ms=60_000,
        negative_ack_redelivery_backoff=MultiplierRedeliveryBackoff(1000, 50_000, 3.0),
    )
    for count, delay_s in ((0, 1.0), (2, 9.0), (5, 50.0)):
        assert _nack_delay_s(conf, count) == pytest.approx(delay_s, abs=0.5)
    # Without a backoff: the fixed delay, whatever the count.
    assert _nack_delay_s(ConsumerConfig(subscription_name="s", negative_ack_redelivery_delay_ms=3000), 4) == pytest.approx(3.0, abs=0.5)
