"""Pulsar's WebSocket frames as pure functions: the producer's publish frame and its
ack, the consumer's and reader's message frame, the commands clients send them, and
Pulsar's error numbers (``WebSocketError``).

Shapes follow Pulsar's classes (``ProducerMessage``, ``ProducerAck``, ``ConsumerMessage``,
``ConsumerCommand``): fields that are null are left out; a field of the wrong JSON type
is a deserialization failure, as Jackson's is (numbers and booleans become strings where
Pulsar reads a string). Times are ISO-8601 with an offset; the gateway writes UTC
(``2024-05-01T12:00:00.123Z``).

Magnetar's additions (Pulsar's frames have no such fields): the message frame carries a
message's ordering key as ``orderingKey`` (base64, as Pulsar's frames carry binary) and
its schema version as ``schemaVersion`` (the version's 8 bytes read as a big-endian
signed long, the number Pulsar's REST and WebSocket producer APIs use for a version),
each only when the message has one; the publish frame takes an ``orderingKey`` (base64).
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from magnetar.client.message import Message
from magnetar.common import errors
from magnetar.gateway.websocket import ids

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_INTEGER = re.compile(r"-?[0-9]+", re.ASCII)
MAX_DELIVER_AFTER_MS = timedelta.max // _MS
"""The longest ``deliverAfterMs`` a delay can hold (about 2.7 million years)."""


class WebSocketError(enum.IntEnum):
    """Pulsar's WebSocket error numbers: ``send-error:N`` in producer acks, and the
    reason a session is closed (sent as close code ``4000 + N``: 1-8 lie outside
    RFC 6455's range, 4000-4999 is the range for applications)."""

    FailedToCreateProducer = 1
    FailedToSubscribe = 2
    FailedToDeserializeFromJSON = 3
    FailedToSerializeToJSON = 4
    AuthenticationError = 5
    NotAuthorizedError = 6
    PayloadEncodingError = 7
    UnknownError = 8

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self]

    @property
    def close_code(self) -> int:
        return 4000 + self.value


_DESCRIPTIONS = {
    WebSocketError.FailedToCreateProducer: "Failed to create producer",
    WebSocketError.FailedToSubscribe: "Failed to subscribe",
    WebSocketError.FailedToDeserializeFromJSON: "Failed to de-serialize from JSON",
    WebSocketError.FailedToSerializeToJSON: "Failed to serialize to JSON",
    WebSocketError.AuthenticationError: "Failed to authenticate client",
    WebSocketError.NotAuthorizedError: "Client is not authorized",
    WebSocketError.PayloadEncodingError: "Invalid payload encoding",
    WebSocketError.UnknownError: "Unknown error",
}


