"""The WebSocket API's pure parts: message ids as base64 MessageIdData (checked against
protobuf's own coding of Pulsar's message), Pulsar's JSON frames, and the query
parameters of the three endpoints."""

from __future__ import annotations

import base64
import json

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from magnetar.client.message import Message
from magnetar.client.options import ConsumerType, PartitionsRoutingMode
from magnetar.common.errors import InvalidArgument
from magnetar.common.message_id import INT64_MAX, ChunkMessageId, MessageId
from magnetar.gateway.websocket import ids
from magnetar.gateway.websocket.frames import (
    CommandType,
    FrameError,
    WebSocketError,
    ack_error,
    ack_ok,
    end_of_topic_frame,
    iso_time,
    message_frame,
    parse_command,
    parse_iso_time,
    parse_publish,
)
from magnetar.gateway.websocket.params import (
    InvalidQuery,
    consumer_params,
    producer_params,
    reader_params,
)
from magnetar.gateway.websocket.socket import MAX_REASON_BYTES, close_reason
from magnetar.proto.v1 import broker_pb2 as pb


def _pulsar_message_id_class():
    """PulsarApi.proto's MessageIdData, built at run time (proto2)."""
    f = descriptor_pb2.FileDescriptorProto(name="pulsar_api_test.proto", package="pulsar.proto", syntax="proto2")
    m = f.message_type.add(name="MessageIdData")
    T = descriptor_pb2.FieldDescriptorProto
    for name, number, kind, label, default in (
        ("ledgerId", 1, T.TYPE_UINT64, T.LABEL_REQUIRED, None),
        ("entryId", 2, T.TYPE_UINT64, T.LABEL_REQUIRED, None),
        ("partition", 3, T.TYPE_INT32, T.LABEL_OPTIONAL, "-1"),
        ("batch_index", 4, T.TYPE_INT32, T.LABEL_OPTIONAL, "-1"),
        ("ack_set", 5, T.TYPE_INT64, T.LABEL_REPEATED, None),
        ("batch_size", 6, T.TYPE_INT32, T.LABEL_OPTIONAL, None),
    ):
        field = m.field.add(name=name, number=number, type=kind, label=label)
        if default is not None:
            field.default_value = default
    chunk = m.field.add(name="first_chunk_message_id", number=7, type=T.TYPE_MESSAGE, label=T.LABEL_OPTIONAL)
    chunk.type_name = ".pulsar.proto.MessageIdData"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("pulsar.proto.MessageIdData"))


PulsarId = _pulsar_message_id_class()

IDS = [
    MessageId(ledger_id=0, entry_id=3),
    MessageId(ledger_id=3, entry_id=0),
    MessageId(ledger_id=12, entry_id=345, partition=2, batch_index=7),
    MessageId(ledger_id=2**40, entry_id=2**33, partition=0, batch_index=0),
    MessageId(ledger_id=7, entry_id=1, partition=-1, batch_index=99),
    MessageId.earliest,
    MessageId.latest,
    MessageId(ledger_id=INT64_MAX - 1, entry_id=INT64_MAX, partition=2**31 - 1, batch_index=2**31 - 1),
]


# -- message ids ---------------------------------------------------------------------
def test_the_docs_examples_decode():
    assert ids.decode("CAAQAw==") == MessageId(ledger_id=0, entry_id=3)
    assert ids.decode("CAMQADAA") == MessageId(ledger_id=3, entry_id=0)  # batch_size 0 (field 6) is skipped
    assert ids.encode(MessageId(ledger_id=0, entry_id=3)) == "CAAQAw=="


@pytest.mark.parametrize("mid", IDS, ids=str)
def test_round_trip_and_bytes_equal_protobufs_coding(mid: MessageId):
    assert ids.decode(ids.encode(mid)) == mid
    expected = PulsarId(ledgerId=mid.ledger_id() & (2**64 - 1), entryId=mid.entry_id() & (2**64 - 1))
    if mid.partition() >= 0:
        expected.partition = mid.partition()
    if mid.batch_index() != -1:
        expected.batch_index = mid.batch_index()
    assert ids.to_bytes(mid) == expected.SerializeToString()


