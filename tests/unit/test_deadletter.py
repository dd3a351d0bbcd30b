"""The retry/DLQ policy and copies (broker/deadletter/policy.py and copies.py) and
reconsume_later's delays (client/retry.py): pure functions, no services."""

from __future__ import annotations

from datetime import timedelta

import pytest

from magnetar.broker.deadletter.copies import plan_dead_letter, plan_reconsume
from magnetar.broker.deadletter.policy import DeadLetterDefaults, DeadLetterPolicy, resolve
from magnetar.broker.entry import Message as EntryMessage
from magnetar.client.message import Message
from magnetar.client.retry import parse_delay_levels, reconsume_delay_ms
from magnetar.common.errors import InvalidArgument
from magnetar.common.message_id import MessageId
from magnetar.proto.v1 import broker_pb2 as pb

TOPIC = "persistent://acme/app/orders"


def test_built_in_names_use_the_partitioned_topic_and_its_namespace():
    p = resolve(f"{TOPIC}-partition-3", "billing", None, None)
    assert p == DeadLetterPolicy(
        16, "persistent://acme/app/orders-billing-RETRY", "persistent://acme/app/orders-billing-DLQ", "billing-DLQ-sub"
    )


def test_asked_values_beat_namespace_defaults_which_beat_built_ins():
    defaults = DeadLetterDefaults(max_redeliver_count=5, dead_letter_topic="{subscription}.dead.{topic}")
    p = resolve(TOPIC, "s", None, defaults)
    assert p.max_redeliver_count == 5 and p.dead_letter_topic == "persistent://acme/app/s.dead.orders"
    assert p.retry_letter_topic == "persistent://acme/app/orders-s-RETRY"
    asked = DeadLetterDefaults(max_redeliver_count=2, dead_letter_topic="other/ns/dlq", initial_subscription_name="k")
    p = resolve(TOPIC, "s", asked, defaults)
    assert (p.max_redeliver_count, p.dead_letter_topic, p.initial_subscription_name) == (2, "persistent://other/ns/dlq", "k")


@pytest.mark.parametrize(
    "defaults",
    [
        DeadLetterDefaults(max_redeliver_count=0),
        DeadLetterDefaults(max_redeliver_count=True),
        DeadLetterDefaults(retry_letter_topic="a/b/c/d"),
        DeadLetterDefaults(dead_letter_topic=" "),
        DeadLetterDefaults(initial_subscription_name="x/y"),
    ],
)
def test_bad_defaults_are_refused(defaults):
    with pytest.raises(InvalidArgument):
        defaults.check()


def test_defaults_round_trip_through_their_document_and_refuse_unknown_keys():
    d = DeadLetterDefaults(max_redeliver_count=3, retry_letter_topic="{topic}-r")
    assert DeadLetterDefaults.from_document(d.to_document()) == d
    assert d.to_document() == {"max_redeliver_count": 3, "retry_letter_topic": "{topic}-r"}
    with pytest.raises(InvalidArgument, match="unknown"):
        DeadLetterDefaults.from_document({"max_redelivery": 3})


def original() -> EntryMessage:
    return EntryMessage(
        payload=b"x", properties={"app": "1"}, partition_key="k", has_partition_key=True, event_time_ms=7,
        sequence_id=99, deliver_at_ms=5,
    )


def test_the_first_retry_copy_carries_every_property_and_is_delayed():
    policy = resolve(TOPIC, "s", None, None)
    move = plan_reconsume(policy, "s", TOPIC, "1:2:-1:-1", original(), 5000, now_ms=1_000_000)
    assert not move.dead and move.target == policy.retry_letter_topic
    assert dict(move.message.properties) == {
        "app": "1", "REAL_TOPIC": TOPIC, "ORIGIN_MESSAGE_ID": "1:2:-1:-1", "RETRY_TOPIC": policy.retry_letter_topic,
        "RECONSUMETIMES": "1", "DELAY_TIME": "5000",
    }
    assert move.message.deliver_at_ms == 1_005_000
    assert (move.message.payload, move.message.partition_key, move.message.event_time_ms) == (b"x", "k", 7)
    assert move.producer_name == "__move:s:1:2:-1:-1" and move.sequence_id == 1


