"""The commands a broker sends, and the conversions the wire needs (message ids' signed
ledger and entry ids, the request id a command carries)."""

from __future__ import annotations

import struct

from magnetar.proto.pulsar import pulsar_api_pb2 as pb

PROTOCOL_VERSION = 20
"""The newest protocol version this package speaks (Pulsar's v20)."""

_SIZES = struct.Struct(">II")  # a simple command's totalSize, commandSize
_U64 = 1 << 64
_I64_MAX = (1 << 63) - 1

Type = pb.BaseCommand.Type
ServerError = pb.ServerError


# -- message ids ------------------------------------------------------------------------------
def to_wire_id(value: int) -> int:
    """A signed ledger or entry id as the wire's uint64 (-1 becomes 2^64 - 1).

    Raises:
        ValueError: outside int64.
    """
    if not -(1 << 63) <= value <= _I64_MAX:
        raise ValueError(f"{value} is not a 64-bit signed id")
    return value % _U64


def from_wire_id(value: int) -> int:
    """The wire's uint64 ledger or entry id as the signed id it means."""
    return value - _U64 if value > _I64_MAX else value


def message_id(ledger_id: int, entry_id: int, partition: int = -1, batch_index: int = -1) -> pb.MessageIdData:
    """A ``MessageIdData`` from signed ids."""
    return pb.MessageIdData(
        ledgerId=to_wire_id(ledger_id), entryId=to_wire_id(entry_id), partition=partition, batch_index=batch_index
    )


def position_of(message: pb.MessageIdData) -> tuple[int, int]:
    """The signed (ledger id, entry id) of a ``MessageIdData``."""
    return from_wire_id(message.ledgerId), from_wire_id(message.entryId)


# -- what a command carries -------------------------------------------------------------------
def body(command: pb.BaseCommand) -> object | None:
    """The command's body (the field whose number is its type), None when it has none."""
    field = pb.BaseCommand.DESCRIPTOR.fields_by_number.get(command.type)
    if field is None or field.message_type is None or not command.HasField(field.name):
        return None
    return getattr(command, field.name)


def request_id(command: pb.BaseCommand) -> int:
    """The request id the command carries, to echo in an answer; 0 when it has none."""
    inner = body(command)
    if inner is None or "request_id" not in inner.DESCRIPTOR.fields_by_name:  # type: ignore[attr-defined]
        return 0
    return int(inner.request_id)  # type: ignore[attr-defined]


# -- builders ---------------------------------------------------------------------------------
MAX_ERROR_TEXT = 1024
"""Characters of an error's message sent: a message that quotes what the client sent
(a 70 KB topic name of control characters quotes as 280 KB) is cut, so that an answer
is never much larger than the request."""


def error_text(message: str) -> str:
    """``message``, cut to :data:`MAX_ERROR_TEXT` characters."""
    if len(message) <= MAX_ERROR_TEXT:
        return message
    return f"{message[: MAX_ERROR_TEXT - 40]}… ({len(message):,} characters)"


def connected(server_version: str, protocol_version: int, max_message_size: int) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=Type.CONNECTED,
        connected=pb.CommandConnected(
            server_version=server_version, protocol_version=protocol_version, max_message_size=max_message_size
        ),
    )


def ping() -> pb.BaseCommand:
    return pb.BaseCommand(type=Type.PING, ping=pb.CommandPing())


def pong() -> pb.BaseCommand:
    return pb.BaseCommand(type=Type.PONG, pong=pb.CommandPong())


def error(request: int, code: pb.ServerError, message: str) -> pb.BaseCommand:
    """ERROR for request ``request`` (``code``: a ``ServerError``)."""
    return pb.BaseCommand(type=Type.ERROR, error=pb.CommandError(request_id=request, error=code, message=error_text(message)))


def success(request: int) -> pb.BaseCommand:
    return pb.BaseCommand(type=Type.SUCCESS, success=pb.CommandSuccess(request_id=request))


def partitioned_metadata(request: int, partitions: int) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=Type.PARTITIONED_METADATA_RESPONSE,
        partitionMetadataResponse=pb.CommandPartitionedTopicMetadataResponse(
            request_id=request, partitions=partitions,
            response=pb.CommandPartitionedTopicMetadataResponse.Success,
        ),
    )  # fmt: skip


def partitioned_metadata_failed(request: int, code: pb.ServerError, message: str) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=Type.PARTITIONED_METADATA_RESPONSE,
        partitionMetadataResponse=pb.CommandPartitionedTopicMetadataResponse(
            request_id=request, response=pb.CommandPartitionedTopicMetadataResponse.Failed,
            error=code, message=error_text(message),
        ),
    )  # fmt: skip