def test_ids_of_newer_clients_with_extra_fields_decode():
    full = PulsarId(ledgerId=9, entryId=4, partition=1, batch_index=3, ack_set=[-1, 5], batch_size=10)
    full.first_chunk_message_id.ledgerId = 8
    full.first_chunk_message_id.entryId = 2
    text = base64.b64encode(full.SerializeToString()).decode()
    assert ids.decode(text) == MessageId(ledger_id=9, entry_id=4, partition=1, batch_index=3)
    # A partition written as a negative int32 (ten bytes) reads as -1.
    neg = PulsarId(ledgerId=1, entryId=2, partition=-1)
    assert ids.from_bytes(neg.SerializeToString()) == MessageId(ledger_id=1, entry_id=2)


def test_a_chunked_message_id_carries_its_first_chunk_as_pulsar_writes_it():
    mid = ChunkMessageId(MessageId(1, 8, 2), MessageId(1, 9, 4))
    expected = PulsarId(ledgerId=9, entryId=4, partition=1)
    expected.first_chunk_message_id.ledgerId = 8
    expected.first_chunk_message_id.entryId = 2
    expected.first_chunk_message_id.partition = 1
    assert ids.to_bytes(mid) == expected.SerializeToString()
    back = ids.decode(ids.encode(mid))
    assert isinstance(back, ChunkMessageId) and back.first_chunk_message_id() == MessageId(1, 8, 2) and back == mid


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "ledgerId is missing"),
        ("not base64!", "not base64"),
        ("CAAQ", "truncated varint"),  # entry's varint missing
        (base64.b64encode(b"\x08\x01").decode(), "entryId is missing"),
        (base64.b64encode(b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x10\x01").decode(), "longer than 10"),
        (base64.b64encode(b"\x0a\x01\x00\x10\x01").decode(), "wire type 2"),  # ledgerId as bytes
        (base64.b64encode(b"\x08\x01\x10\x01\x3a\x05\x00").decode(), "truncated field"),
        (base64.b64encode(b"\x08\x01\x10\x01\x0b").decode(), "wire type 3"),
        (base64.b64encode(b"\x08\x01\x10\x01\x18\x05\x20\xfe\xff\xff\xff\x0f").decode(), "batch_index"),  # -2
    ],
)
def test_bad_ids_are_refused_with_invalid_argument(text: str, problem: str):
    with pytest.raises(InvalidArgument) as err:
        ids.decode(text)
    assert problem in err.value.message


def test_a_non_string_id_is_refused():
    with pytest.raises(InvalidArgument):
        ids.decode(12)


# -- producer frames -------------------------------------------------------------------
def test_publish_frame_with_every_field():
    frame = json.dumps({
        "payload": base64.b64encode(b"hello").decode(),
        "properties": {"a": "1", "n": 2, "b": True},
        "context": 7,
        "key": "user-1",
        "replicationClusters": ["x"],
        "eventTime": "2024-05-01T12:00:00.250+02:00",
        "deliverAt": 1700000000000,
        "deliverAfterMs": "1500",
    })
    msg = parse_publish(frame)
    assert msg.payload == b"hello"
    assert msg.properties == {"a": "1", "n": "2", "b": "true"}
    assert (msg.context, msg.key) == ("7", "user-1")
    assert msg.event_time_ms == 1714557600250
    assert (msg.deliver_at_ms, msg.deliver_after_ms) == (1700000000000, 1500)


def test_publish_frame_minimal_and_unpadded_payload():
    msg = parse_publish('{"payload":"aGk"}')
    assert msg.payload == b"hi" and msg.properties is None and msg.context is None
    assert parse_publish('{"payload":"", "deliverAt": 0, "deliverAfterMs": -5}').deliver_at_ms is None
    assert parse_publish(b'{"payload":"", "deliverAfterMs": -5}').deliver_after_ms is None


