"""``magnetar admin topics`` verbs for one topic's end and messages, with pulsar-admin's
names: ``terminate``, ``partitioned-terminate``, ``get-message-id`` (by publish time),
``get-message-by-id``, ``expire-messages-all-subscriptions``, ``get-subscription-properties``,
``update-subscription-properties``, ``get-properties``, ``update-properties`` and
``remove-properties``; and ``create-missed-partitions`` and ``bundle-range`` (the namespace
bundle a topic falls in). Each runs over gRPC
(``--url``) or the gateway's REST API (``--admin-url``) with the same output."""

from __future__ import annotations

import argparse
import base64
import json
import re
from datetime import UTC, datetime
from typing import Any

from magnetar.client.admin import AdminClient
from magnetar.client.rest_admin import RestAdmin
from magnetar.common.errors import InvalidArgument
from magnetar.proto.v1 import broker_pb2 as pb

ACTIONS = (
    "terminate", "partitioned-terminate", "get-message-id", "get-message-by-id", "expire-messages-all-subscriptions",
    "get-subscription-properties", "update-subscription-properties", "get-properties", "update-properties",
    "remove-properties", "create-missed-partitions", "bundle-range",
)
_DURATION = re.compile(r"([0-9]+)([smhdw]?)", re.ASCII)
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
INT64_MAX = 2**63 - 1


def message_id_text(mid: pb.MessageIdData) -> str:
    """pulsar-admin's ``ledgerId:entryId:partitionIndex``."""
    return f"{mid.ledger_id}:{mid.entry_id}:{mid.partition}"


def datetime_ms(text: str) -> int:
    """``--datetime`` of get-message-id: ms since the epoch (``1700000000000``) or an ISO
    8601 time (``2024-05-01T10:00:00Z``; without a zone, UTC).

    Raises:
        InvalidArgument: neither, or before the epoch.
    """
    text = text.strip()
    if text.isascii() and text.isdigit():
        ms = int(text)
    else:
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidArgument(
                f"invalid --datetime {text!r}: give ms since the epoch or an ISO 8601 time such as 2024-05-01T10:00:00Z"
            ) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        ms = round(when.timestamp() * 1000)
    if not 0 <= ms <= INT64_MAX:
        raise InvalidArgument(f"invalid --datetime {text!r}: before the epoch or too far ahead")
    return ms


def expire_seconds(text: str) -> int:
    """``--expireTime`` of expire-messages-all-subscriptions: seconds, or a duration
    (``30s``, ``10m``, ``1h``, ``2d``, ``1w``).

    Raises:
        InvalidArgument: neither.
    """
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise InvalidArgument(f"invalid --expireTime {text!r}: give seconds or a duration such as 30s, 10m, 1h, 2d, 1w")
    seconds = int(match.group(1)) * _UNIT_S[match.group(2)]
    if seconds > INT64_MAX // 1000:
        raise InvalidArgument(f"invalid --expireTime {text!r}: too long")
    return seconds


def key_values(pairs: list[str] | None) -> dict[str, str]:
    """``-p k=v`` options (repeated) → {"k": "v"}.

    Raises:
        InvalidArgument: an item without ``=`` or with an empty key.
    """
    out: dict[str, str] = {}
    for item in pairs or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidArgument(f"a property is key=value, got {item!r}")
        out[key] = value
    return out


