"""``magnetar admin topics`` verbs of tools/admin_topics.py without a cluster: their
arguments as pulsar-admin spells them, the time and duration parsers, the message JSON."""

from __future__ import annotations

import pytest

from magnetar.common.errors import InvalidArgument
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.tools.admin import build_parser
from magnetar.tools.admin_topics import datetime_ms, expire_seconds, message_json


def test_the_verbs_parse_as_pulsar_admin_spells_them():
    parser = build_parser()
    assert parser.parse_args(["topics", "terminate", "t"]).action == "terminate"
    assert parser.parse_args(["topics", "partitioned-terminate", "t"]).action == "partitioned-terminate"
    assert parser.parse_args(["topics", "get-message-id", "t", "-d", "2024-05-01T10:00:00Z"]).datetime == "2024-05-01T10:00:00Z"
    args = parser.parse_args(["topics", "get-message-by-id", "t", "--ledgerId", "7", "--entryId", "3"])
    assert (args.ledger_id, args.entry_id) == (7, 3)
    assert parser.parse_args(["topics", "expire-messages-all-subscriptions", "t", "--expireTime", "1h"]).expire_time == "1h"
    for bad in (["topics", "get-message-id", "t"], ["topics", "get-message-by-id", "t", "-l", "1"],
                ["topics", "get-message-by-id", "t", "-l", "x", "-e", "1"], ["topics", "expire-messages-all-subscriptions", "t"]):
        with pytest.raises(SystemExit):
            parser.parse_args(bad)


def test_times_and_durations():
    assert datetime_ms("1714557600250") == 1_714_557_600_250
    assert datetime_ms("2024-05-01T10:00:00.250Z") == 1_714_557_600_250
    assert datetime_ms("2024-05-01T10:00:00.250") == 1_714_557_600_250  # no zone: UTC
    assert datetime_ms("2024-05-01T12:00:00.250+02:00") == 1_714_557_600_250
    for bad in ("yesterday", "1969-12-31T23:59:59Z", "", "-5"):
        with pytest.raises(InvalidArgument):
            datetime_ms(bad)
    assert [expire_seconds(t) for t in ("0", "45", "30s", "10m", "1h", "2d", "1w")] == [0, 45, 30, 600, 3600, 172_800, 604_800]
    for bad in ("soon", "-1", "1y", "1 h", str(2**63)):
        with pytest.raises(InvalidArgument):
            expire_seconds(bad)


def test_message_json_shows_text_or_base64():
    found = pb.PeekMessageResponse(found=True, producer_name="p", publish_time_ms=1_714_557_600_250,
                                   message_id=pb.MessageIdData(ledger_id=7, entry_id=3, partition=-1, batch_index=-1))  # fmt: skip
    found.message.payload = b"hello"
    found.message.properties["b"] = "2"
    found.message.properties["a"] = "1"
    assert message_json(found) == {
        "messageId": "7:3:-1:-1", "publishTime": "2024-05-01T10:00:00.250Z", "producerName": "p", "sequenceId": 0,
        "properties": {"a": "1", "b": "2"}, "payload": "hello",
    }
    found.message.payload = b"\xff\x00"
    found.message.partition_key, found.message.has_partition_key = "k", True
    doc = message_json(found)
    assert doc["payloadBase64"] == "/wA=" and "payload" not in doc and doc["key"] == "k"