@pytest.mark.parametrize(
    "frame, error, context, text",
    [
        ("{not json", WebSocketError.FailedToDeserializeFromJSON, None, "invalid JSON"),
        ("[1]", WebSocketError.FailedToDeserializeFromJSON, None, "JSON object"),
        ('{"payload": 5, "context": "c"}', WebSocketError.FailedToDeserializeFromJSON, None, "payload"),
        ('{"payload": "aGk=", "properties": [1]}', WebSocketError.FailedToDeserializeFromJSON, None, "properties"),
        ('{"payload": "aGk=", "deliverAt": "soon"}', WebSocketError.FailedToDeserializeFromJSON, None, "deliverAt"),
        ('{"payload": "aGk=", "key": {"a": 1}}', WebSocketError.FailedToDeserializeFromJSON, None, "key"),
        ('{"context": "c"}', WebSocketError.PayloadEncodingError, "c", "payload is missing"),
        ('{"payload": "@@@", "context": "c"}', WebSocketError.PayloadEncodingError, "c", "Invalid Base64 message-payload"),
        ('{"payload": "a", "context": "c"}', WebSocketError.PayloadEncodingError, "c", "Invalid Base64"),
        ('{"payload": "aGk=", "context": "c", "eventTime": "yesterday"}', WebSocketError.PayloadEncodingError, "c",
         "could not be parsed"),
        ('{"payload": "aGk=", "context": "c", "eventTime": "2024-05-01T12:00:00"}', WebSocketError.PayloadEncodingError,
         "c", "no offset"),
    ],
)
def test_bad_publish_frames(frame: str, error: WebSocketError, context: str | None, text: str):
    with pytest.raises(FrameError) as err:
        parse_publish(frame)
    assert (err.value.error, err.value.context) == (error, context)
    assert text in err.value.message


def test_acks():
    assert json.loads(ack_ok("CAAQAw==", "1")) == {"result": "ok", "messageId": "CAAQAw==", "context": "1"}
    assert json.loads(ack_ok("CAAQAw==", 'q"uote')) == {"result": "ok", "messageId": "CAAQAw==", "context": 'q"uote'}
    assert json.loads(ack_ok("CAAQAw==", None)) == {"result": "ok", "messageId": "CAAQAw=="}
    assert json.loads(ack_error(WebSocketError.UnknownError, "boom", "c")) == {
        "result": "send-error:8", "errorMsg": "boom", "context": "c"
    }
    assert json.loads(ack_error(WebSocketError.FailedToDeserializeFromJSON, "bad", None)) == {
        "result": "send-error:3", "errorMsg": "bad"
    }


def test_times():
    assert iso_time(1714557600250) == "2024-05-01T10:00:00.250Z"
    assert iso_time(5) == "1970-01-01T00:00:00.005Z"
    assert parse_iso_time("2024-05-01T10:00:00.250Z") == 1714557600250
    assert parse_iso_time(iso_time(1714557600999)) == 1714557600999


# -- consumer frames -------------------------------------------------------------------
def _message(key: str | None = None, event_ms: int = 0, props: dict[str, str] | None = None) -> Message:
    single = pb.SingleMessage(payload=b"\x00\xffdata", event_time_ms=event_ms)
    single.properties.update(props or {})
    if key is not None:
        single.partition_key, single.has_partition_key = key, True
    return Message("persistent://t/ns/x", MessageId(ledger_id=5, entry_id=6, partition=-1, batch_index=2), single, 1714557600250, 3)


def test_message_frame():
    frame = json.loads(message_frame(_message()))
    assert frame == {
        "messageId": ids.encode(MessageId(ledger_id=5, entry_id=6, partition=-1, batch_index=2)),
        "payload": base64.b64encode(b"\x00\xffdata").decode(),
        "properties": {},
        "publishTime": "2024-05-01T10:00:00.250Z",
        "redeliveryCount": 3,
    }
    frame = json.loads(message_frame(_message(key="k", event_ms=1000, props={"p": "v"})))
    assert (frame["key"], frame["eventTime"], frame["properties"]) == ("k", "1970-01-01T00:00:01.000Z", {"p": "v"})


def test_commands():
    assert parse_command('{"messageId":"CAAQAw=="}').type is CommandType.ACK
    assert parse_command('{"type":"whatever","messageId":"x"}').type is CommandType.ACK  # as Pulsar
    nack = parse_command('{"type":"negativeAcknowledge","messageId":"CAAQAw=="}')
    assert (nack.type, nack.message_id) == (CommandType.NEGATIVE_ACK, "CAAQAw==")
    permit = parse_command('{"type":"permit","permitMessages":100}')
    assert (permit.type, permit.permit_messages) == (CommandType.PERMIT, 100)
    assert parse_command('{"type":"unsubscribe"}').type is CommandType.UNSUBSCRIBE
    assert parse_command('{"type":"isEndOfTopic"}').type is CommandType.END_OF_TOPIC
    assert json.loads(end_of_topic_frame(False)) == {"endOfTopic": False}


