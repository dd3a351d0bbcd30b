"""AckTracker: entry acks, batch-index masks, ack sets, cumulative acks, ack timeouts."""

from __future__ import annotations

from magnetar.client.acks import AckTracker, BatchAck, PendingAcks
from magnetar.common.masks import from_bytes as mask_of
from magnetar.common.message_id import MessageId


def _mid(entry: int, index: int = -1) -> MessageId:
    return MessageId(ledger_id=3, entry_id=entry, partition=-1, batch_index=index)


def _batches(t: AckTracker) -> list[tuple[tuple[int, int], int, bytes]]:
    return [(b.position, b.batch_size, b.ack_set()) for b in t.take().batches]


def test_mask_bytes_are_little_endian_bit_order():
    assert mask_of(b"") == 0
    assert mask_of(b"\x01") == 1 and mask_of(b"\x00\x01") == 1 << 8
    assert BatchAck((3, 0), 10, (1 << 9) | 1).ack_set() == b"\x01\x02"
    assert BatchAck((3, 0), 8, 0xFF).ack_set() == b"\xff"


def test_batch_acked_once_every_message_is():
    t = AckTracker()
    assert t.on_delivery((3, 0), 3, True, 0.0, False) == 0
    assert not t.ack(_mid(0, 2)) and not t.ack(_mid(0, 0))
    assert t.is_acked(_mid(0, 0)) and not t.is_acked(_mid(0, 1))
    assert t.pending == 1  # one partly acked batch, not two acks
    assert t.take() == PendingAcks([], None, [BatchAck((3, 0), 3, 0b101)])
    assert t.ack(_mid(0, 1))
    assert t.take() == PendingAcks([(3, 0)], None, [])  # the entry ack replaces the mask


def test_batch_masks_go_out_only_when_changed():
    t = AckTracker()
    t.on_delivery((3, 0), 12, True, 0.0, False)
    t.on_delivery((3, 1), 4, True, 0.0, False)
    t.ack(_mid(0, 0))
    t.ack(_mid(0, 9))
    t.ack(_mid(1, 3))
    assert _batches(t) == [((3, 0), 12, b"\x01\x02"), ((3, 1), 4, b"\x08")]
    assert _batches(t) == []  # nothing changed since
    t.ack(_mid(0, 0))  # again: the mask is the same
    t.ack(_mid(1, 2))
    assert _batches(t) == [((3, 1), 4, b"\x0c")]


def test_ack_set_decides_what_is_expected():
    t = AckTracker()
    # Messages 1 and 3 are not for us (acked before, or another consumer's keys).
    assert t.on_delivery((3, 0), 4, True, 0.0, False, not_for_us=0b1010) == 0
    assert not t.ack(_mid(0, 0))
    assert t.ack(_mid(0, 2))  # every expected message acked: the entry
    assert t.take() == PendingAcks([(3, 0)], None, [])


def test_nothing_for_us_records_nothing():
    t = AckTracker()
    assert t.on_delivery((3, 0), 2, True, 0.0, True, not_for_us=0b11) == 0
    assert t.expired(100.0, 1.0) == []
    assert not t.take()


def test_a_redelivery_returns_what_was_acked_here_and_updates_the_expected_set():
    t = AckTracker()
    t.on_delivery((3, 0), 3, True, 0.0, False)
    t.ack(_mid(0, 0))
    # Redelivered before the broker saw our mask: message 0 is not to be queued again.
    assert t.on_delivery((3, 0), 3, True, 0.0, False) == 0b001
    # Redelivered after: the broker masks it out itself.
    assert t.on_delivery((3, 0), 3, True, 0.0, False, not_for_us=0b001) == 0b001
    t.ack(_mid(0, 1))
    assert t.ack(_mid(0, 2))
    assert t.take().individual == [(3, 0)]


def test_a_redelivery_with_everything_acked_here_queues_the_entry_ack_again():
    t = AckTracker()
    t.on_delivery((3, 0), 2, True, 0.0, False)
    t.ack(_mid(0, 0))
    t.take()
    # The broker now holds message 1 for someone else (Key_Shared) and message 0 for us.
    assert t.on_delivery((3, 0), 2, True, 0.0, False, not_for_us=0b10) == 0b01
    assert t.take() == PendingAcks([(3, 0)], None, [])


