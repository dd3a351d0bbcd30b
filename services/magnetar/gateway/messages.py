"""One message as Pulsar's peek and examine answer it: the payload as the body
(``application/octet-stream``), its id, times, properties and keys as ``X-Pulsar-*``
headers.

Differences from Pulsar: a message of a batch is returned alone (Pulsar returns the
whole batch, framed, with ``X-Pulsar-num-batch-message``), its ``X-Pulsar-Message-ID``
naming it in full (``ledgerId:entryId:partitionIndex:batchIndex``, which Pulsar's
clients, reading the first two fields, take as its entry); a message sent without
batching has Pulsar's ``ledgerId:entryId``. Properties are one ``X-Pulsar-PROPERTY``
header holding a JSON object (Pulsar's newest form). A partition key that is not
printable ASCII is sent base64-encoded, with ``X-Pulsar-partition-key-b64-encoded``.
The ordering key and the schema version, binary, are base64-encoded as Pulsar sends them
(``X-Pulsar-Base64-ordering-key``, ``X-Pulsar-Base64-schema-version``), present only
when the message has them. Peek shows stored entries, as Pulsar's: a chunked message is
its chunks, each its own message with its part of the payload (compressed as stored when
the message was) and ``X-Pulsar-uuid``, ``X-Pulsar-chunk-id``,
``X-Pulsar-num-chunks-from-msg``, ``X-Pulsar-total-chunk-msg-size``.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import quote

from fastapi import Response

from magnetar.common.message_id import MessageId
from magnetar.gateway.topic_stats import iso_time
from magnetar.proto.v1 import broker_pb2 as pb

MESSAGE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/octet-stream": {}}, "description": "The message's payload; its metadata in X-Pulsar-* headers"},
}
"""The OpenAPI answer of a route that returns a message."""


def _printable(value: str) -> bool:
    return value.isascii() and value.isprintable()


def message_headers(peeked: pb.PeekMessageResponse) -> dict[str, str]:
    mid, msg = peeked.message_id, peeked.message
    if mid.batch_index < 0:
        message_id = f"{mid.ledger_id}:{mid.entry_id}"
    else:
        message_id = str(MessageId(ledger_id=mid.ledger_id, entry_id=mid.entry_id, partition=mid.partition, batch_index=mid.batch_index))
    headers = {
        "X-Pulsar-Message-ID": message_id,
        "X-Pulsar-publish-time": iso_time(peeked.publish_time_ms),
        "X-Pulsar-Is-Encrypted": "false",
        "X-Pulsar-sequence-id": str(msg.sequence_id),
    }
    if peeked.producer_name:
        name = peeked.producer_name
        headers["X-Pulsar-producer-name"] = name if _printable(name) else quote(name)
    if msg.properties:
        headers["X-Pulsar-PROPERTY"] = json.dumps(dict(sorted(msg.properties.items())), separators=(",", ":"))
    if msg.has_partition_key or msg.partition_key:
        key = msg.partition_key
        if _printable(key):
            headers["X-Pulsar-partition-key"] = key
        else:
            headers["X-Pulsar-partition-key"] = base64.b64encode(key.encode()).decode()
            headers["X-Pulsar-partition-key-b64-encoded"] = "true"
    if msg.ordering_key:
        headers["X-Pulsar-Base64-ordering-key"] = base64.b64encode(msg.ordering_key).decode()
    if peeked.schema_version:
        headers["X-Pulsar-Base64-schema-version"] = base64.b64encode(peeked.schema_version).decode()
    if msg.event_time_ms > 0:
        headers["X-Pulsar-event-time"] = iso_time(msg.event_time_ms)
    if msg.deliver_at_ms > 0:
        headers["X-Pulsar-deliver-at-time"] = iso_time(msg.deliver_at_ms)
    if peeked.num_chunks_from_msg > 1:  # a stored chunk: its part of the message, as Pulsar shows it
        headers["X-Pulsar-uuid"] = peeked.uuid if _printable(peeked.uuid) else quote(peeked.uuid)
        headers["X-Pulsar-chunk-id"] = str(peeked.chunk_id)
        headers["X-Pulsar-num-chunks-from-msg"] = str(peeked.num_chunks_from_msg)
        headers["X-Pulsar-total-chunk-msg-size"] = str(peeked.total_chunk_msg_size)
    return headers


def message_response(peeked: pb.PeekMessageResponse) -> Response:
    return Response(content=peeked.message.payload, media_type="application/octet-stream", headers=message_headers(peeked))