@pytest.mark.parametrize(
    "frame, text",
    [
        ("nope", "invalid JSON"),
        ('{"type":"permit"}', "Missing permitMessages"),
        ('{"type":"permit","permitMessages":"many"}', "permitMessages"),
        ('{"messageId":["x"]}', "messageId"),
    ],
)
def test_bad_commands(frame: str, text: str):
    with pytest.raises(FrameError) as err:
        parse_command(frame)
    assert err.value.error is WebSocketError.FailedToDeserializeFromJSON and text in err.value.message


def test_close_codes_and_reasons():
    assert [e.close_code for e in WebSocketError] == list(range(4001, 4009))
    assert close_reason(WebSocketError.FailedToDeserializeFromJSON) == "Failed to de-serialize from JSON"
    long = close_reason(WebSocketError.UnknownError, "é" * 200)
    assert long.startswith("Unknown error: é") and len(long.encode()) <= MAX_REASON_BYTES


# -- query parameters ----------------------------------------------------------------
def test_producer_params_defaults_and_values():
    p = producer_params({})
    assert (p.batching_enabled, p.max_pending_messages, p.send_timeout_millis) == (False, 1000, 30_000)
    assert p.routing_mode is PartitionsRoutingMode.UseSinglePartition and p.initial_sequence_id is None
    p = producer_params({
        "producerName": "p1", "sendTimeoutMillis": "5000", "batchingEnabled": "TRUE", "batchingMaxMessages": "50",
        "maxPendingMessages": "10", "batchingMaxPublishDelay": "2", "messageRoutingMode": "RoundRobinPartition",
        "hashingScheme": "Murmur3_32Hash", "initialSequenceId": "41", "compressionType": "NONE", "token": "x",
    })
    assert (p.producer_name, p.send_timeout_millis, p.batching_enabled, p.batching_max_messages) == ("p1", 5000, True, 50)
    assert (p.max_pending_messages, p.batching_max_publish_delay_ms, p.initial_sequence_id) == (10, 2, 41)
    assert p.compression_type == "NONE"
    assert [producer_params({"compressionType": c}).compression_type for c in ("LZ4", "ZLIB", "ZSTD", "SNAPPY")] == [
        "LZ4", "ZLIB", "ZSTD", "SNAPPY",
    ]  # fmt: skip
    assert p.routing_mode is PartitionsRoutingMode.RoundRobinDistribution
    assert producer_params({"messageRoutingMode": "CustomPartition"}).routing_mode is PartitionsRoutingMode.UseSinglePartition


def test_consumer_and_reader_params():
    c = consumer_params({}, 1000)
    assert (c.subscription_type, c.receiver_queue_size, c.pull_mode, c.dead_letter) == (
        ConsumerType.Exclusive, 1000, False, False
    )
    c = consumer_params({
        "subscriptionType": "Key_Shared", "receiverQueueSize": "5000", "consumerName": "c", "priorityLevel": "2",
        "ackTimeoutMillis": "2000", "negativeAckRedeliveryDelay": "100", "maxRedeliverCount": "3",
        "deadLetterTopic": "persistent://t/ns/dlq", "pullMode": "true", "subscriptionMode": "Durable",
    }, 1000)
    assert c.subscription_type is ConsumerType.KeyShared and c.receiver_queue_size == 1000  # capped
    assert (c.consumer_name, c.priority_level, c.ack_timeout_ms, c.negative_ack_redelivery_delay_ms) == ("c", 2, 2000, 100)
    assert (c.max_redeliver_count, c.dead_letter_topic, c.pull_mode, c.dead_letter) == (3, "persistent://t/ns/dlq", True, True)
    assert consumer_params({"receiverQueueSize": "0"}, 1000).receiver_queue_size == 1
    assert consumer_params({"receiverQueueSize": "7"}, 5).receiver_queue_size == 5
    assert consumer_params({"deadLetterTopic": "d"}, 10).max_redeliver_count is None
    r = reader_params({}, 1000)
    assert (r.start, r.receiver_queue_size) == (MessageId.latest, 1000)
    assert reader_params({"messageId": "earliest", "readerName": "r"}, 1000).start == MessageId.earliest
    assert reader_params({"messageId": "CAMQADAA"}, 1000).start == MessageId(ledger_id=3, entry_id=0)


