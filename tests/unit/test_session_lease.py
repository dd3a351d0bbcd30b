"""The broker's session lease (broker/lease.py): how long ownership is sure, on a fake clock."""

from __future__ import annotations

import pytest

from magnetar.broker.lease import LEASE_FRACTION, SessionLease


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_not_valid_before_zookeeper_ever_answered() -> None:
    lease = SessionLease(5.0, Clock())
    assert not lease.valid()


def test_an_answer_is_trusted_from_its_sending_for_a_share_of_the_session_timeout() -> None:
    clock = Clock()
    lease = SessionLease(5.0, clock)
    sent = clock.now
    clock.now += 0.4  # the answer took 0.4 s: the session was alive when the request left
    lease.renewed(sent)
    assert lease.term_s == pytest.approx(5.0 * LEASE_FRACTION)
    assert lease.valid()
    assert lease.remaining_s() == pytest.approx(5.0 * LEASE_FRACTION - 0.4)
    clock.now = sent + lease.term_s - 0.001
    assert lease.valid()
    clock.now = sent + lease.term_s
    assert not lease.valid()  # well before ZooKeeper may expire the session (sent + 5 s)
    assert sent + lease.term_s < sent + 5.0


def test_a_late_answer_to_an_old_ping_never_shortens_the_lease() -> None:
    clock = Clock()
    lease = SessionLease(5.0, clock)
    lease.renewed(clock.now)
    lease.renewed(clock.now - 3.0)  # an old ping answered after a newer one
    assert lease.remaining_s() == pytest.approx(lease.term_s)


def test_a_stopped_process_finds_its_lease_gone_when_it_resumes() -> None:
    clock = Clock()
    lease = SessionLease(5.0, clock)
    lease.renewed(clock.now)
    clock.now += 9.0  # SIGSTOP for 9 s: nothing ran, not even the pings
    assert not lease.valid()
    assert lease.remaining_s() == pytest.approx(lease.term_s - 9.0)


def test_revoke_ends_the_lease_at_once_and_a_new_answer_starts_it_again() -> None:
    clock = Clock()
    lease = SessionLease(5.0, clock)
    lease.renewed(clock.now)
    lease.revoke()  # the session expired
    assert not lease.valid()
    clock.now += 1
    lease.renewed(clock.now)  # the new session answered
    assert lease.valid()


def test_pings_come_often_enough_to_renew_before_the_term_ends() -> None:
    lease = SessionLease(5.0, Clock())
    assert lease.ping_interval_s == pytest.approx(1.0)
    # Two pings may be lost (or slow) and the lease still holds.
    assert 3 * lease.ping_interval_s < lease.term_s