def iso_time(ms: int) -> str:
    """ISO 8601 in UTC with milliseconds, as the gateway's headers ('' for 0)."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z") if ms > 0 else ""


def message_json(found: pb.PeekMessageResponse) -> dict[str, Any]:
    """get-message-by-id's output: the message's id, metadata and payload (text when it
    is UTF-8, else ``payloadBase64``)."""
    mid, msg = found.message_id, found.message
    doc: dict[str, Any] = {
        "messageId": f"{mid.ledger_id}:{mid.entry_id}:{mid.partition}:{mid.batch_index}",
        "publishTime": iso_time(found.publish_time_ms),
        "producerName": found.producer_name,
        "sequenceId": msg.sequence_id,
        "properties": dict(sorted(msg.properties.items())),
    }
    if msg.has_partition_key or msg.partition_key:
        doc["key"] = msg.partition_key
    try:
        doc["payload"] = msg.payload.decode()
    except UnicodeDecodeError:
        doc["payloadBase64"] = base64.b64encode(msg.payload).decode()
    return doc


async def run_topic_messages(admin: AdminClient | RestAdmin, args: argparse.Namespace) -> bool:
    """The verbs of this module; False when ``args`` is none of them."""
    action, topic = args.action, getattr(args, "name", "")
    if action == "terminate":
        print(f"Topic {topic} successfully terminated at {message_id_text(await admin.terminate_topic(topic))}")
    elif action == "partitioned-terminate":
        for i, mid in enumerate(await admin.terminate_partitioned_topic(topic)):
            print(f"Partition {i} of {topic} successfully terminated at {message_id_text(mid)}")
    elif action == "get-message-id":
        print(message_id_text(await admin.message_id_by_timestamp(topic, datetime_ms(args.datetime))))
    elif action == "get-message-by-id":
        if not (0 <= args.ledger_id <= INT64_MAX and 0 <= args.entry_id <= INT64_MAX):
            raise InvalidArgument(f"--ledger-id and --entry-id are integers >= 0, got {args.ledger_id}:{args.entry_id}")
        print(json.dumps(message_json(await admin.message_by_id(topic, args.ledger_id, args.entry_id)), indent=2))
    elif action == "expire-messages-all-subscriptions":
        await admin.expire_messages_all_subscriptions(topic, expire_seconds(args.expire_time))
    elif action == "get-subscription-properties":
        print(json.dumps(await admin.subscription_properties(topic, args.subscription), indent=2, sort_keys=True))
    elif action == "update-subscription-properties":
        properties = key_values(args.property)
        if args.clear == bool(properties):
            raise InvalidArgument("give the new properties (-p key=value, repeated) or --clear, not both or neither")
        await admin.update_subscription_properties(topic, args.subscription, properties)
    elif action == "get-properties":
        print(json.dumps(await admin.topic_properties(topic), indent=2, sort_keys=True))
    elif action == "update-properties":
        properties = key_values(args.property)
        if not properties:
            raise InvalidArgument("give the properties to set: -p key=value (repeat for more)")
        await admin.update_topic_properties(topic, properties)
    elif action == "remove-properties":
        if not args.key:
            raise InvalidArgument("give the key of the property to remove (-k KEY)")
        await admin.remove_topic_property(topic, args.key)
    elif action == "create-missed-partitions":
        await admin.create_missed_partitions(topic)
    elif action == "bundle-range":
        print(await admin.bundle_range(topic))
    else:
        return False
    return True


def add_topic_message_commands(topics: argparse._SubParsersAction[Any]) -> None:
    def command(action: str, help_text: str, operation: str) -> argparse.ArgumentParser:
        p = topics.add_parser(action, help=help_text, operations=(operation,))
        p.add_argument("name", metavar="TOPIC")
        return p

    command("terminate", "terminate a topic (or one partition): it takes no more messages and its consumers "
                         "learn they reached its end; prints its last message id", "PersistentTopics_terminate")
    command("create-missed-partitions", "give each partition of a partitioned topic that lacks one its managed ledger",
            "PersistentTopics_createMissedPartitions")
    command("bundle-range", "print the namespace bundle a topic falls in, e.g. 0x40000000_0x80000000",
            "TopicLookup_getNamespaceBundle")
    command("partitioned-terminate", "terminate every partition of a partitioned topic; prints each one's last message id",
            "PersistentTopics_terminatePartitionedTopic")
    command("get-message-id", "print the id of the first message published at or after a time",
            "PersistentTopics_getMessageIdByTimestamp").add_argument(
        "-d", "--datetime", required=True, metavar="TIME", help="ms since the epoch, or ISO 8601: 2024-05-01T10:00:00Z")
    p = command("get-message-by-id", "print the message stored at ledgerId:entryId (of a batch, its first) as JSON",
                "PersistentTopics_getMessageById")
    p.add_argument("-l", "--ledger-id", "--ledgerId", dest="ledger_id", type=int, required=True, metavar="ID")
    p.add_argument("-e", "--entry-id", "--entryId", dest="entry_id", type=int, required=True, metavar="ID")
    command("expire-messages-all-subscriptions",
            "on every subscription, acknowledge every message published more than a time ago",
            "PersistentTopics_expireMessagesForAllSubscriptions").add_argument(
        "-t", "--expireTime", "--expire-time", dest="expire_time", required=True, metavar="TIME",
        help="seconds, or a duration: 30s, 10m, 1h, 2d, 1w")
    p = command("get-subscription-properties", "print a subscription's properties as JSON", "PersistentTopics_getSubscriptionProperties")
    p.add_argument("-s", "--subscription", required=True, metavar="SUB")
    p = command("update-subscription-properties", "replace all the properties of a subscription", "PersistentTopics_updateSubscriptionProperties")
    p.add_argument("-s", "--subscription", required=True, metavar="SUB")
    p.add_argument("-p", "--property", action="append", metavar="KEY=VALUE", help="a property (repeat for more)")
    p.add_argument("-c", "--clear", action="store_true", help="remove every property")
    command("get-properties", "print a topic's properties as JSON", "PersistentTopics_getProperties")
    command("update-properties", "set properties of a topic (merged with the ones it has)", "PersistentTopics_updateProperties").add_argument(
        "-p", "--property", action="append", metavar="KEY=VALUE", help="a property (repeat for more)")
    command("remove-properties", "remove one property of a topic", "PersistentTopics_removeProperties").add_argument(
        "-k", "--key", required=True, metavar="KEY", help="the property's key")