@pytest.mark.parametrize(
    "build, query, text",
    [
        (producer_params, {"messageRoutingMode": "Random"}, "Invalid messageRoutingMode Random"),
        (producer_params, {"hashingScheme": "Boost"}, "Invalid hashingScheme Boost"),
        (producer_params, {"compressionType": "BROTLI"}, "Invalid compressionType BROTLI"),
        # Accepted by Pulsar, not done here: refused rather than ignored.
        (producer_params, {"encryptionKeys": "k1,k2"}, "Invalid encryptionKeys k1,k2: end-to-end encryption"),
        (producer_params, {"hashingScheme": "JavaStringHash"}, "Invalid hashingScheme JavaStringHash: not supported"),
        (lambda q: consumer_params(q, 1000), {"cryptoFailureAction": "CONSUME"}, "Invalid cryptoFailureAction CONSUME"),
        (lambda q: reader_params(q, 1000), {"cryptoFailureAction": "DISCARD"}, "Invalid cryptoFailureAction DISCARD"),
        (lambda q: consumer_params(q, 1000), {"subscriptionType": "Shared", "priorityLevel": "1"},
         "Invalid priorityLevel 1: not supported on a Shared subscription"),
        (producer_params, {"sendTimeoutMillis": "abc"}, "Invalid sendTimeoutMillis abc"),
        (producer_params, {"maxPendingMessages": "0"}, "Invalid maxPendingMessages 0"),
        (producer_params, {"batchingEnabled": "yes"}, "Invalid batchingEnabled yes"),
        (lambda q: consumer_params(q, 1000), {"subscriptionType": "Shard"}, "Invalid subscriptionType Shard"),
        (lambda q: consumer_params(q, 1000), {"subscriptionMode": "Weird"}, "Invalid subscriptionMode Weird"),
        (lambda q: consumer_params(q, 1000), {"subscriptionMode": "NonDurable"}, "not supported"),
        (lambda q: consumer_params(q, 1000), {"receiverQueueSize": "-1"}, "Invalid receiverQueueSize -1"),
        (lambda q: consumer_params(q, 1000), {"ackTimeoutMillis": "10"}, "Invalid ackTimeoutMillis 10"),
        (lambda q: consumer_params(q, 1000), {"maxRedeliverCount": "0"}, "Invalid maxRedeliverCount 0"),
        (lambda q: consumer_params(q, 1000), {"pullMode": "1"}, "Invalid pullMode 1"),
        (lambda q: reader_params(q, 1000), {"messageId": "%%%"}, "Invalid messageId"),
    ],
)
def test_bad_params(build, query, text):
    with pytest.raises(InvalidQuery) as err:
        build(query)
    assert text in err.value.message


def test_message_frame_carries_the_ordering_key_and_schema_version_when_set():
    single = pb.SingleMessage(payload=b"x", ordering_key=b"\x00\xffo")
    mid = MessageId(ledger_id=5, entry_id=6, partition=-1, batch_index=-1)
    frame = json.loads(message_frame(Message("persistent://t/ns/x", mid, single, 1, 0, "p", (2**63 - 1).to_bytes(8, "big"))))
    assert (base64.b64decode(frame["orderingKey"]), frame["schemaVersion"]) == (b"\x00\xffo", 2**63 - 1)
    frame = json.loads(message_frame(Message("persistent://t/ns/x", mid, single, 1, 0, "p", (7).to_bytes(8, "big"))))
    assert frame["schemaVersion"] == 7
    plain = json.loads(message_frame(_message()))
    assert "orderingKey" not in plain and "schemaVersion" not in plain


def test_publish_frame_ordering_key():
    assert parse_publish('{"payload":"", "orderingKey":"AP9v"}').ordering_key == b"\x00\xffo"
    assert parse_publish('{"payload":"", "orderingKey":""}').ordering_key is None
    assert parse_publish('{"payload":""}').ordering_key is None
    with pytest.raises(FrameError) as err:
        parse_publish('{"payload":"", "context":"c", "orderingKey":"@@"}')
    assert (err.value.error, err.value.context) == (WebSocketError.PayloadEncodingError, "c")
    assert "orderingKey" in err.value.message