def test_later_copies_keep_the_origin_and_count_up_then_go_to_the_dlq():
    policy = DeadLetterPolicy(2, "persistent://acme/app/r", "persistent://acme/app/d", "keep")
    msg = original()
    seqs = []
    for expected in ("1", "2"):
        move = plan_reconsume(policy, "s", TOPIC, f"{expected}:0:-1:-1", msg, 1000, now_ms=0)
        assert move.message.properties["RECONSUMETIMES"] == expected
        assert move.message.properties["ORIGIN_MESSAGE_ID"] == "1:0:-1:-1"
        seqs.append(move.sequence_id)
        msg = move.message
    dead = plan_reconsume(policy, "s", policy.retry_letter_topic, "9:9:-1:-1", msg, 1000, now_ms=0)
    assert dead.dead and dead.target == "persistent://acme/app/d" and dead.message.deliver_at_ms == 0
    assert dead.message.properties["REAL_TOPIC"] == TOPIC and dead.message.properties["ORIGIN_MESSAGE_ID"] == "1:0:-1:-1"
    assert "after 2 retries" in dead.message.properties["DEAD_LETTER_REASON"]
    assert seqs + [dead.sequence_id] == [1, 2, 3]  # one producer name, rising sequence ids
    assert len({dead.producer_name}) == 1


def test_reconsume_delays_outside_one_second_to_ten_days_are_refused():
    policy = resolve(TOPIC, "s", None, None)
    for bad in (999, 864_000_001, -5):
        with pytest.raises(InvalidArgument):
            plan_reconsume(policy, "s", TOPIC, "1:2:-1:-1", original(), bad)


def test_a_nacked_message_goes_to_the_dlq_with_the_reason():
    policy = resolve(TOPIC, "s", None, None)
    move = plan_dead_letter(policy, "s", TOPIC, "4:5:-1:2", original(), 16)
    assert move.dead and move.target == policy.dead_letter_topic and move.sequence_id == 1
    assert move.message.properties["ORIGIN_MESSAGE_ID"] == "4:5:-1:2"
    assert move.message.properties["DEAD_LETTER_REASON"] == "redelivery count 16 reached max_redeliver_count 16"


def message(props: dict[str, str]) -> Message:
    single = pb.SingleMessage(payload=b"p")
    single.properties.update(props)
    return Message("t", MessageId(ledger_id=1, entry_id=2, partition=-1, batch_index=-1), single, 0)


def test_delay_levels_parse_and_map_to_the_three_modes():
    levels = parse_delay_levels("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
    assert levels[:4] == [1000, 5000, 10000, 30000] and levels[-1] == 7_200_000 and len(levels) == 18
    assert reconsume_delay_ms(message({}), levels, timedelta(seconds=2)) == 2000
    assert reconsume_delay_ms(message({}), levels, 1500) == 1500
    assert reconsume_delay_ms(message({}), levels, level=3) == 10_000
    assert reconsume_delay_ms(message({}), levels) == 1000  # first retry: level 1
    assert reconsume_delay_ms(message({"RECONSUMETIMES": "1"}), levels) == 5000
    assert reconsume_delay_ms(message({"RECONSUMETIMES": "40"}), levels) == 7_200_000  # stays at the last
    assert parse_delay_levels([timedelta(seconds=2), 3000]) == [2000, 3000]


@pytest.mark.parametrize(
    "kwargs", [dict(delay=999), dict(delay=1000, level=1), dict(level=0), dict(level=19), dict(delay="5s")]
)
def test_bad_reconsume_arguments_are_refused(kwargs):
    levels = parse_delay_levels("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
    with pytest.raises(InvalidArgument):
        reconsume_delay_ms(message({}), levels, **kwargs)


@pytest.mark.parametrize("levels", ["", "1x", "5", "0s", [timedelta(days=11)], "1s  2"])
def test_bad_levels_are_refused(levels):
    with pytest.raises(InvalidArgument):
        parse_delay_levels(levels)


def test_a_topic_remembers_only_the_latest_move_names(monkeypatch):
    from magnetar.broker import dedup as dedup_module

    monkeypatch.setattr(dedup_module, "MAX_MOVE_NAMES", 2)
    dedup = dedup_module.DedupState()
    for i in range(3):
        dedup.stored(f"__move:s:{i}:0:-1:-1", 1)
    dedup.stored("app-producer", 5)  # ordinary producers are never forgotten
    dedup.stored("__move:s:2:0:-1:-1", 2)  # a later retry of a known move adds no name
    assert dedup.persisted == {"__move:s:1:0:-1:-1": 1, "__move:s:2:0:-1:-1": 2, "app-producer": 5}