def test_unbatched_ack_is_an_entry_ack():
    t = AckTracker()
    t.on_delivery((3, 5), 1, False, 0.0, False)
    assert t.ack(_mid(5))
    assert t.is_acked(_mid(5))
    assert t.on_delivery((3, 5), 1, False, 0.0, False) == 1  # queued ack not sent yet
    assert t.pending == 1 and t.take() == PendingAcks([(3, 5)], None, []) and t.pending == 0


def test_cumulative_ack_inside_a_batch_sends_the_entry_before_and_a_mask():
    t = AckTracker()
    t.on_delivery((3, 4), 1, False, 0.0, False)
    t.on_delivery((3, 5), 3, True, 0.0, False)
    t.ack_cumulative(_mid(5, 1))
    assert t.take() == PendingAcks([], (3, 4), [BatchAck((3, 5), 3, 0b011)])
    assert t.is_acked(_mid(4)) and t.is_acked(_mid(5, 0)) and t.is_acked(_mid(5, 1))
    assert not t.is_acked(_mid(5, 2)) and not t.is_acked(_mid(6))
    assert t.on_delivery((3, 5), 3, True, 0.0, False) == 0b011
    t.ack_cumulative(_mid(5, 2))
    assert t.take() == PendingAcks([], (3, 5), []) and t.is_acked(_mid(5, 2))
    t.ack_cumulative(_mid(2))  # going back changes nothing
    assert not t.take() and t.is_acked(_mid(5, 2))


def test_cumulative_ack_of_the_first_entry_of_a_ledger():
    t = AckTracker()
    t.on_delivery((3, 0), 2, True, 0.0, False)
    t.ack_cumulative(_mid(0, 0))
    assert t.take() == PendingAcks([], (3, -1), [BatchAck((3, 0), 2, 0b01)])


def test_cumulative_ack_covering_every_expected_message_acks_the_entry():
    t = AckTracker()
    t.on_delivery((3, 0), 3, True, 0.0, False, not_for_us=0b100)  # message 2 acked before
    t.ack_cumulative(_mid(0, 1))
    assert t.take() == PendingAcks([], (3, 0), [])


def test_cumulative_ack_forgets_earlier_batches():
    t = AckTracker()
    t.on_delivery((3, 0), 3, True, 0.0, False)
    t.on_delivery((3, 1), 3, True, 0.0, False)
    t.ack(_mid(0, 0))
    t.ack_cumulative(_mid(1, 2))
    assert t.take() == PendingAcks([], (3, 1), [])


def test_failed_acks_are_restored_and_ack_timeouts_expire():
    t = AckTracker()
    t.on_delivery((3, 1), 1, False, 10.0, True)
    t.on_delivery((3, 2), 1, False, 10.0, True)
    t.on_delivery((3, 3), 2, True, 10.0, True)
    t.ack(_mid(1))
    t.ack(_mid(3, 1))
    taken = t.take()
    t.restore(taken)
    assert t.take() == PendingAcks([(3, 1)], None, [BatchAck((3, 3), 2, 0b10)])
    assert t.expired(10.5, 1.0) == []
    assert t.expired(11.0, 1.0) == [(3, 2), (3, 3)]
    assert t.expired(20.0, 1.0) == []


def test_a_restored_mask_of_a_batch_completed_meanwhile_is_not_sent():
    t = AckTracker()
    t.on_delivery((3, 0), 2, True, 0.0, False)
    t.ack(_mid(0, 0))
    taken = t.take()
    t.ack(_mid(0, 1))
    t.restore(taken)
    assert t.take() == PendingAcks([(3, 0)], None, [])


def test_reset_forgets_the_old_position():
    t = AckTracker()
    t.on_delivery((3, 0), 2, True, 0.0, True)
    t.on_delivery((3, 1), 1, False, 0.0, True)
    t.ack(_mid(0, 0))
    t.ack_cumulative(_mid(1))
    t.reset()
    assert not t.take() and t.pending == 0
    assert not t.is_acked(_mid(0, 0)) and not t.is_acked(_mid(1))
    assert t.expired(100.0, 1.0) == []
    assert t.on_delivery((3, 0), 2, True, 0.0, False) == 0
    t.ack_cumulative(_mid(0, 1))  # an earlier position than before the reset is sent
    assert t.take().cumulative == (3, 0)