def lookup(request: int, url: str, *, redirect: bool, authoritative: bool = False, url_tls: str = "") -> pb.BaseCommand:
    """LOOKUP_RESPONSE: Connect (this broker serves the topic at ``url``) or Redirect (ask
    the broker at ``url``)."""
    kind = pb.CommandLookupTopicResponse
    response = kind(
        request_id=request, brokerServiceUrl=url, response=kind.Redirect if redirect else kind.Connect,
        authoritative=authoritative,
    )  # fmt: skip
    if url_tls:
        response.brokerServiceUrlTls = url_tls
    return pb.BaseCommand(type=Type.LOOKUP_RESPONSE, lookupTopicResponse=response)


def lookup_failed(request: int, code: pb.ServerError, message: str) -> pb.BaseCommand:
    kind = pb.CommandLookupTopicResponse
    return pb.BaseCommand(
        type=Type.LOOKUP_RESPONSE,
        lookupTopicResponse=kind(request_id=request, response=kind.Failed, error=code, message=error_text(message)),
    )


def send_error(producer_id: int, sequence_id: int, code: pb.ServerError, message: str) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=Type.SEND_ERROR,
        send_error=pb.CommandSendError(producer_id=producer_id, sequence_id=sequence_id, error=code, message=error_text(message)),
    )


def producer_success(
    request: int, producer_name: str, last_sequence_id: int, schema_version: bytes | None = None,
    topic_epoch: int | None = None, producer_ready: bool = True,
) -> pb.BaseCommand:  # fmt: skip
    """PRODUCER_SUCCESS; ``schema_version`` (8 bytes) when the producer declared a schema,
    ``topic_epoch`` when the topic has one; ``producer_ready=False``: a WaitForExclusive
    producer was put in line (a second PRODUCER_SUCCESS follows when it holds the topic)."""
    command = pb.BaseCommand(
        type=Type.PRODUCER_SUCCESS,
        producer_success=pb.CommandProducerSuccess(
            request_id=request, producer_name=producer_name, last_sequence_id=last_sequence_id, producer_ready=producer_ready,
        ),
    )  # fmt: skip
    if schema_version is not None:
        command.producer_success.schema_version = schema_version
    if topic_epoch is not None:
        command.producer_success.topic_epoch = topic_epoch
    return command


def send_receipt(producer_id: int, sequence_id: int, highest_sequence_id: int, message: pb.MessageIdData) -> pb.BaseCommand:
    """SEND_RECEIPT: the send ``sequence_id`` (to ``highest_sequence_id``) is stored as ``message``."""
    return pb.BaseCommand(
        type=Type.SEND_RECEIPT,
        send_receipt=pb.CommandSendReceipt(
            producer_id=producer_id, sequence_id=sequence_id, highest_sequence_id=highest_sequence_id, message_id=message,
        ),
    )  # fmt: skip


def send_receipt_frame(
    producer_id: int, sequence_id: int, highest_sequence_id: int, ledger_id: int, entry_id: int, partition: int = -1,
) -> bytes:  # fmt: skip
    """The frame of :func:`send_receipt` for the entry (``ledger_id``, ``entry_id``) of
    ``partition``, byte for byte, built by setting the fields of one command in place: a
    receipt per send is the hot path, and this costs about a third of building the
    message id, the receipt and the command as separate messages."""
    command = pb.BaseCommand(type=Type.SEND_RECEIPT)
    receipt = command.send_receipt
    receipt.producer_id = producer_id
    receipt.sequence_id = sequence_id
    receipt.highest_sequence_id = highest_sequence_id
    mid = receipt.message_id
    mid.ledgerId = to_wire_id(ledger_id)
    mid.entryId = to_wire_id(entry_id)
    mid.partition = partition
    mid.batch_index = -1
    body = command.SerializeToString()
    return _SIZES.pack(4 + len(body), len(body)) + body


def close_producer(producer_id: int, request: int = 0) -> pb.BaseCommand:
    """CLOSE_PRODUCER from the broker: the client looks the topic up again and reconnects."""
    return pb.BaseCommand(
        type=Type.CLOSE_PRODUCER, close_producer=pb.CommandCloseProducer(producer_id=producer_id, request_id=request)
    )


def topics_of_namespace(request: int, topics: list[str], *, topics_hash: str, filtered: bool, changed: bool) -> pb.BaseCommand:
    """GET_TOPICS_OF_NAMESPACE_RESPONSE (``topics`` empty when not ``changed``)."""
    return pb.BaseCommand(
        type=Type.GET_TOPICS_OF_NAMESPACE_RESPONSE,
        getTopicsOfNamespaceResponse=pb.CommandGetTopicsOfNamespaceResponse(
            request_id=request, topics=topics, filtered=filtered, topics_hash=topics_hash, changed=changed,
        ),
    )  # fmt: skip