class FrameError(Exception):
    """A frame the gateway cannot use: ``error`` says which of Pulsar's errors it is;
    ``context`` is the publish frame's context when it was read before the failure."""

    def __init__(self, error: WebSocketError, message: str, context: str | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message
        self.context = context


# -- times -------------------------------------------------------------------------
def error_of(exc: BaseException) -> WebSocketError:
    """Pulsar's number for what failed the SDK handle under a socket: a broker refusing
    the caller's token (5) or role (6); anything else is 8."""
    if isinstance(exc, errors.AuthorizationError):
        return WebSocketError.NotAuthorizedError
    if isinstance(exc, errors.AuthenticationError):
        return WebSocketError.AuthenticationError
    return WebSocketError.UnknownError


def iso_time(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 in UTC with milliseconds: ``...T12:00:00.123Z``."""
    seconds, millis = divmod(ms, 1000)
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(seconds))}.{millis:03d}Z"


def parse_iso_time(text: str) -> int:
    """ISO-8601 with an offset (``2024-05-01T12:00:00.123+02:00`` or ``...Z``) as epoch
    milliseconds.

    Raises:
        ValueError: not such a time (no offset included).
    """
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"Text '{text}' could not be parsed as an ISO-8601 time with an offset") from None
    if when.tzinfo is None:
        raise ValueError(f"Text '{text}' has no offset (add Z or +hh:mm)")
    return (when - _EPOCH) // _MS


# -- producer ----------------------------------------------------------------------
@dataclass(slots=True)
class Publish:
    """One publish frame, checked."""

    payload: bytes
    properties: dict[str, str] | None = None
    key: str | None = None
    context: str | None = None
    event_time_ms: int | None = None
    deliver_at_ms: int | None = None
    deliver_after_ms: int | None = None
    ordering_key: bytes | None = None


def _json_object(text: str | bytes) -> dict[str, Any]:
    try:
        obj = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise FrameError(WebSocketError.FailedToDeserializeFromJSON, f"invalid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise FrameError(WebSocketError.FailedToDeserializeFromJSON, f"expected a JSON object, not {type(obj).__name__}")
    return obj


def _text(obj: dict[str, Any], field: str) -> str | None:
    """A string field; numbers and booleans read as their text (as Jackson coerces)."""
    value = obj.get(field)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    raise FrameError(WebSocketError.FailedToDeserializeFromJSON, f"{field} must be a string, not {type(value).__name__}")


def _long(obj: dict[str, Any], field: str) -> int | None:
    value = obj.get(field)
    if value is None:
        return None
    if isinstance(value, str) and _INTEGER.fullmatch(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**63) <= value < 2**63:
        raise FrameError(WebSocketError.FailedToDeserializeFromJSON, f"{field} must be an integer, not {value!r}")
    return value


def _properties(obj: dict[str, Any]) -> dict[str, str] | None:
    value = obj.get("properties")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise FrameError(WebSocketError.FailedToDeserializeFromJSON, "properties must be an object of strings")
    return {str(k): v for k in value if (v := _text(value, k)) is not None}


def _base64(text: str) -> bytes:
    """Standard base64; the padding may be left out (as Java's decoder allows)."""
    if len(text) % 4:
        text += "=" * (-len(text) % 4)
    return base64.b64decode(text, validate=True)


def parse_publish(text: str | bytes) -> Publish:
    """Read a producer's publish frame (``ProducerMessage``).

    Raises:
        FrameError: ``FailedToDeserializeFromJSON`` (not JSON, or a field of the wrong
            type; no context), ``PayloadEncodingError`` (payload missing or not base64,
            a bad ``eventTime``, a ``deliverAfterMs`` too far ahead, an ``orderingKey``
            not base64; with the context).
    """
    obj = _json_object(text)
    context = _text(obj, "context")
    key = _text(obj, "key")
    properties = _properties(obj)
    event_time = _text(obj, "eventTime")
    deliver_at = _long(obj, "deliverAt")
    deliver_after = _long(obj, "deliverAfterMs")
    ordering_key = _text(obj, "orderingKey")
    payload = obj.get("payload")
    if payload is None:
        raise FrameError(WebSocketError.PayloadEncodingError, "payload is missing", context)
    if not isinstance(payload, str):
        raise FrameError(WebSocketError.FailedToDeserializeFromJSON, "payload must be a base64 string")
    try:
        data = _base64(payload)
    except (binascii.Error, ValueError) as exc:
        raise FrameError(
            WebSocketError.PayloadEncodingError, f"Invalid Base64 message-payload error={exc}", context
        ) from None
    if deliver_after is not None and deliver_after > MAX_DELIVER_AFTER_MS:
        raise FrameError(
            WebSocketError.PayloadEncodingError,
            f"deliverAfterMs {deliver_after} is too far ahead (at most {MAX_DELIVER_AFTER_MS})", context,
        )
    ordering = None
    if ordering_key is not None:
        try:
            ordering = _base64(ordering_key) or None
        except (binascii.Error, ValueError) as exc:
            raise FrameError(WebSocketError.PayloadEncodingError, f"Invalid Base64 orderingKey error={exc}", context) from None
    event_time_ms = None
    if event_time is not None:
        try:
            event_time_ms = parse_iso_time(event_time)
        except ValueError as exc:
            raise FrameError(WebSocketError.PayloadEncodingError, str(exc), context) from None
    return Publish(
        data, properties, key, context, event_time_ms or None,
        deliver_at if deliver_at and deliver_at > 0 else None,
        deliver_after if deliver_after and deliver_after > 0 else None, ordering,
    )


def ack_ok(message_id: str, context: str | None) -> str:
    """The ack of a stored message (``ProducerAck``): ``message_id`` is its base64 id."""
    if context is None:
        return f'{{"result":"ok","messageId":"{message_id}"}}'
    return f'{{"result":"ok","messageId":"{message_id}","context":{json.dumps(context)}}}'


def ack_error(error: WebSocketError, message: str, context: str | None) -> str:
    """The ack of a message that was not stored: ``{"result":"send-error:N", ...}``."""
    frame: dict[str, Any] = {"result": f"send-error:{error.value}", "errorMsg": message}
    if context is not None:
        frame["context"] = context
    return json.dumps(frame)


# -- consumer and reader -----------------------------------------------------------
def message_frame(msg: Message) -> str:
    """A received message as the consumer and reader frame (``ConsumerMessage``)."""
    frame: dict[str, Any] = {
        "messageId": ids.encode(msg.message_id()),
        "payload": base64.b64encode(msg.data()).decode("ascii"),
        "properties": msg.properties(),
        "publishTime": iso_time(msg.publish_timestamp()),
        "redeliveryCount": msg.redelivery_count(),
    }
    if msg.event_timestamp():
        frame["eventTime"] = iso_time(msg.event_timestamp())
    if msg.has_partition_key():
        frame["key"] = msg.partition_key()
    if ordering_key := msg.ordering_key():
        frame["orderingKey"] = base64.b64encode(ordering_key).decode("ascii")
    if version := msg.schema_version():
        frame["schemaVersion"] = int.from_bytes(version, "big", signed=True)
    return json.dumps(frame)


class CommandType(enum.Enum):
    ACK = "ack"
    NEGATIVE_ACK = "negativeAcknowledge"
    PERMIT = "permit"
    UNSUBSCRIBE = "unsubscribe"
    END_OF_TOPIC = "isEndOfTopic"


@dataclass(frozen=True, slots=True)
class Command:
    """A consumer's or reader's frame (``ConsumerCommand``)."""

    type: CommandType
    message_id: str | None = None
    permit_messages: int | None = None


_COMMANDS = {t.value: t for t in CommandType if t is not CommandType.ACK}


def parse_command(text: str | bytes) -> Command:
    """Read a consumer's or reader's frame. As Pulsar, a frame whose ``type`` is absent or
    names no other command is an ack.

    Raises:
        FrameError: ``FailedToDeserializeFromJSON``: not JSON, a field of the wrong type,
            or a ``permit`` without ``permitMessages``.
    """
    obj = _json_object(text)
    kind = _COMMANDS.get(_text(obj, "type") or "", CommandType.ACK)
    message_id = _text(obj, "messageId")
    permits = _long(obj, "permitMessages")
    if kind is CommandType.PERMIT and permits is None:
        raise FrameError(WebSocketError.FailedToDeserializeFromJSON, "Missing permitMessages field for 'permit' command")
    return Command(kind, message_id, permits)


def end_of_topic_frame(reached: bool) -> str:
    return json.dumps({"endOfTopic": reached})
