"""The replay's pure parts: sequence ids packed from message ids, the copy's properties."""

from __future__ import annotations

import pytest

from magnetar.client.message import Message
from magnetar.common.errors import InvalidArgument
from magnetar.common.message_id import MessageId
from magnetar.gateway.deadletters import is_dlq_topic, replay_properties, sequence_id
from magnetar.proto.v1 import broker_pb2 as pb


def test_sequence_ids_grow_with_message_ids_and_never_collide():
    ids = [MessageId(ledger_id=led, entry_id=e, partition=0, batch_index=b) for led in (0, 1, 7) for e in (0, 1, 50_000) for b in (-1, 0, 3)]
    packed = [sequence_id(m) for m in sorted(ids)]
    assert packed == sorted(packed) and len(set(packed)) == len(packed)
    assert sequence_id(MessageId(ledger_id=3, entry_id=4, partition=2, batch_index=-1)) == sequence_id(MessageId(ledger_id=3, entry_id=4, partition=5, batch_index=-1))  # per partition producer


@pytest.mark.parametrize("mid", [MessageId(ledger_id=1 << 27, entry_id=0, partition=-1, batch_index=-1), MessageId(ledger_id=0, entry_id=1 << 24, partition=-1, batch_index=-1), MessageId(ledger_id=0, entry_id=0, partition=-1, batch_index=4095)])
def test_ids_beyond_the_widths_are_refused(mid):
    with pytest.raises(InvalidArgument, match="too large"):
        sequence_id(mid)


def test_the_copy_clears_reconsume_times_and_counts_replays():
    single = pb.SingleMessage(payload=b"x")
    single.properties.update({"REAL_TOPIC": "t", "RECONSUMETIMES": "3", "k": "v"})
    msg = Message("dlq", MessageId(ledger_id=5, entry_id=6, partition=-1, batch_index=-1), single, 0)
    props = replay_properties(msg, 1234)
    assert props == {"REAL_TOPIC": "t", "k": "v", "ORIGIN_MESSAGE_ID": "5:6:-1:-1", "REPLAY_COUNT": "1", "REPLAYED_AT": "1234"}
    single.properties.update({"REPLAY_COUNT": "2", "ORIGIN_MESSAGE_ID": "1:1:-1:-1"})
    again = replay_properties(Message("dlq", MessageId(ledger_id=5, entry_id=7, partition=-1, batch_index=-1), single, 0), 9)
    assert (again["REPLAY_COUNT"], again["ORIGIN_MESSAGE_ID"]) == ("3", "1:1:-1:-1")


def test_dlq_topics_are_named_as_pulsar_names_them():
    assert is_dlq_topic("persistent://a/b/orders-sub-DLQ")
    assert is_dlq_topic("persistent://a/b/orders-sub-DLQ-partition-2")
    assert not is_dlq_topic("persistent://a/b/orders-sub-RETRY")
